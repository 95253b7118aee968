// What the compiler writes, the runtime reads (docs/runtime-contract.md):
// moe-opt compiles two entries, moe-translate writes the bundle, and the
// runtime's reader (moe-bundle-info, no MLIR inside) lists the same
// entries, kernels, row ranges and launch facts.
// RUN: env CUDA_ROOT=%cuda_toolkit moe-opt %s --moe-gpu-pipeline -o %t.mlir
// RUN: moe-translate --moe-to-bundle %t.mlir -o %t.moebundle
// RUN: moe-bundle-info %t.moebundle | FileCheck %s
// A bundle cut short, or with a byte changed in its text, is refused with a
// message, not a crash.
// RUN: head -c 300 %t.moebundle > %t.cut.moebundle
// RUN: not moe-bundle-info %t.cut.moebundle 2>&1 | FileCheck %s --check-prefix=CUT
// RUN: sed -e 's/^MOEBUNDLE 4$/MOEBUNDLE 5/' %t.moebundle > %t.v5.moebundle
// RUN: not moe-bundle-info %t.v5.moebundle 2>&1 | FileCheck %s --check-prefix=VERSION

// CHECK: bundle version=4 chip=sm_90a images=1 entries=2
// CHECK-NEXT: entry prefill op=moe.grouped_matmul abi=grouped_matmul.v3 epilogue=store experts=8 n=1024 k=512 max_rows=2147483647 offsets=i32
// CHECK-NEXT: kernel grouped_matmul_bf16_16x64x64_s4_swapab_off32 rows=[1,16] tile=16x64x64 stages=4 threads=128 smem=40960 swap_ab=1 image=moe_kernels
// CHECK-NEXT: kernel grouped_matmul_bf16_64x256x64_s4_off32 rows=[17,64] tile=64x256x64 stages=4 threads=128 smem=172032 swap_ab=0 image=moe_kernels
// CHECK-NEXT: kernel grouped_matmul_bf16_128x256x64_s4_off32 rows=[65,2147483647] tile=128x256x64 stages=4 threads=256 smem=212992 swap_ab=0 image=moe_kernels
// CHECK-NEXT: entry decode op=moe.grouped_matmul abi=grouped_matmul.v3 epilogue=store experts=8 n=512 k=1024 max_rows=8 offsets=i64
// CHECK-NEXT: kernel grouped_matmul_bf16_16x64x64_s4_swapab_off64 rows=[1,2147483647]

// CUT: moe-bundle-info: error: {{.*}}bundle line 3: image 'moe_kernels': its {{[0-9]+}} bytes and '\n' do not fit
// VERSION: moe-bundle-info: error: {{.*}}bundle line 1: {{.*}}version 5
func.func @prefill(%rows: tensor<?x512xbf16>, %w: tensor<8x1024x512xbf16>, %off: tensor<9xi32>) -> tensor<?x1024xbf16> {
  %y = moe.grouped_matmul %rows, %w, %off
      : (tensor<?x512xbf16>, tensor<8x1024x512xbf16>, tensor<9xi32>) -> tensor<?x1024xbf16>
  return %y : tensor<?x1024xbf16>
}
func.func @decode(%rows: tensor<8x1024xbf16>, %w: tensor<8x512x1024xbf16>, %off: tensor<9xi64>) -> tensor<8x512xbf16> {
  %y = moe.grouped_matmul %rows, %w, %off
      : (tensor<8x1024xbf16>, tensor<8x512x1024xbf16>, tensor<9xi64>) -> tensor<8x512xbf16>
  return %y : tensor<8x512xbf16>
}
