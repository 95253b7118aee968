// RUN: moe-opt %s --split-input-file --moe-finalize-kernel-abi --verify-diagnostics | FileCheck %s

// Parameters listed in moe.tensor_map_args become 128-byte, 64-byte
// aligned by-value grid constants; the others stay as they are.
// CHECK-LABEL: llvm.func @kernel
// CHECK-SAME: (%{{.*}}: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant}, %{{.*}}: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant}, %{{.*}}: !llvm.ptr, %{{.*}}: i32)
// CHECK-LABEL: llvm.func @untouched
// CHECK-SAME: (%{{.*}}: !llvm.ptr)
gpu.module @kernels {
  llvm.func @kernel(%rows: !llvm.ptr, %weights: !llvm.ptr, %out: !llvm.ptr, %k: i32)
      attributes {nvvm.kernel, moe.tensor_map_args = array<i64: 0, 1>} {
    llvm.return
  }
  llvm.func @untouched(%p: !llvm.ptr) attributes {nvvm.kernel} {
    llvm.return
  }
}

// -----

gpu.module @kernels {
  // expected-error @+1 {{moe.tensor_map_args names parameter #1, which is not a pointer of the lowered kernel}}
  llvm.func @kernel(%rows: !llvm.ptr, %k: i32) attributes {nvvm.kernel, moe.tensor_map_args = array<i64: 0, 1>} {
    llvm.return
  }
}

// -----

gpu.module @kernels {
  // expected-error @+1 {{moe.tensor_map_args names parameter #5}}
  llvm.func @kernel(%rows: !llvm.ptr) attributes {nvvm.kernel, moe.tensor_map_args = array<i64: 5>} {
    llvm.return
  }
}
