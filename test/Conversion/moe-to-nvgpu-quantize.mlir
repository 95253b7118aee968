// RUN: moe-opt %s --split-input-file --moe-select-kernels="swap-ab-max-rows=0" --convert-moe-to-nvgpu --mlir-print-op-on-diagnostic=false -verify-diagnostics | FileCheck %s

// moe.quantize gets a quantize.v1 launch per encoding: MXFP8 (e4m3 or e5m2,
// [1, 32] E8M0), activation groups ([1, 128] f32) and weight blocks
// ([128, 128] f32, per expert of a 3-D input), from bf16 or f32 inputs.
// Ops with the same parameters share one kernel.
// CHECK-LABEL: func.func @mxfp8
// CHECK: moe.quantize {{.*}}moe.launch = {abi = "quantize.v1", batch = 1 : i64, block_cols = 32 : i64, block_rows = 1 : i64, cols = 4096 : i64, element = "f8E4M3FN", input = bf16, kernels = [{kernel = @moe_kernels::@moe_quantize_bf16_e4m3_e8m0_1x32}], max_rows = 2147483647 : i64, plan = {{.*}}, rank = 2 : i64, rows = -1 : i64, scale = "e8m0"}
// CHECK: moe.quantize {{.*}}moe.launch = {abi = "quantize.v1", batch = 1 : i64, block_cols = 32 : i64, block_rows = 1 : i64, cols = 4096 : i64, element = "f8E4M3FN", input = bf16, kernels = [{kernel = @moe_kernels::@moe_quantize_bf16_e4m3_e8m0_1x32}], max_rows = 16 : i64, plan = {{.*}}, rank = 2 : i64, rows = 16 : i64, scale = "e8m0"}
// CHECK-LABEL: func.func @mxfp8_e5m2_experts
// CHECK: moe.quantize {{.*}}moe.launch = {abi = "quantize.v1", batch = -1 : i64, block_cols = 32 : i64, block_rows = 1 : i64, cols = 256 : i64, element = "f8E5M2", input = f32, kernels = [{kernel = @moe_kernels::@moe_quantize_f32_e5m2_e8m0_1x32}], max_rows = 64 : i64, plan = {{.*}}, rank = 3 : i64, rows = 64 : i64, scale = "e8m0"}
// CHECK-LABEL: func.func @activation_groups
// CHECK: moe.quantize {{.*}}moe.launch = {abi = "quantize.v1", batch = 1 : i64, block_cols = 128 : i64, block_rows = 1 : i64, cols = 7168 : i64, element = "f8E4M3FN", input = bf16, kernels = [{kernel = @moe_kernels::@moe_quantize_bf16_e4m3_f32_1x128}], max_rows = 2147483647 : i64, plan = {{.*}}, rank = 2 : i64, rows = -1 : i64, scale = "f32"}
// CHECK-LABEL: func.func @weight_blocks
// CHECK: moe.quantize {{.*}}moe.launch = {abi = "quantize.v1", batch = 256 : i64, block_cols = 128 : i64, block_rows = 128 : i64, cols = 7168 : i64, element = "f8E4M3FN", input = bf16, kernels = [{kernel = @moe_kernels::@moe_quantize_bf16_e4m3_f32_128x128}], max_rows = 4096 : i64, plan = {{.*}}, rank = 3 : i64, rows = 4096 : i64, scale = "f32"}
// The 3-D block may spell its leading 1.
// CHECK: moe.quantize {{.*}}moe.launch = {abi = "quantize.v1", batch = -1 : i64, block_cols = 128 : i64, block_rows = 128 : i64, cols = 256 : i64, element = "f8E5M2", input = f32, kernels = [{kernel = @moe_kernels::@moe_quantize_f32_e5m2_f32_128x128}], max_rows = 256 : i64, plan = {{.*}}, rank = 3 : i64, rows = 256 : i64, scale = "f32"}
// CHECK-LABEL: func.func @small_groups
// CHECK: moe.quantize {{.*}}@moe_kernels::@moe_quantize_bf16_e4m3_f32_1x8}
// CHECK: moe.quantize {{.*}}@moe_kernels::@moe_quantize_bf16_e4m3_f32_1x256}

