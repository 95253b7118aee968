// RUN: moe-opt %s --moe-select-kernels="fp8-epilogue-quantize=1" --convert-moe-to-nvgpu --split-input-file --mlir-print-op-on-diagnostic=false -verify-diagnostics | FileCheck %s
// RUN: moe-opt %s --moe-select-kernels --convert-moe-to-nvgpu --split-input-file --mlir-print-op-on-diagnostic=false -verify-diagnostics | FileCheck %s --check-prefix=KERNEL
// RUN: moe-opt %s --moe-select-kernels="mxfp8-widen=1" --convert-moe-to-nvgpu --split-input-file --mlir-print-op-on-diagnostic=false -verify-diagnostics | FileCheck %s --check-prefix=WIDEN
// RUN: moe-opt %s --moe-select-kernels="warp-specialize=none" --convert-moe-to-nvgpu --split-input-file --mlir-print-op-on-diagnostic=false -verify-diagnostics | FileCheck %s --check-prefix=UNSPEC
// RUN: moe-opt %s --moe-select-kernels="stages=3" --convert-moe-to-nvgpu --split-input-file --mlir-print-op-on-diagnostic=false -verify-diagnostics | FileCheck %s --check-prefix=STAGES3
// RUN: moe-opt %s --moe-select-kernels="fuse-round-trips=0" --convert-moe-to-nvgpu --split-input-file --mlir-print-op-on-diagnostic=false -verify-diagnostics | FileCheck %s --check-prefix=SEPARATE

// Block FP8 (DeepSeek-V3's format): a grouped_matmul whose rows and weights
// are both dequantized e4m3 with f32 scales in [1, 128] and [128, 128]
// blocks runs on e4m3 WGMMA. Its entry has its own ABI and format; the
// kernels take 128 e4m3 of K per stage (the 128 bytes of bf16's 64) and at
// most 128 columns (a second accumulator holds each K step's products until
// they are scaled). Both dequantizes become part of the launch.
// CHECK-LABEL: func @block_fp8
// CHECK: moe.dequantize {{.*}} {moe.fused_into_launch}
// CHECK: moe.dequantize {{.*}} {moe.fused_into_launch}
// CHECK: moe.grouped_matmul {{.*}} moe.launch = {abi = "grouped_matmul_fp8.v1", activation = "none", bias = "none", epilogue = "row_scale", experts = 8 : i64, format = "fp8_block", k = 512 : i64, kernels = [
// CHECK-SAME: {kernel = @moe_kernels::@grouped_matmul_fp8block_16x64x128_s4_swapab_rowscale_off32, rows_max = 16 : i64, rows_min = 1 : i64},
// CHECK-SAME: {kernel = @moe_kernels::@grouped_matmul_fp8block_64x128x128_s4_rowscale_off32, rows_max = 64 : i64, rows_min = 17 : i64},
// CHECK-SAME: {kernel = @moe_kernels::@grouped_matmul_fp8block_128x192x128_s4_rowscale_ws_off32, rows_max = 2147483647 : i64, rows_min = 65 : i64}]
// CHECK-SAME: n = 256 : i64
// The scales follow rows_max in the kernel's arguments.
// CHECK: gpu.func @grouped_matmul_fp8block_16x64x128_s4_swapab_rowscale_off32(%{{.*}}: !llvm.ptr {llvm.align = 64 : i64}, %{{.*}}: !llvm.ptr {llvm.align = 64 : i64}, %{{.*}}: memref<?xi32>, %{{.*}}: memref<?x?xbf16>, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: memref<?x?xf32>, %{{.*}}: memref<?x?x?xf32>, %{{.*}}: memref<?xf32>)
// CHECK-COUNT-4: nvgpu.warpgroup.mma {{.*}} : <tensor = memref<64x32xf8E4M3FN, {{.*}}>>, <tensor = memref<32x16xf8E4M3FN, {{.*}}>>
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: llvm.intr.fma
// CHECK: gpu.func @grouped_matmul_fp8block_64x128x128_s4_rowscale_off32
// CHECK-COUNT-4: nvgpu.warpgroup.mma {{.*}} : <tensor = memref<64x32xf8E4M3FN, {{.*}}>>, <tensor = memref<32x128xf8E4M3FN, {{.*}}>>
func.func @block_fp8(%xq: tensor<?x512xf8E4M3FN>, %xs: tensor<?x4xf32>,
                     %wq: tensor<8x256x512xf8E4M3FN>, %ws: tensor<8x2x4xf32>,
                     %off: tensor<9xi32>, %weight: tensor<?xf32>) -> tensor<?x256xbf16> {
  %x = moe.dequantize %xq, %xs from <f8E4M3FN, [1, 128], f32>
      : tensor<?x512xf8E4M3FN>, tensor<?x4xf32> -> tensor<?x512xbf16>
  %w = moe.dequantize %wq, %ws from <f8E4M3FN, [128, 128], f32>
      : tensor<8x256x512xf8E4M3FN>, tensor<8x2x4xf32> -> tensor<8x256x512xbf16>
  %y = moe.grouped_matmul %x, %w, %off scale %weight
      : (tensor<?x512xbf16>, tensor<8x256x512xbf16>, tensor<9xi32>, tensor<?xf32>) -> tensor<?x256xbf16>
  return %y : tensor<?x256xbf16>
}

