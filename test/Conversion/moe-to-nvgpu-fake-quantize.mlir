// RUN: moe-opt %s --split-input-file --moe-select-kernels --convert-moe-to-nvgpu --mlir-print-op-on-diagnostic=false -verify-diagnostics | FileCheck %s
// RUN: moe-opt %s --split-input-file --moe-gpu-pipeline="format=isa" --mlir-print-op-on-diagnostic=false -verify-diagnostics | FileCheck %s --check-prefix=ISA

// moe.fake_quantize is a planned.v1 entry of the quantize kernel's round
// trip: (input, out) of the input's type, nothing else; its plan checks the
// blocks as quantize.v1's does.
// CHECK-LABEL: func.func @mxfp8
// CHECK: moe.fake_quantize {{.*}}moe.launch = {abi = "planned.v1", batch = 1 : i64, block_cols = 32 : i64, block_rows = 1 : i64, cols = 4096 : i64, element = "f8E4M3FN", input = bf16, kernels = [{kernel = @moe_kernels::@moe_fake_quantize_bf16_e4m3_e8m0_1x32}], max_rows = 2147483647 : i64, op = "moe.fake_quantize", plan = {args = [{align = 16 : i64, dims = "R,4096", dtype = "bf16", name = "input", role = "in"}, {align = 16 : i64, dims = "R,4096", dtype = "bf16", name = "out", role = "out"}], checks = [], sizes = [{max = "2147483647", min = "0", name = "R"}], steps = [{grid = "min(ceildiv(R*4096,8192),65535)", kernel = 0 : i64, params = "mem:input[R,4096];mem:out[R,4096]", when = "1"}], work = []}, rank = 2 : i64, rows = -1 : i64, scale = "e8m0"}
// A weight tensor in [128, 128] blocks, f32 scales.
// CHECK-LABEL: func.func @weight_blocks
// CHECK: moe.fake_quantize {{.*}}kernels = [{kernel = @moe_kernels::@moe_fake_quantize_bf16_e4m3_f32_128x128}]{{.*}}dims = "8,256,128", dtype = "bf16", name = "out"{{.*}}grid = "16"
// CHECK-LABEL: func.func @f32_e5m2
// CHECK: moe.fake_quantize {{.*}}@moe_kernels::@moe_fake_quantize_f32_e5m2_f32_1x128}{{.*}}dtype = "f32", name = "out"

// The kernels: (input, out) memrefs of the input's type; the quantize
// kernel's amax, scale and codes, then each pair of codes decoded by the
// hardware (exact), times the block's scale in f32, rounded to the type, and
// stored as the 8 values of the chunk (one 16-byte store): no code or scale
// is stored.
// CHECK: gpu.module @moe_kernels
// CHECK-LABEL: gpu.func @moe_fake_quantize_bf16_e4m3_e8m0_1x32(%{{.*}}: memref<?x?xbf16>, %{{.*}}: memref<?x?xbf16>) kernel attributes {known_block_size = array<i32: 256, 1, 1>, moe.dynamic_shared_bytes = 0 : i64}
// CHECK-NEXT: nvvm.griddepcontrol wait
// CHECK-NEXT: nvvm.griddepcontrol launch_dependents
// CHECK: scf.for
// CHECK-COUNT-4: vector.load %{{.*}} {alignment = 16 : i64} : memref<?xbf16>, vector<8xbf16>
// CHECK: gpu.shuffle xor %{{.*}}, %c2_i32
// CHECK: gpu.shuffle xor %{{.*}}, %c1_i32
// CHECK: arith.divf
// CHECK-COUNT-4: nvvm.convert.f32x2.to.f8x2
// CHECK-COUNT-4: nvvm.convert.f8x2.to.f16x2 %{{.*}} : vector<2xi8>(f8E4M3FN) -> vector<2xf16>
// CHECK: arith.mulf
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: vector.store %{{.*}} {alignment = 16 : i64} : memref<?xbf16>, vector<8xbf16>
// CHECK-NOT: memref.store
// CHECK-NOT: memref<?xi32>
// CHECK: gpu.return
// CHECK-LABEL: gpu.func @moe_fake_quantize_bf16_e4m3_f32_128x128(%{{.*}}: memref<?x?xbf16>, %{{.*}}: memref<?x?xbf16>) workgroup(%{{.*}} : memref<8xi32, #gpu.address_space<workgroup>>)
// CHECK: gpu.barrier
// CHECK: gpu.barrier
// CHECK-COUNT-8: vector.store %{{.*}} {alignment = 16 : i64} : memref<?x?xbf16>, vector<8xbf16>
// CHECK-NOT: memref.store %{{.*}} : memref<?x?xf32>
// CHECK: gpu.return
// f32 keeps the product unrounded: no truncf.
// CHECK-LABEL: gpu.func @moe_fake_quantize_f32_e5m2_f32_1x128(%{{.*}}: memref<?x?xf32>, %{{.*}}: memref<?x?xf32>)
// CHECK: nvvm.convert.f8x2.to.f16x2 %{{.*}} : vector<2xi8>(f8E5M2) -> vector<2xf16>
// CHECK-NOT: arith.truncf
// CHECK: vector.store %{{.*}} : memref<?xf32>, vector<8xf32>
// CHECK: gpu.return

// Through ptxas: the decode is the hardware's conversion.
// ISA: cvt.rn.f16x2.e4m3x2
// ISA: cvt.rn.f16x2.e5m2x2
func.func @mxfp8(%x: tensor<?x4096xbf16>) -> tensor<?x4096xbf16> {
  %y = moe.fake_quantize %x to <f8E4M3FN, [1, 32], f8E8M0FNU> : tensor<?x4096xbf16>
  return %y : tensor<?x4096xbf16>
}
func.func @weight_blocks(%w: tensor<8x256x128xbf16>) -> tensor<8x256x128xbf16> {
  %y = moe.fake_quantize %w to <f8E4M3FN, [1, 128, 128], f32> : tensor<8x256x128xbf16>
  return %y : tensor<8x256x128xbf16>
}
func.func @f32_e5m2(%x: tensor<?x256xf32>) -> tensor<?x256xf32> {
  %y = moe.fake_quantize %x to <f8E5M2, [1, 128], f32> : tensor<?x256xf32>
  return %y : tensor<?x256xf32>
}

// -----

// The kernel's blocks only.
func.func @group_of_512(%x: tensor<?x512xbf16>) -> tensor<?x512xbf16> {
  // expected-error @+1 {{'moe.fake_quantize' op cannot be lowered to sm_90a yet: blocks of [1, B] with B one of 8, 16, 32, 64, 128, 256 (a block within a warp) and of [128, 128] (a block per CTA) are implemented, got [1, 512]}}
  %y = moe.fake_quantize %x to <f8E4M3FN, [1, 512], f32> : tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}

// -----

func.func @rank_4(%x: tensor<2x2x4x64xbf16>) -> tensor<2x2x4x64xbf16> {
  // expected-error @+1 {{cannot be lowered to sm_90a yet: only 2-D [R, C] and 3-D [E, R, C] inputs are implemented}}
  %y = moe.fake_quantize %x to <f8E4M3FN, [1, 32], f8E8M0FNU> : tensor<2x2x4x64xbf16>
  return %y : tensor<2x2x4x64xbf16>
}