// The kernels: (input, values as i8, scales) memrefs [M, C], [M, C],
// [M/br, C/bc]; 256 threads; griddepcontrol first.
// CHECK: gpu.module @moe_kernels
// CHECK-LABEL: gpu.func @moe_quantize_bf16_e4m3_e8m0_1x32(%{{.*}}: memref<?x?xbf16>, %{{.*}}: memref<?x?xi8>, %{{.*}}: memref<?x?xi8>) kernel attributes {known_block_size = array<i32: 256, 1, 1>, moe.dynamic_shared_bytes = 0 : i64}
// CHECK-NEXT: nvvm.griddepcontrol wait
// CHECK-NEXT: nvvm.griddepcontrol launch_dependents
// [1, 32]: four chunks of 8 bf16 per thread, loaded first (16 bytes each),
// then per chunk the magnitude max over 4 lanes (2 xor shuffles), the E8M0
// scale, 8 IEEE divisions, e4m3 codes two at a time by the hardware's
// conversion (e5m2: the integer encode below), the codes as two words (one
// 8-byte store), the scale by the block's first lane.
// CHECK: scf.for
// CHECK-COUNT-4: vector.load %{{.*}} {alignment = 16 : i64} : memref<?xbf16>, vector<8xbf16>
// CHECK: arith.maxui
// CHECK: gpu.shuffle xor %{{.*}}, %c2_i32
// CHECK: gpu.shuffle xor %{{.*}}, %c1_i32
// CHECK: arith.divf
// CHECK-COUNT-4: nvvm.convert.f32x2.to.f8x2 {{.*}} {rnd = #nvvm.fp_rnd_mode<rn>, sat = #nvvm.sat_mode<satfinite>} : i16(f8E4M3FN)
// CHECK-NOT: llvm.roundeven
// CHECK: vector.store %{{.*}} {alignment = 8 : i64} : memref<?xi32>, vector<2xi32>
// CHECK: memref.store %{{.*}} : memref<?xi8>
// CHECK-COUNT-6: gpu.shuffle xor
// CHECK-NOT: gpu.shuffle
// CHECK-LABEL: gpu.func @moe_quantize_f32_e5m2_e8m0_1x32(%{{.*}}: memref<?x?xf32>, %{{.*}}: memref<?x?xi8>, %{{.*}}: memref<?x?xi8>)
// CHECK: vector.load %{{.*}} {alignment = 16 : i64} : memref<?xf32>, vector<8xf32>
// CHECK-NOT: nvvm.convert.f32x2.to.f8x2
// CHECK: llvm.call_intrinsic "llvm.roundeven.f32"
// CHECK-LABEL: gpu.func @moe_quantize_bf16_e4m3_f32_1x128(%{{.*}}: memref<?x?xbf16>, %{{.*}}: memref<?x?xi8>, %{{.*}}: memref<?x?xf32>)
// 16 lanes per block: 4 shuffles per chunk.
// CHECK-COUNT-16: gpu.shuffle xor
// CHECK-NOT: gpu.shuffle
// CHECK: memref.store %{{.*}} : memref<?xf32>
// [128, 128]: a CTA per block; 8 chunks per thread, 16 rows apart; a warp
// max, the 8 warps' maxima through shared memory between two barriers.
// CHECK-LABEL: gpu.func @moe_quantize_bf16_e4m3_f32_128x128(%{{.*}}: memref<?x?xbf16>, %{{.*}}: memref<?x?xi8>, %{{.*}}: memref<?x?xf32>) workgroup(%{{.*}} : memref<8xi32, #gpu.address_space<workgroup>>)
// CHECK: scf.for
// CHECK-COUNT-8: vector.load %{{.*}} {alignment = 16 : i64} : memref<?x?xbf16>, vector<8xbf16>
// CHECK-COUNT-5: gpu.shuffle xor
// CHECK: memref.store %{{.*}} : memref<8xi32, #gpu.address_space<workgroup>>
// CHECK: gpu.barrier
// CHECK-COUNT-8: memref.load %{{.*}} : memref<8xi32, #gpu.address_space<workgroup>>
// CHECK: gpu.barrier
// CHECK-COUNT-8: vector.store %{{.*}} {alignment = 8 : i64} : memref<?xi32>, vector<2xi32>
// CHECK: memref.store %{{.*}} : memref<?x?xf32>
// CHECK-LABEL: gpu.func @moe_quantize_f32_e5m2_f32_128x128(
// CHECK-LABEL: gpu.func @moe_quantize_bf16_e4m3_f32_1x8(
// One lane per block: no shuffle.
// CHECK-NOT: gpu.shuffle
// CHECK-LABEL: gpu.func @moe_quantize_bf16_e4m3_f32_1x256(
// CHECK-COUNT-20: gpu.shuffle xor
// CHECK-NOT: gpu.shuffle
func.func @mxfp8(%x: tensor<?x4096xbf16>, %y: tensor<16x4096xbf16>)
    -> (tensor<?x4096xf8E4M3FN>, tensor<16x128xf8E8M0FNU>) {
  %q, %s = moe.quantize %x to <f8E4M3FN, [1, 32], f8E8M0FNU>
      : tensor<?x4096xbf16> -> tensor<?x4096xf8E4M3FN>, tensor<?x128xf8E8M0FNU>
  %q2, %s2 = moe.quantize %y to <f8E4M3FN, [1, 32], f8E8M0FNU>
      : tensor<16x4096xbf16> -> tensor<16x4096xf8E4M3FN>, tensor<16x128xf8E8M0FNU>
  return %q, %s2 : tensor<?x4096xf8E4M3FN>, tensor<16x128xf8E8M0FNU>
}
func.func @mxfp8_e5m2_experts(%x: tensor<?x64x256xf32>)
    -> (tensor<?x64x256xf8E5M2>, tensor<?x64x8xf8E8M0FNU>) {
  %q, %s = moe.quantize %x to <f8E5M2, [1, 32], f8E8M0FNU>
      : tensor<?x64x256xf32> -> tensor<?x64x256xf8E5M2>, tensor<?x64x8xf8E8M0FNU>
  return %q, %s : tensor<?x64x256xf8E5M2>, tensor<?x64x8xf8E8M0FNU>
}
func.func @activation_groups(%x: tensor<?x7168xbf16>)
    -> (tensor<?x7168xf8E4M3FN>, tensor<?x56xf32>) {
  %q, %s = moe.quantize %x to <f8E4M3FN, [1, 128], f32>
      : tensor<?x7168xbf16> -> tensor<?x7168xf8E4M3FN>, tensor<?x56xf32>
  return %q, %s : tensor<?x7168xf8E4M3FN>, tensor<?x56xf32>
}
func.func @weight_blocks(%w: tensor<256x4096x7168xbf16>, %v: tensor<?x256x256xf32>)
    -> (tensor<256x4096x7168xf8E4M3FN>, tensor<?x2x2xf32>) {
  %q, %s = moe.quantize %w to <f8E4M3FN, [128, 128], f32>
      : tensor<256x4096x7168xbf16> -> tensor<256x4096x7168xf8E4M3FN>, tensor<256x32x56xf32>
  %q2, %s2 = moe.quantize %v to <f8E5M2, [1, 128, 128], f32>
      : tensor<?x256x256xf32> -> tensor<?x256x256xf8E5M2>, tensor<?x2x2xf32>
  return %q, %s2 : tensor<256x4096x7168xf8E4M3FN>, tensor<?x2x2xf32>
}
func.func @small_groups(%x: tensor<?x256xbf16>) -> (tensor<?x32xf32>, tensor<?x1xf32>) {
  %q, %s = moe.quantize %x to <f8E4M3FN, [1, 8], f32>
      : tensor<?x256xbf16> -> tensor<?x256xf8E4M3FN>, tensor<?x32xf32>
  %q2, %s2 = moe.quantize %x to <f8E4M3FN, [1, 256], f32>
      : tensor<?x256xbf16> -> tensor<?x256xf8E4M3FN>, tensor<?x1xf32>
  return %s, %s2 : tensor<?x32xf32>, tensor<?x1xf32>
}

