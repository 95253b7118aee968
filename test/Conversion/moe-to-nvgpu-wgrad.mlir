// moe.grouped_wgrad on sm_90a (GroupedWgradKernel.cpp): one CTA per
// (expert, 128 x 128 tile of dW) reduces the expert's rows in steps of 64,
// both operands as they lie (WGMMA's M-major A and N-major B); a
// grouped_wgrad.v1 entry.
// RUN: moe-opt %s --split-input-file --moe-select-kernels --convert-moe-to-nvgpu | FileCheck %s
// RUN: moe-opt %s --split-input-file --moe-select-kernels --convert-moe-to-nvgpu | FileCheck %s --check-prefix=BIAS

// The entry: out [E, N, K] = [8, 256, 512]; grid E * ceil(N/128) *
// ceil(K/256) = 32 CTAs, launched at M = 0 too (every gradient zero), when
// the tensor maps name `out` (M = 0 rows have no address to map).
// CHECK-LABEL: func.func @wgrad(
// CHECK: moe.grouped_wgrad
// CHECK-SAME: moe.kernels = #moe.kernel<chip = "sm_90a">
// CHECK-SAME: abi = "grouped_wgrad.v1", experts = 8 : i64, k = 512 : i64
// CHECK-SAME: kernels = [{kernel = @moe_kernels::@grouped_wgrad_bf16_128x256x64_s4_off32}]
// CHECK-SAME: n = 256 : i64, offsets = i32
// CHECK-SAME: {align = 16 : i64, dims = "M,256", dtype = "bf16", name = "grad", role = "in"}
// CHECK-SAME: {align = 16 : i64, dims = "M,512", dtype = "bf16", name = "rows", role = "in"}
// CHECK-SAME: {align = 16 : i64, dims = "8,256,512", dtype = "bf16", name = "out", role = "out"}
// CHECK-SAME: {grid = "32", kernel = 0 : i64, params = "tmap:grad:bf16:[256,M]:[512]:[64,64];tmap:rows:bf16:[512,M]:[1024]:[64,64];mem:offsets[9];mem:out[8,256,512];i32:M", when = "M>=1"}
// CHECK-SAME: {grid = "32", kernel = 0 : i64, params = "tmap:out:bf16:[256,1]:[512]:[64,64];tmap:out:bf16:[512,1]:[1024]:[64,64];mem:offsets[9];mem:out[8,256,512];i32:M", when = "M==0"}

// The kernel: the expert's clamped range from a lane-strided running maximum
// of the offsets (then across the warp), after the previous kernel.
// CHECK: gpu.func @grouped_wgrad_bf16_128x256x64_s4_off32({{.*}}) kernel attributes {known_block_size = array<i32: 256, 1, 1>, moe.dynamic_shared_bytes = 196608 : i64, moe.tensor_map_args = array<i64: 0, 1>, moe.tile = array<i64: 128, 256, 64, 4>}
// CHECK: nvvm.griddepcontrol wait
// CHECK: scf.for {{.*}} step %c32{{.*}} iter_args({{.*}}) -> (i64, i64)
// CHECK: arith.maxsi
// CHECK: gpu.shuffle xor
// CHECK: arith.minsi
// A stage is two 64-column boxes of the gradient, then four of the rows, at
// the step's first row.
// CHECK: nvgpu.mbarrier.arrive.expect_tx %{{.*}}, %c49152
// CHECK-COUNT-6: nvgpu.tma.async.load %{{.*}}[%{{.*}}, %{{.*}}], %{{.*}} to %{{.*}} : <tensor = memref<64x64xbf16,
// The K loop: a step past the expert's end zeroes its rows in every box of
// the stage (6 boxes x 8 vectors per row) before the async proxy reads them.
// CHECK: scf.for {{.*}} iter_args(%{{.*}} = %{{.*}}) -> (!nvgpu.warpgroup.accumulator<fragmented = vector<64x256xf32>>)
// CHECK: nvgpu.mbarrier.try_wait.parity
// CHECK: scf.if
// CHECK: arith.constant dense<0> : vector<16xi8>
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c256
// CHECK: vector.store
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK-NEXT: gpu.barrier
// Four k16 wgmma with both operands transposed, through descriptors of the
// 64-row boxes (0x4000004002000000 | address >> 4).
// CHECK-COUNT-4: nvgpu.warpgroup.mma {{.*}} {transposeA, transposeB, waitGroup = 4 : i64} : <tensor = memref<64x16xbf16, {{.*}}>>, <tensor = memref<16x256xbf16, {{.*}}>>, <fragmented = vector<64x256xf32>>
// CHECK-NOT: nvgpu.warpgroup.mma
// CHECK: gpu.barrier
// CHECK: scf.yield
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// The tile to out[expert, row, col] in bf16, within [N, K]: two adjacent
// columns a 4-byte store into a swizzled staging tile in the drained stage
// buffers, then whole rows in coalesced 16-byte stores.
// CHECK: gpu.barrier
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: vector.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] {alignment = 4 : i64} : memref<64x256xbf16, #gpu.address_space<workgroup>>, vector<2xbf16>
// CHECK: gpu.barrier
// CHECK: vector.load %{{.*}}[%{{.*}}, %{{.*}}] {alignment = 16 : i64} : memref<64x256xbf16, #gpu.address_space<workgroup>>, vector<8xbf16>
// CHECK: vector.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}] {alignment = 16 : i64} : memref<?x?x?xbf16>, vector<8xbf16>
func.func @wgrad(%g: tensor<?x256xbf16>, %x: tensor<?x512xbf16>, %off: tensor<9xi32>) -> tensor<8x256x512xbf16> {
  %dw = moe.grouped_wgrad %g, %x, %off : (tensor<?x256xbf16>, tensor<?x512xbf16>, tensor<9xi32>) -> tensor<8x256x512xbf16>
  return %dw : tensor<8x256x512xbf16>
}