// -----

// A dequantize that something else also reads keeps its own (missing)
// kernel: it is not marked as part of the launch.
// CHECK-LABEL: func @shared_dequantize
// CHECK: moe.dequantize
// CHECK-NOT: moe.fused_into_launch
// CHECK: moe.dequantize {{.*}} {moe.fused_into_launch}
func.func @shared_dequantize(%xq: tensor<?x512xf8E4M3FN>, %xs: tensor<?x4xf32>,
                             %wq: tensor<8x256x512xf8E4M3FN>, %ws: tensor<8x2x4xf32>,
                             %off: tensor<9xi32>) -> (tensor<?x256xbf16>, tensor<?x512xbf16>) {
  %x = moe.dequantize %xq, %xs from <f8E4M3FN, [1, 128], f32>
      : tensor<?x512xf8E4M3FN>, tensor<?x4xf32> -> tensor<?x512xbf16>
  %w = moe.dequantize %wq, %ws from <f8E4M3FN, [128, 128], f32>
      : tensor<8x256x512xf8E4M3FN>, tensor<8x2x4xf32> -> tensor<8x256x512xbf16>
  %y = moe.grouped_matmul %x, %w, %off
      : (tensor<?x512xbf16>, tensor<8x256x512xbf16>, tensor<9xi32>) -> tensor<?x256xbf16>
  return %y, %x : tensor<?x256xbf16>, tensor<?x512xbf16>
}

// -----

func.func @weights_only(%x: tensor<?x512xbf16>, %wq: tensor<8x256x512xf8E4M3FN>,
                        %ws: tensor<8x2x4xf32>, %off: tensor<9xi32>) -> tensor<?x256xbf16> {
  %w = moe.dequantize %wq, %ws from <f8E4M3FN, [128, 128], f32>
      : tensor<8x256x512xf8E4M3FN>, tensor<8x2x4xf32> -> tensor<8x256x512xbf16>
  // expected-error @+1 {{cannot be lowered to sm_90a yet: quantized operands are implemented as block FP8 or MXFP8: rows and weights both moe.dequantize of f8E4M3FN, with f32 scales}}
  %y = moe.grouped_matmul %x, %w, %off
      : (tensor<?x512xbf16>, tensor<8x256x512xbf16>, tensor<9xi32>) -> tensor<?x256xbf16>
  return %y : tensor<?x256xbf16>
}

// -----