// -----

func.func @f16_input(%x: tensor<?x128xf16>) -> tensor<?x1xf32> {
  // expected-error @+1 {{'moe.quantize' op cannot be lowered to sm_90a yet: only bf16 and f32 inputs are implemented}}
  %q, %s = moe.quantize %x to <f8E4M3FN, [1, 128], f32>
      : tensor<?x128xf16> -> tensor<?x128xf8E4M3FN>, tensor<?x1xf32>
  return %s : tensor<?x1xf32>
}

// -----

func.func @rank_one(%x: tensor<256xbf16>) -> tensor<2xf32> {
  // expected-error @+1 {{cannot be lowered to sm_90a yet: only 2-D [R, C] and 3-D [E, R, C] inputs are implemented}}
  %q, %s = moe.quantize %x to <f8E4M3FN, [128], f32>
      : tensor<256xbf16> -> tensor<256xf8E4M3FN>, tensor<2xf32>
  return %s : tensor<2xf32>
}

// -----

func.func @rank_four(%x: tensor<2x2x128x128xbf16>) -> tensor<2x2x1x1xf32> {
  // expected-error @+1 {{cannot be lowered to sm_90a yet: only 2-D [R, C] and 3-D [E, R, C] inputs are implemented}}
  %q, %s = moe.quantize %x to <f8E4M3FN, [128, 128], f32>
      : tensor<2x2x128x128xbf16> -> tensor<2x2x128x128xf8E4M3FN>, tensor<2x2x1x1xf32>
  return %s : tensor<2x2x1x1xf32>
}