// -----

// With a bias gradient (GPT-OSS), a second kernel sums each expert's rows of
// the gradient: the entry is planned.v1 (op moe.grouped_wgrad), its plan
// the wgrad's steps and then the sum's, at every M (zeros for an expert
// without rows), a CTA per (expert, 256 columns).
// BIAS-LABEL: func.func @wgrad_bias(
// BIAS: moe.grouped_wgrad
// BIAS-SAME: abi = "planned.v1", bias = f32
// BIAS-SAME: kernels = [{kernel = @moe_kernels::@grouped_wgrad_bf16_128x256x64_s4_off32}, {kernel = @moe_kernels::@moe_bias_grad_off32_f32}]
// BIAS-SAME: op = "moe.grouped_wgrad"
// BIAS-SAME: {align = 16 : i64, dims = "8,256,512", dtype = "bf16", name = "out", role = "out"}, {align = 16 : i64, dims = "8,256", dtype = "f32", name = "bias_grad", role = "out"}
// BIAS-SAME: {grid = "8", kernel = 1 : i64, params = "mem:grad[M,256];mem:offsets[9];mem:bias_grad[8,256]", when = "1"}
// The sum: each warp its rows in order, 8 columns a lane; the warps' sums
// through shared memory in warp order, written by warp 0.
// BIAS: gpu.func @moe_bias_grad_off32_f32(%{{.*}}: memref<?x?xbf16>, %{{.*}}: memref<?xi32>, %{{.*}}: memref<?x?xf32>) workgroup(%{{.*}} : memref<2048xf32, #gpu.address_space<workgroup>>) kernel
// BIAS: scf.for
// BIAS: vector.load {{.*}} : memref<?x?xbf16>, vector<8xbf16>
// BIAS: gpu.barrier
// BIAS-COUNT-8: vector.load {{.*}} : memref<2048xf32, #gpu.address_space<workgroup>>, vector<8xf32>
// BIAS: vector.store {{.*}} : memref<?x?xf32>, vector<8xf32>
func.func @wgrad_bias(%g: tensor<?x256xbf16>, %x: tensor<?x512xbf16>, %off: tensor<9xi32>) -> (tensor<8x256x512xbf16>, tensor<8x256xf32>) {
  %dw, %db = moe.grouped_wgrad %g, %x, %off : (tensor<?x256xbf16>, tensor<?x512xbf16>, tensor<9xi32>) -> (tensor<8x256x512xbf16>, tensor<8x256xf32>)
  return %dw, %db : tensor<8x256x512xbf16>, tensor<8x256xf32>
}

// -----

// kn_weights: out [E, K, N] = [8, 512, 256], the same kernel over the
// operands swapped (the rows first); a planned.v1 entry (grouped_wgrad.v1
// has [E, N, K] only) whose n and k still name the gradient's and the rows'
// columns; grid E * ceil(K/128) * ceil(N/256) = 32.
// CHECK-LABEL: func.func @kn(
// CHECK: moe.grouped_wgrad {{.*}} kn_weights
// CHECK-SAME: abi = "planned.v1", experts = 8 : i64, k = 512 : i64
// CHECK-SAME: n = 256 : i64
// CHECK-SAME: op = "moe.grouped_wgrad"
// CHECK-SAME: {align = 16 : i64, dims = "8,512,256", dtype = "bf16", name = "out", role = "out"}
// CHECK-SAME: {grid = "32", kernel = 0 : i64, params = "tmap:rows:bf16:[512,M]:[1024]:[64,64];tmap:grad:bf16:[256,M]:[512]:[64,64];mem:offsets[9];mem:out[8,512,256];i32:M", when = "M>=1"}
// CHECK-SAME: weights = "kn"
func.func @kn(%g: tensor<?x256xbf16>, %x: tensor<?x512xbf16>, %off: tensor<9xi32>) -> tensor<8x512x256xbf16> {
  %dw = moe.grouped_wgrad %g, %x, %off kn_weights
      : (tensor<?x256xbf16>, tensor<?x512xbf16>, tensor<9xi32>) -> tensor<8x512x256xbf16>
  return %dw : tensor<8x512x256xbf16>
}
