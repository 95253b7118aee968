// RUN: moe-opt %s --moe-select-kernels="swap-ab-max-rows=0 tile-m=64 tile-n=128 stages=2" --convert-moe-to-nvgpu --split-input-file --mlir-print-op-on-diagnostic=false -verify-diagnostics | FileCheck %s

// One kernel per offsets type, shared by every grouped_matmul that uses it;
// each op carries what a runtime needs to launch it (moe.launch): ABI,
// static shapes (-1: dynamic), row limit and its kernels with the row
// counts each one takes.
// CHECK: module attributes {gpu.container_module}
// CHECK-LABEL: func @two_matmuls
// CHECK: moe.grouped_matmul {{.*}} moe.launch = {abi = "grouped_matmul.v3", activation = "none", bias = "none", epilogue = "store", experts = 8 : i64, k = 256 : i64, kernels = [{kernel = @moe_kernels::@grouped_matmul_bf16_64x128x64_s2_off64, rows_max = 2147483647 : i64, rows_min = 1 : i64}], max_rows = 2147483647 : i64, n = 512 : i64, offsets = i64, plan = {{.*}}}}
// CHECK: moe.grouped_matmul {{.*}} moe.launch = {{{.*}}kernels = [{kernel = @moe_kernels::@grouped_matmul_bf16_64x128x64_s2_off64, {{.*}} n = 256 : i64
// CHECK: gpu.module @moe_kernels
// CHECK: memref.global @moe_dynamic_smem : memref<0xi8, #gpu.address_space<workgroup>> {alignment = 1024 : i64}
// The ABI of docs/runtime-contract.md: tensor maps (by value once
// moe-finalize-kernel-abi ran), offsets, out, K, rows_min, rows_max.
// CHECK: gpu.func @grouped_matmul_bf16_64x128x64_s2_off64(%{{.*}}: !llvm.ptr {llvm.align = 64 : i64}, %{{.*}}: !llvm.ptr {llvm.align = 64 : i64}, %{{.*}}: memref<?xi64>, %{{.*}}: memref<?x?xbf16>, %{{.*}}: i32, %[[MIN:.*]]: i32, %[[MAX:.*]]: i32) workgroup(%[[ENDS:.*]] : memref<1024xi32, #gpu.address_space<workgroup>>, %[[TILES:.*]] : memref<1024xi32, #gpu.address_space<workgroup>>) kernel
// CHECK-SAME: known_block_size = array<i32: 128, 1, 1>
// CHECK-SAME: moe.dynamic_shared_bytes = 57344
// CHECK-SAME: moe.swap_ab = false
// CHECK-SAME: moe.tensor_map_args = array<i64: 0, 1>
// CHECK-SAME: moe.tile = array<i64: 64, 128, 64, 2>
// Once per CTA: mbarriers, then the tile table of the eligible experts
// (below).
// CHECK-COUNT-2: nvgpu.mbarrier.init
// CHECK: nvvm.fence.mbarrier.init
// Then, still overlapping the previous kernel (the offsets are complete
// when this kernel can launch, contract §3.6), the CTA's threads copy the
// clamped offsets (the experts' row ends) to shared memory.
// CHECK-NOT: nvvm.griddepcontrol
// CHECK: scf.for
// CHECK: arith.maxsi
// CHECK: arith.minsi
// CHECK: memref.store %{{.*}}, %[[ENDS]]
// CHECK: gpu.barrier
// The tile table (E < 1024): warp 0 scans 32 experts per step (row ends
// by a shuffle prefix max, tiles of the experts whose row count lies in
// [rows_min, rows_max] by a shuffle prefix sum) and stores the running
// row ends and the tile prefix in shared memory. From 65 experts to 960
// every warp (4 here) takes segments of 32 instead: their largest ends (xor
// shuffles) into the table's tail, a CTA barrier, each segment scanned
// after the earlier ones' ends, a barrier, the earlier segments' tiles
// added.
// CHECK: arith.cmpi slt, %c64{{(_[0-9]+)?}}, %{{.*}} : index
// CHECK: arith.cmpi sle, %{{.*}}, %c960{{(_[0-9]+)?}} : index
// CHECK: scf.if
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c4{{(_[0-9]+)?}} {
// CHECK-COUNT-5: gpu.shuffle  xor
// CHECK: memref.store %{{.*}}, %[[TILES]]
// CHECK: gpu.barrier
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c4{{(_[0-9]+)?}} {
// CHECK-COUNT-5: gpu.shuffle  xor
// CHECK-COUNT-5: gpu.shuffle  up
// CHECK: memref.store %{{.*}}, %[[ENDS]]
// CHECK: memref.store %{{.*}}, %[[TILES]]
// CHECK: gpu.barrier
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c4{{(_[0-9]+)?}} {
// CHECK-COUNT-5: gpu.shuffle  xor
// CHECK: memref.store %{{.*}}, %[[TILES]]
// CHECK: } else {
// CHECK: scf.if
// CHECK: memref.load %[[ENDS]]
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c32
// CHECK-COUNT-5: gpu.shuffle  up
// CHECK: arith.cmpi sge, %{{.*}}, %{{.*}} : i32
// CHECK: arith.cmpi sle, %{{.*}}, %{{.*}} : i32
// CHECK-COUNT-5: gpu.shuffle  up
// CHECK-COUNT-2: gpu.shuffle  idx
// CHECK: memref.store %{{.*}}, %[[ENDS]]
// CHECK: memref.store %{{.*}}, %[[TILES]]
// CHECK: gpu.barrier
// Only then the wait for the previous kernel (whose output, the rows, the
// loads below read); no early launch of the next one.
// CHECK: nvvm.griddepcontrol wait
// CHECK-NOT: nvvm.griddepcontrol launch_dependents
// The slot count: the table's last entry, or (E >= 1024) the same scan
// per warp over the offsets beyond the cache, a ballot finding the slot.
// CHECK: scf.if %{{.*}} -> (index)
// CHECK: memref.load %[[TILES]]
// CHECK: } else {
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c32
// CHECK: nvvm.vote.sync  ballot
// CHECK: llvm.intr.cttz
// Persistent CTAs: work items c, c + gridDim.x, ... (tiles x column
// tiles) in an L2-friendly order (groups of 8 token tiles, all column
// tiles of a group before the next), each looked up as above.
// CHECK: gpu.grid_dim x
// The first item is looked up (a binary search of the table: 10 steps)
// and its first stages loaded before the loop; each iteration looks up the
// next item while its own loads fly.
// CHECK: scf.if %{{.*}} -> (index, index, index, index)
// CHECK-COUNT-10: memref.load %[[TILES]]
// CHECK: } else {
// CHECK: nvvm.vote.sync  ballot
// CHECK-COUNT-2: nvgpu.mbarrier.arrive.expect_tx
// CHECK: scf.while
// CHECK: arith.cmpi slt
// CHECK: scf.condition
// CHECK: arith.divui
// CHECK: arith.remui
// CHECK: scf.if %{{.*}} -> (index, index, index, index)
// CHECK: memref.load %[[TILES]]
// CHECK: nvvm.vote.sync  ballot
// CHECK: nvgpu.mbarrier.try_wait.parity
// CHECK-COUNT-4: nvgpu.warpgroup.mma {{.*}} {waitGroup = 4 : i64} : {{.*}} -> <fragmented = vector<64x128xf32>>
// The previous step's stage is refilled while this step's wgmma run.
// CHECK: gpu.barrier
// CHECK: nvgpu.tma.async.load
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: gpu.barrier
// The stages are free: the next item's first loads go out before the
// epilogue, which stages bf16 pairs of the accumulator fragment in a 64x64
// tile of shared memory past the stages and stores 16-byte row chunks.
// CHECK-COUNT-2: nvgpu.mbarrier.arrive.expect_tx
// CHECK: builtin.unrealized_conversion_cast %{{.*}} : !nvgpu.warpgroup.accumulator<fragmented = vector<64x128xf32>> to !llvm.struct<(struct<(f32,
// CHECK: memref.view %{{.*}} : memref<57344xi8, #gpu.address_space<workgroup>> to memref<64x64xbf16, #gpu.address_space<workgroup>>
// CHECK-COUNT-16: vector.store %{{.*}} {alignment = 4 : i64} : memref<64x64xbf16, #gpu.address_space<workgroup>>, vector<2xbf16>
// CHECK: nvvm.barrier id = %{{.*}} number_of_threads = %{{.*}}
// CHECK: vector.load %{{.*}} {alignment = 16 : i64} : memref<64x64xbf16, #gpu.address_space<workgroup>>, vector<8xbf16>
// CHECK: scf.if
// CHECK: vector.store %{{.*}} {alignment = 16 : i64} : memref<?x?xbf16>, vector<8xbf16>
// CHECK: } else {
// CHECK-COUNT-8: memref.store
// CHECK: nvvm.barrier id = %{{.*}} number_of_threads = %{{.*}}
// The pipeline steps continue where this tile stopped.
// CHECK: scf.yield
// CHECK: gpu.return
// The activation between the two GEMMs has a kernel of its own (the expert
// MLP fuses it into the gate-up epilogue instead).
// CHECK: gpu.func @moe_swiglu_silu(
// CHECK-NOT: gpu.func
func.func @two_matmuls(%rows: tensor<?x256xbf16>, %w13: tensor<8x512x256xbf16>,
                       %w2: tensor<8x256x256xbf16>, %off: tensor<9xi64>) -> tensor<?x256xbf16> {
  %gu = moe.grouped_matmul %rows, %w13, %off
      : (tensor<?x256xbf16>, tensor<8x512x256xbf16>, tensor<9xi64>) -> tensor<?x512xbf16>
  %h = moe.swiglu silu %gu : (tensor<?x512xbf16>) -> tensor<?x256xbf16>
  %y = moe.grouped_matmul %h, %w2, %off
      : (tensor<?x256xbf16>, tensor<8x256x256xbf16>, tensor<9xi64>) -> tensor<?x256xbf16>
  return %y : tensor<?x256xbf16>
}

// -----

func.func @f32_rows(%rows: tensor<?x256xf32>, %w: tensor<8x512x256xf32>, %off: tensor<9xi64>) -> tensor<?x512xf32> {
  // expected-error @+1 {{cannot be lowered to sm_90a yet: only bf16 rows, weights and result are implemented}}
  %y = moe.grouped_matmul %rows, %w, %off
      : (tensor<?x256xf32>, tensor<8x512x256xf32>, tensor<9xi64>) -> tensor<?x512xf32>
  return %y : tensor<?x512xf32>
}

// -----

func.func @f16_bias(%rows: tensor<?x256xbf16>, %w: tensor<8x512x256xbf16>, %off: tensor<9xi64>,
                    %b: tensor<8x512xf16>) -> tensor<?x512xbf16> {
  // expected-error @+1 {{cannot be lowered to sm_90a yet: only f32 and bf16 biases are implemented}}
  %y = moe.grouped_matmul %rows, %w, %off bias %b
      : (tensor<?x256xbf16>, tensor<8x512x256xbf16>, tensor<9xi64>, tensor<8x512xf16>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}

// -----

func.func @odd_k(%rows: tensor<?x100xbf16>, %w: tensor<8x512x100xbf16>, %off: tensor<9xi64>) -> tensor<?x512xbf16> {
  // expected-error @+1 {{K must be a multiple of 8}}
  %y = moe.grouped_matmul %rows, %w, %off
      : (tensor<?x100xbf16>, tensor<8x512x100xbf16>, tensor<9xi64>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}

// -----

// layer.v1 launches exactly the chain --moe-fuse-layer builds.
func.func @layer_without_permute(%rows: tensor<?x256xbf16>, %off: tensor<9xi64>, %w13: tensor<8x512x256xbf16>,
                                 %w2: tensor<8x256x256xbf16>) -> tensor<?x256xbf16> {
  // expected-error @+1 {{cannot be lowered to sm_90a yet: the body must be (moe.route,) moe.permute, (moe.quantize, moe.dequantize, or moe.fake_quantize,) moe.expert_mlp and moe.unpermute, in that order}}
  %y = moe.layer : tensor<?x256xbf16> {
    %h = moe.expert_mlp silu %rows, %off, %w13, %w2
        : (tensor<?x256xbf16>, tensor<9xi64>, tensor<8x512x256xbf16>, tensor<8x256x256xbf16>) -> tensor<?x256xbf16>
    moe.yield %h : tensor<?x256xbf16>
  }
  return %y : tensor<?x256xbf16>
}

// -----

func.func @mlp_intermediate_k(%rows: tensor<?x256xbf16>, %off: tensor<9xi64>, %w13: tensor<8x500x256xbf16>,
                              %w2: tensor<8x256x250xbf16>) -> tensor<?x256xbf16> {
  // expected-error @+1 {{K must be a multiple of 8}}
  %y = moe.expert_mlp silu %rows, %off, %w13, %w2
      : (tensor<?x256xbf16>, tensor<9xi64>, tensor<8x500x256xbf16>, tensor<8x256x250xbf16>) -> tensor<?x256xbf16>
  return %y : tensor<?x256xbf16>
}