// -----

func.func @blocks_across_experts(%x: tensor<4x128x128xbf16>) -> tensor<2x1x1xf32> {
  // expected-error @+1 {{cannot be lowered to sm_90a yet: the blocks of a 3-D [E, R, C] input must stay within one [R, C] (block [1, br, bc] or [br, bc])}}
  %q, %s = moe.quantize %x to <f8E4M3FN, [2, 128, 128], f32>
      : tensor<4x128x128xbf16> -> tensor<4x128x128xf8E4M3FN>, tensor<2x1x1xf32>
  return %s : tensor<2x1x1xf32>
}

// -----

func.func @group_of_48(%x: tensor<?x96xbf16>) -> tensor<?x2xf32> {
  // expected-error @+1 {{cannot be lowered to sm_90a yet: blocks of [1, B] with B one of 8, 16, 32, 64, 128, 256 (a block within a warp) and of [128, 128] (a block per CTA) are implemented, got [1, 48]}}
  %q, %s = moe.quantize %x to <f8E4M3FN, [1, 48], f32>
      : tensor<?x96xbf16> -> tensor<?x96xf8E4M3FN>, tensor<?x2xf32>
  return %s : tensor<?x2xf32>
}

// -----

func.func @group_of_512(%x: tensor<?x512xbf16>) -> tensor<?x1xf32> {
  // expected-error @+1 {{got [1, 512]}}
  %q, %s = moe.quantize %x to <f8E4M3FN, [1, 512], f32>
      : tensor<?x512xbf16> -> tensor<?x512xf8E4M3FN>, tensor<?x1xf32>
  return %s : tensor<?x1xf32>
}

// -----

func.func @two_rows(%x: tensor<4x128xbf16>) -> tensor<2x4xf32> {
  // expected-error @+1 {{got [2, 32]}}
  %q, %s = moe.quantize %x to <f8E4M3FN, [2, 32], f32>
      : tensor<4x128xbf16> -> tensor<4x128xf8E4M3FN>, tensor<2x4xf32>
  return %s : tensor<2x4xf32>
}

// -----

func.func @tile_of_64(%w: tensor<8x128x128xbf16>) -> tensor<8x2x2xf32> {
  // expected-error @+1 {{cannot be lowered to sm_90a yet: blocks of [1, B] with B one of 8, 16, 32, 64, 128, 256 (a block within a warp) and of [128, 128] (a block per CTA) are implemented, got [64, 64]}}
  %q, %s = moe.quantize %w to <f8E4M3FN, [64, 64], f32>
      : tensor<8x128x128xbf16> -> tensor<8x128x128xf8E4M3FN>, tensor<8x2x2xf32>
  return %s : tensor<8x2x2xf32>
}

// -----

func.func @tile_of_128x64(%w: tensor<128x128xbf16>) -> tensor<1x2xf32> {
  // expected-error @+1 {{got [128, 64]}}
  %q, %s = moe.quantize %w to <f8E4M3FN, [128, 64], f32>
      : tensor<128x128xbf16> -> tensor<128x128xf8E4M3FN>, tensor<1x2xf32>
  return %s : tensor<1x2xf32>
}