// MXFP8 (OCP MX): e4m3 rows and weights with one E8M0 scale per 32 K,
// entry format mxfp8, scales as bytes. The scales of a K step are decoded
// to f32 into shared memory ([2 buffers, weight rows + tokens, 4 blocks])
// during the step before. Every form promotes per 32 K on e4m3 WGMMA
// (scale-d 0: each wgmma's products in registers of their own): swap-AB
// (decode) loads its rows' four scales at once, issues the step's four
// wgmma, waits once and adds each times its row's and column's scales; the
// normal forms (prefill, 64 registers per set) take turns between two sets,
// one scaled while the next multiplies. With mxfp8-widen=1 the normal forms
// instead widen the step's e4m3 tiles to bf16 in shared memory times their
// scales (exact) and run bf16 WGMMA into the accumulator, the next step
// widened meanwhile (two bf16 copies: 2 stages at 128 x 128); measured
// slower.
// CHECK-LABEL: func @mxfp8
// CHECK: moe.dequantize {{.*}} {moe.fused_into_launch}
// CHECK: moe.dequantize {{.*}} {moe.fused_into_launch}
// CHECK: moe.grouped_matmul {{.*}} moe.launch = {abi = "grouped_matmul_fp8.v1", activation = "none", bias = "none", epilogue = "store", experts = 8 : i64, format = "mxfp8", k = 512 : i64, kernels = [
// CHECK-SAME: {kernel = @moe_kernels::@grouped_matmul_mxfp8_16x64x128_s4_swapab_off32, rows_max = 16 : i64, rows_min = 1 : i64},
// CHECK-SAME: {kernel = @moe_kernels::@grouped_matmul_mxfp8_64x128x128_s4_ws_off32, rows_max = 64 : i64, rows_min = 17 : i64},
// CHECK-SAME: {kernel = @moe_kernels::@grouped_matmul_mxfp8_128x128x128_s4_ws_off32, rows_max = 2147483647 : i64, rows_min = 65 : i64}]
// CHECK: gpu.func @grouped_matmul_mxfp8_16x64x128_s4_swapab_off32(%{{.*}}: !llvm.ptr {llvm.align = 64 : i64}, %{{.*}}: !llvm.ptr {llvm.align = 64 : i64}, %{{.*}}: memref<?xi32>, %{{.*}}: memref<?x?xbf16>, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: memref<?x?xi8>, %{{.*}}: memref<?x?x?xi8>)
// CHECK: memref.load %{{.*}} : memref<?x?x?xi8>
// CHECK: memref.load %{{.*}} : memref<?x?xi8>
// CHECK: vector.store %{{.*}} : memref<2x80x4xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// CHECK: scf.for
// CHECK-COUNT-6: vector.load %{{.*}} : memref<2x80x4xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// CHECK-COUNT-4: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 16, k = 32>, D[<f32>, <zero>], A[<e4m3>, <one>, <row>], B[<e4m3>, <one>, <col>]
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: llvm.intr.fma
// CHECK: gpu.barrier
// The 64-row form is warp-specialized too (without it ptxas kept its
// accumulator in local memory); with one consumer warpgroup it keeps
// ptxas's register count (no setmaxnreg).
// CHECK: gpu.func @grouped_matmul_mxfp8_64x128x128_s4_ws_off32({{.*}}known_block_size = array<i32: 256, 1, 1>
// CHECK-NOT: nvvm.setmaxregister
// The 128-row form is warp-specialized: each full mbarrier expects the
// issuer's expect-tx arrival and one per producer thread, which stages the
// step's scales block-major in the step's stage (4 x 4 x 256 f32) before
// arriving; the consumers read a fragment's two adjacent columns' scales as
// one vector<2xf32>.
// CHECK: gpu.func @grouped_matmul_mxfp8_128x128x128_s4_ws_off32({{.*}}known_block_size = array<i32: 384, 1, 1>
// CHECK-COUNT-4: nvgpu.mbarrier.init %{{.*}}, %c129
// CHECK-COUNT-4: nvgpu.mbarrier.init %{{.*}}, %c256
// CHECK: nvvm.setmaxregister  decrease 40
// A row's four codes of a step are one 32-bit load where every row of both
// code tensors is word-aligned (checked once), else four byte loads.
// CHECK: scf.if
// CHECK: llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<1> -> i32
// CHECK: } else {
// CHECK-COUNT-4: memref.load %{{.*}} : memref<?x?x?xi8>
// CHECK: memref.store %{{.*}} : memref<4x4x256xf32, #gpu.address_space<workgroup>>
// CHECK: nvgpu.mbarrier.arrive
// CHECK: nvvm.setmaxregister  increase 232
// CHECK-NOT: gpu.barrier
// CHECK: scf.for
// CHECK-NOT: gpu.barrier
// CHECK: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 128, k = 32>, D[<f32>, <zero>]
// CHECK: nvvm.wgmma.wait.group.sync.aligned 1
// CHECK: nvvm.wgmma.mma_async
// CHECK: nvvm.wgmma.wait.group.sync.aligned 1
// CHECK: vector.load %{{.*}} : memref<4x4x256xf32, #gpu.address_space<workgroup>>, vector<2xf32>
// CHECK: llvm.intr.fma
// A stage count that is not a power of two: step -> stage and round in 32
// bits (64-bit division by 3 or 5 made ptxas spill the MXFP8 consumers).
// STAGES3-LABEL: func @mxfp8
// STAGES3: gpu.func @grouped_matmul_mxfp8_128x128x128_s3_ws_off32
// STAGES3: arith.divui %{{.*}}, %c3_i32{{.*}} : i32
// STAGES3: arith.remui %{{.*}}, %c3_i32{{.*}} : i32
// STAGES3-NOT: arith.remui %{{.*}}, %c3 : index
// STAGES3: gpu.return
// warp-specialize=none: the consumers stage the scales in two buffers
// behind a CTA barrier per K step.
// UNSPEC-LABEL: func @mxfp8
// UNSPEC: gpu.func @grouped_matmul_mxfp8_64x128x128_s4_off32({{.*}}known_block_size = array<i32: 128, 1, 1>
// UNSPEC: gpu.func @grouped_matmul_mxfp8_128x128x128_s4_off32({{.*}}known_block_size = array<i32: 256, 1, 1>
// UNSPEC: vector.store %{{.*}} : memref<2x256x4xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// UNSPEC: gpu.barrier
// UNSPEC: scf.for
// UNSPEC: nvvm.wgmma.mma_async
// UNSPEC: gpu.barrier
// WIDEN-LABEL: func @mxfp8
// WIDEN: @grouped_matmul_mxfp8_16x64x128_s4_swapab_off32
// WIDEN-SAME: @grouped_matmul_mxfp8wide_64x128x128_s4_off32
// WIDEN-SAME: @grouped_matmul_mxfp8wide_128x128x128_s2_off32
// WIDEN: gpu.func @grouped_matmul_mxfp8wide_128x128x128_s2_off32
// WIDEN: scf.for
// WIDEN-COUNT-8: nvgpu.warpgroup.mma {{.*}} {waitGroup = 8 : i64} : <tensor = memref<64x16xbf16, {{.*}}>>, <tensor = memref<16x128xbf16, {{.*}}>>
// WIDEN: gpu.barrier
// WIDEN: nvgpu.mbarrier.try_wait.parity
// WIDEN: vector.load %{{.*}} : memref<{{[0-9]+}}xi8, #gpu.address_space<workgroup>>, vector<16xi8>
// WIDEN: nvvm.convert.f8x2.to.f16x2 {{.*}} : vector<2xi8>(f8E4M3FN) -> vector<2xf16>
// WIDEN: arith.truncf {{.*}} : vector<2xf32> to vector<2xbf16>
// WIDEN: vector.store %{{.*}} : memref<{{[0-9]+}}xi8, #gpu.address_space<workgroup>>, vector<16xi8>
// WIDEN: nvvm.fence.proxy
// WIDEN: gpu.barrier
func.func @mxfp8(%xq: tensor<?x512xf8E4M3FN>, %xs: tensor<?x16xf8E8M0FNU>,
                 %wq: tensor<8x256x512xf8E4M3FN>, %ws: tensor<8x256x16xf8E8M0FNU>,
                 %off: tensor<9xi32>) -> tensor<?x256xbf16> {
  %x = moe.dequantize %xq, %xs from <f8E4M3FN, [1, 32], f8E8M0FNU>
      : tensor<?x512xf8E4M3FN>, tensor<?x16xf8E8M0FNU> -> tensor<?x512xbf16>
  %w = moe.dequantize %wq, %ws from <f8E4M3FN, [1, 32], f8E8M0FNU>
      : tensor<8x256x512xf8E4M3FN>, tensor<8x256x16xf8E8M0FNU> -> tensor<8x256x512xbf16>
  %y = moe.grouped_matmul %x, %w, %off
      : (tensor<?x512xbf16>, tensor<8x256x512xbf16>, tensor<9xi32>) -> tensor<?x256xbf16>
  return %y : tensor<?x256xbf16>
}

// -----

func.func @fused_mlp_bf16_weights(%xq: tensor<?x512xf8E4M3FN>, %xs: tensor<?x4xf32>,
                     %w13: tensor<8x512x512xbf16>, %w2: tensor<8x512x256xbf16>,
                     %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  %x = moe.dequantize %xq, %xs from <f8E4M3FN, [1, 128], f32>
      : tensor<?x512xf8E4M3FN>, tensor<?x4xf32> -> tensor<?x512xbf16>
  // expected-error @+1 {{quantized operands of a fused expert MLP are implemented as block FP8 or MXFP8, the same for both GEMMs: rows and both weights}}
  %y = moe.expert_mlp silu %x, %off, %w13, %w2
      : (tensor<?x512xbf16>, tensor<9xi32>, tensor<8x512x512xbf16>, tensor<8x512x256xbf16>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}

// -----

// Block-FP8 operands but a bf16 intermediate: the down GEMM would need bf16
// rows with FP8 weights, which no kernel reads.
func.func @fused_mlp_bf16_intermediate(
    %xq: tensor<?x512xf8E4M3FN>, %xs: tensor<?x4xf32>,
    %w13q: tensor<8x512x512xf8E4M3FN>, %w13s: tensor<8x4x4xf32>,
    %w2q: tensor<8x512x256xf8E4M3FN>, %w2s: tensor<8x4x2xf32>,
    %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  %x = moe.dequantize %xq, %xs from <f8E4M3FN, [1, 128], f32>
      : tensor<?x512xf8E4M3FN>, tensor<?x4xf32> -> tensor<?x512xbf16>
  %w13 = moe.dequantize %w13q, %w13s from <f8E4M3FN, [1, 128, 128], f32>
      : tensor<8x512x512xf8E4M3FN>, tensor<8x4x4xf32> -> tensor<8x512x512xbf16>
  %w2 = moe.dequantize %w2q, %w2s from <f8E4M3FN, [1, 128, 128], f32>
      : tensor<8x512x256xf8E4M3FN>, tensor<8x4x2xf32> -> tensor<8x512x256xbf16>
  // expected-error @+1 {{a block-FP8 expert MLP needs 'intermediate <f8E4M3FN, [1, 128], f32>'}}
  %y = moe.expert_mlp silu %x, %off, %w13, %w2
      : (tensor<?x512xbf16>, tensor<9xi32>, tensor<8x512x512xbf16>, tensor<8x512x256xbf16>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}

// -----

// An MXFP8 expert MLP: MXFP8 gate-up (bf16 out), the activation's [1, 32]
// quantize kernel, MXFP8 down. No fp8-epilogue-quantize form (that option
// is block FP8's): the gate-up stores bf16 either way.
// CHECK-LABEL: func @fused_mlp_mxfp8
// CHECK: moe.expert_mlp {{.*}} moe.launch = [{abi = "grouped_matmul_fp8.v1", activation = "silu", bias = "none", epilogue = "swiglu", experts = 8 : i64, format = "mxfp8", k = 512 : i64, kernels = [
// CHECK-SAME: {kernel = @moe_kernels::@grouped_matmul_mxfp8_16x64x128_s4_swapab_swiglu_off32,
// CHECK-SAME: {kernel = @moe_kernels::@grouped_matmul_mxfp8_128x128x128_s4_swiglu_ws_off32,
// CHECK-SAME: part = "gate_up", plan = {{.*}}}, {abi = "quantize.v1", {{.*}}element = "f8E4M3FN", {{.*}}part = "intermediate", {{.*}}scale = "e8m0"}
// CHECK-SAME: {abi = "grouped_matmul_fp8.v1", activation = "none", bias = "none", epilogue = "store", experts = 8 : i64, format = "mxfp8", k = 256 : i64,
// CHECK-SAME: part = "down", plan = {{.*}}}]
func.func @fused_mlp_mxfp8(
    %xq: tensor<?x512xf8E4M3FN>, %xs: tensor<?x16xf8E8M0FNU>,
    %w13q: tensor<8x512x512xf8E4M3FN>, %w13s: tensor<8x512x16xf8E8M0FNU>,
    %w2q: tensor<8x512x256xf8E4M3FN>, %w2s: tensor<8x512x8xf8E8M0FNU>,
    %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  %x = moe.dequantize %xq, %xs from <f8E4M3FN, [1, 32], f8E8M0FNU>
      : tensor<?x512xf8E4M3FN>, tensor<?x16xf8E8M0FNU> -> tensor<?x512xbf16>
  %w13 = moe.dequantize %w13q, %w13s from <f8E4M3FN, [1, 1, 32], f8E8M0FNU>
      : tensor<8x512x512xf8E4M3FN>, tensor<8x512x16xf8E8M0FNU> -> tensor<8x512x512xbf16>
  %w2 = moe.dequantize %w2q, %w2s from <f8E4M3FN, [1, 1, 32], f8E8M0FNU>
      : tensor<8x512x256xf8E4M3FN>, tensor<8x512x8xf8E8M0FNU> -> tensor<8x512x256xbf16>
  %y = moe.expert_mlp silu %x, %off, %w13, %w2 intermediate <f8E4M3FN, [1, 32], f8E8M0FNU>
      : (tensor<?x512xbf16>, tensor<9xi32>, tensor<8x512x512xbf16>, tensor<8x512x256xbf16>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}

// -----

// An MXFP8 MLP whose activation would be quantized in block FP8's groups:
// the down GEMM reads its rows in its own format only.
func.func @fused_mlp_mxfp8_block_intermediate(
    %xq: tensor<?x512xf8E4M3FN>, %xs: tensor<?x16xf8E8M0FNU>,
    %w13q: tensor<8x512x512xf8E4M3FN>, %w13s: tensor<8x512x16xf8E8M0FNU>,
    %w2q: tensor<8x512x256xf8E4M3FN>, %w2s: tensor<8x512x8xf8E8M0FNU>,
    %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  %x = moe.dequantize %xq, %xs from <f8E4M3FN, [1, 32], f8E8M0FNU>
      : tensor<?x512xf8E4M3FN>, tensor<?x16xf8E8M0FNU> -> tensor<?x512xbf16>
  %w13 = moe.dequantize %w13q, %w13s from <f8E4M3FN, [1, 1, 32], f8E8M0FNU>
      : tensor<8x512x512xf8E4M3FN>, tensor<8x512x16xf8E8M0FNU> -> tensor<8x512x512xbf16>
  %w2 = moe.dequantize %w2q, %w2s from <f8E4M3FN, [1, 1, 32], f8E8M0FNU>
      : tensor<8x512x256xf8E4M3FN>, tensor<8x512x8xf8E8M0FNU> -> tensor<8x512x256xbf16>
  // expected-error @+1 {{an MXFP8 expert MLP needs 'intermediate <f8E4M3FN, [1, 32], f8E8M0FNU>'}}
  %y = moe.expert_mlp silu %x, %off, %w13, %w2 intermediate <f8E4M3FN, [1, 128], f32>
      : (tensor<?x512xbf16>, tensor<9xi32>, tensor<8x512x512xbf16>, tensor<8x512x256xbf16>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}

// -----

// Block-FP8 gate-up weights with MXFP8 down weights: one format per MLP.
func.func @fused_mlp_mixed_formats(
    %xq: tensor<?x512xf8E4M3FN>, %xs: tensor<?x4xf32>,
    %w13q: tensor<8x512x512xf8E4M3FN>, %w13s: tensor<8x4x4xf32>,
    %w2q: tensor<8x512x256xf8E4M3FN>, %w2s: tensor<8x512x8xf8E8M0FNU>,
    %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  %x = moe.dequantize %xq, %xs from <f8E4M3FN, [1, 128], f32>
      : tensor<?x512xf8E4M3FN>, tensor<?x4xf32> -> tensor<?x512xbf16>
  %w13 = moe.dequantize %w13q, %w13s from <f8E4M3FN, [1, 128, 128], f32>
      : tensor<8x512x512xf8E4M3FN>, tensor<8x4x4xf32> -> tensor<8x512x512xbf16>
  %w2 = moe.dequantize %w2q, %w2s from <f8E4M3FN, [1, 1, 32], f8E8M0FNU>
      : tensor<8x512x256xf8E4M3FN>, tensor<8x512x8xf8E8M0FNU> -> tensor<8x512x256xbf16>
  // expected-error @+1 {{implemented as block FP8 or MXFP8, the same for both GEMMs}}
  %y = moe.expert_mlp silu %x, %off, %w13, %w2 intermediate <f8E4M3FN, [1, 128], f32>
      : (tensor<?x512xbf16>, tensor<9xi32>, tensor<8x512x512xbf16>, tensor<8x512x256xbf16>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}

// -----

// A bf16 MLP with an MXFP8 `intermediate`: bf16 GEMMs on the activation's
// round trip (MXFP8 computed as bf16 GEMMs of exact values). The gate-up
// epilogue stores the round trip (quantize_output, `round_trip` in its
// launch, kernels named _mxe4m3rt), so there is no part between the GEMMs.
// With fuse-round-trips=0 the gate-up stores bf16 and a third part, the
// quantize kernel's round trip (planned.v1 moe.fake_quantize) on the
// [M, I] activation, runs between them, in place.
// CHECK-LABEL: func @fused_mlp_bf16_round_trip
// CHECK: moe.expert_mlp {{.*}}#moe.expert_mlp_kernels<gate_up = <chip = "sm_90a", forms = [{{.*}}], quantize_output = true>, down = <chip = "sm_90a", forms = [{{.*}}]>>
// CHECK-SAME: moe.launch = [{abi = "grouped_matmul.v3", activation = "silu", {{.*}}epilogue = "swiglu"
// CHECK-SAME: kernels = [{kernel = @moe_kernels::@grouped_matmul_bf16_16x64x64_s4_swapab_swiglu_mxe4m3rt_off32,
// CHECK-SAME: part = "gate_up"{{.*}}round_trip = "mxfp8_e4m3"}
// CHECK-SAME: , {abi = "grouped_matmul.v3", activation = "none", {{.*}}epilogue = "store", {{.*}}k = 256 : i64{{.*}}part = "down"
// CHECK-NOT: part = "intermediate"
// Swap-AB: a warp's 32 lanes are 32 columns of one row, one block.
// CHECK-LABEL: gpu.func @grouped_matmul_bf16_16x64x64_s4_swapab_swiglu_mxe4m3rt_off32
// CHECK: gpu.shuffle xor %{{.*}}, %c16_i32
// CHECK: gpu.shuffle xor %{{.*}}, %c8_i32
// CHECK: gpu.shuffle xor %{{.*}}, %c4_i32
// CHECK: gpu.shuffle xor %{{.*}}, %c2_i32
// CHECK: gpu.shuffle xor %{{.*}}, %c1_i32
// CHECK: nvvm.convert.f8x2.to.f16x2
// CHECK: memref.store %{{.*}} : memref<?x?xbf16>
// CHECK: gpu.return
// The readers of the staging tile make it: four lanes' 8 columns are a
// [1, 32] block (two shuffles), each chunk's codes decoded, times the scale,
// rounded to bf16, stored.
// CHECK-LABEL: gpu.func @grouped_matmul_bf16_128x256x64_s4_swiglu_mxe4m3rt_off32
// CHECK: gpu.shuffle xor %{{.*}}, %c2_i32
// CHECK: gpu.shuffle xor %{{.*}}, %c1_i32
// CHECK: arith.divf
// CHECK-COUNT-4: nvvm.convert.f32x2.to.f8x2
// CHECK-COUNT-4: nvvm.convert.f8x2.to.f16x2 %{{.*}} : vector<2xi8>(f8E4M3FN) -> vector<2xf16>
// CHECK: vector.store %{{.*}} {alignment = 16 : i64} : memref<?x?xbf16>, vector<8xbf16>
// CHECK: gpu.return
// SEPARATE-LABEL: func @fused_mlp_bf16_round_trip
// SEPARATE: moe.launch = [{abi = "grouped_matmul.v3", activation = "silu", {{.*}}epilogue = "swiglu"{{.*}}kernels = [{kernel = @moe_kernels::@grouped_matmul_bf16_16x64x64_s4_swapab_swiglu_off32,{{.*}}part = "gate_up"
// SEPARATE-NOT: round_trip
// SEPARATE-SAME: {abi = "planned.v1", batch = 1 : i64, block_cols = 32 : i64, block_rows = 1 : i64, cols = 256 : i64, element = "f8E4M3FN", input = bf16, kernels = [{kernel = @moe_kernels::@moe_fake_quantize_bf16_e4m3_e8m0_1x32}], {{.*}}op = "moe.fake_quantize", part = "intermediate"
// SEPARATE-SAME: {abi = "grouped_matmul.v3", activation = "none", {{.*}}epilogue = "store", {{.*}}k = 256 : i64{{.*}}part = "down"
func.func @fused_mlp_bf16_round_trip(%x: tensor<?x512xbf16>, %w13: tensor<8x512x512xbf16>,
                                     %w2: tensor<8x512x256xbf16>, %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  %y = moe.expert_mlp silu %x, %off, %w13, %w2 intermediate <f8E4M3FN, [1, 32], f8E8M0FNU>
      : (tensor<?x512xbf16>, tensor<9xi32>, tensor<8x512x512xbf16>, tensor<8x512x256xbf16>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}

// -----

// A round trip the quantize kernel has no block for is refused.
func.func @fused_mlp_bf16_round_trip_block(%x: tensor<?x512xbf16>, %w13: tensor<8x512x512xbf16>,
                                           %w2: tensor<8x512x256xbf16>, %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  // expected-error @+1 {{the round trip of the 'intermediate' between the bf16 GEMMs: blocks of [1, B] with B one of 8, 16, 32, 64, 128, 256}}
  %y = moe.expert_mlp silu %x, %off, %w13, %w2 intermediate <f8E4M3FN, [1, 4], f32>
      : (tensor<?x512xbf16>, tensor<9xi32>, tensor<8x512x512xbf16>, tensor<8x512x256xbf16>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}

// -----

// The block-FP8 expert MLP with fp8-epilogue-quantize: an FP8 gate-up GEMM
// whose epilogue quantizes
// silu(gate) * up (rounded to bf16) into [1, 128]-group e4m3 rows and their
// scales (`out`), and an FP8 down GEMM; the three dequantizes are part of
// the launches. A work item covers one group of 128 outputs: two 64-output
// tiles (four 32-output swap-AB tiles) back to back, their activations in
// shared memory, then quantized row by row (the quantize kernel's code).
// CHECK-LABEL: func.func @fused_mlp_fp8
// CHECK-COUNT-3: moe.dequantize {{.*}} {moe.fused_into_launch}
// CHECK: moe.expert_mlp
// CHECK-SAME: moe.launch = [{abi = "grouped_matmul_fp8.v1", activation = "silu", {{.*}}epilogue = "swiglu", {{.*}}format = "fp8_block", {{.*}}k = 512 : i64, {{.*}}n = 512 : i64, {{.*}}out = "f8E4M3FN", part = "gate_up", plan = {{.*}}}, {abi = "grouped_matmul_fp8.v1", activation = "none", {{.*}}epilogue = "row_scale", {{.*}}format = "fp8_block", {{.*}}k = 256 : i64, {{.*}}n = 512 : i64, {{.*}}part = "down", plan = {{.*}}}]
// The codes go to memref<?x?xi8>, the scales follow the weights' scales.
// CHECK: gpu.func @grouped_matmul_fp8block_16x64x128_s8_swapab_swiglu_e4m3out_off32(%{{.*}}: !llvm.ptr {{.*}}, %{{.*}}: !llvm.ptr {{.*}}, %{{.*}}: memref<?xi32>, %{{.*}}: memref<?x?xi8>, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: memref<?x?xf32>, %{{.*}}: memref<?x?x?xf32>, %{{.*}}: memref<?x?xf32>)
// CHECK: scf.for %{{.*}} = %c0{{.*}} to %c4{{.*}} step %c1
// CHECK: nvgpu.warpgroup.mma.store
// CHECK: arith.truncf {{.*}} : f32 to bf16
// CHECK: nvvm.convert.f32x2.to.f8x2
// CHECK: gpu.func @grouped_matmul_fp8block_64x128x128_s4_swiglu_e4m3out_off32
// CHECK: scf.for %{{.*}} = %c0{{.*}} to %c2{{.*}} step %c1
// CHECK: nvvm.convert.f32x2.to.f8x2
// CHECK: gpu.func @grouped_matmul_fp8block_128x128x128_s4_swiglu_e4m3out_ws_off32
// CHECK: gpu.func @grouped_matmul_fp8block_128x192x128_s4_rowscale_ws_off32

// By default the gate-up stores bf16 and a quantize kernel makes it the down
// GEMM's rows (the fused epilogue is slower until the GEMM overlaps it with
// its MMAs; it is checked against this form on the GPU).
// KERNEL-LABEL: func.func @fused_mlp_fp8
// KERNEL: moe.expert_mlp
// KERNEL-SAME: moe.launch = [{abi = "grouped_matmul_fp8.v1", activation = "silu", {{.*}}epilogue = "swiglu", {{.*}}format = "fp8_block", {{.*}}k = 512 : i64, {{.*}}n = 512 : i64, offsets = i32, part = "gate_up", plan = {{.*}}}, {abi = "quantize.v1", batch = 1 : i64, block_cols = 128 : i64, block_rows = 1 : i64, cols = 256 : i64, element = "f8E4M3FN", input = bf16, kernels = [{kernel = @moe_kernels::@moe_quantize_bf16_e4m3_f32_1x128}], {{.*}}part = "intermediate", plan = {{.*}}, rank = 2 : i64, rows = -1 : i64, scale = "f32"},
// KERNEL-SAME: {abi = "grouped_matmul_fp8.v1", activation = "none", {{.*}}epilogue = "row_scale", {{.*}}format = "fp8_block", {{.*}}k = 256 : i64, {{.*}}n = 512 : i64, {{.*}}part = "down", plan = {{.*}}}]
// KERNEL: gpu.func @grouped_matmul_fp8block_128x192x128_s4_swiglu_ws_off32
// KERNEL: gpu.func @moe_quantize_bf16_e4m3_f32_1x128
// KERNEL: gpu.func @grouped_matmul_fp8block_128x192x128_s4_rowscale_ws_off32
func.func @fused_mlp_fp8(
    %xq: tensor<?x512xf8E4M3FN>, %xs: tensor<?x4xf32>,
    %w13q: tensor<8x512x512xf8E4M3FN>, %w13s: tensor<8x4x4xf32>,
    %w2q: tensor<8x512x256xf8E4M3FN>, %w2s: tensor<8x4x2xf32>,
    %off: tensor<9xi32>, %scale: tensor<?xf32>) -> tensor<?x512xbf16> {
  %x = moe.dequantize %xq, %xs from <f8E4M3FN, [1, 128], f32>
      : tensor<?x512xf8E4M3FN>, tensor<?x4xf32> -> tensor<?x512xbf16>
  %w13 = moe.dequantize %w13q, %w13s from <f8E4M3FN, [1, 128, 128], f32>
      : tensor<8x512x512xf8E4M3FN>, tensor<8x4x4xf32> -> tensor<8x512x512xbf16>
  %w2 = moe.dequantize %w2q, %w2s from <f8E4M3FN, [1, 128, 128], f32>
      : tensor<8x512x256xf8E4M3FN>, tensor<8x4x2xf32> -> tensor<8x512x256xbf16>
  %y = moe.expert_mlp silu %x, %off, %w13, %w2 scale %scale intermediate <f8E4M3FN, [1, 128], f32>
      : (tensor<?x512xbf16>, tensor<9xi32>, tensor<8x512x512xbf16>, tensor<8x512x256xbf16>, tensor<?xf32>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}
