// RUN: moe-opt %s --moe-fuse-layer --convert-moe-to-nvgpu | FileCheck %s
// RUN: moe-opt %s --moe-gpu-pipeline="format=isa" -o %t.isa.mlir
// RUN: %python %S/../../prototypes/sm90_grouped_gemm/extract_gpu_object.py %t.isa.mlir %t.ptx
// RUN: %ptxas -arch=sm_90a %t.ptx -o %t.cubin
// RUN: FileCheck %s --check-prefix=PTX --input-file %t.ptx

// A layer has one kernel of its own for decode: its route and its
// permutation's index in one CTA of 1024 threads. The runtime launches it
// instead of the route and index kernels when T <= 32 (a warp per token)
// and the T*k ids are one chunk (so no count kernel either:
// docs/runtime-contract.md §3.5). Its parameters are the route kernel's
// (logits, ids, weights), then the index kernel's but the ids (counts,
// offsets, slots, sources); its shared memory the index kernel's.
// CHECK: moe.layer {moe.launch = {abi = "layer.v1", kernels = [{kernel = @moe_kernels::@moe_route_index_softmax_topk_e64_k4_renorm_f32_off32}], max_rows = 2147483647 : i64}}
// CHECK: gpu.func @moe_route_index_softmax_topk_e64_k4_renorm_f32_off32(%[[LOGITS:.*]]: memref<?x?xf32>, %[[IDS:.*]]: memref<?x?xi32>, %{{.*}}: memref<?x?xf32>, %{{.*}}: memref<?xi32>, %{{.*}}: memref<?xi32>, %{{.*}}: memref<?x?xi32>, %{{.*}}: memref<?xi32>) workgroup(%{{.*}} : memref<64xi32, #gpu.address_space<workgroup>>, %{{.*}} : memref<64xi32, #gpu.address_space<workgroup>>, %{{.*}} : memref<2048xi32, #gpu.address_space<workgroup>>) kernel attributes {known_block_size = array<i32: 1024, 1, 1>
// CHECK-NEXT: nvvm.griddepcontrol wait
// CHECK-NEXT: nvvm.griddepcontrol launch_dependents
// Warp w routes tokens w, w + 32, ... (the runtime launches it for one
// round only): four picks by redux.sync each.
// CHECK: %[[WARP:.*]] = arith.divui %{{.*}}, %c32
// CHECK: scf.for %{{.*}} = %[[WARP]] to %{{.*}} step %c32
// CHECK-COUNT-4: nvvm.redux.sync umax
// The routed ids, written to global memory, are read by other warps after
// the CTA barrier; then the index kernel's work for chunk 0 of 1.
// CHECK: gpu.barrier
// CHECK-COUNT-4: nvvm.match.sync any
// CHECK: arith.cmpi slt, %grid_dim_x, %c2
// CHECK: gpu.return
// PTX: .entry moe_route_index_softmax_topk_e64_k4_renorm_f32_off32(
// PTX: .maxntid 1024, 1, 1
// PTX: redux.sync.max.u32
// PTX: bar.sync
// PTX: match.any.sync.b32
func.func @layer(%x: tensor<?x256xbf16>, %logits: tensor<?x64xf32>,
    %w13: tensor<64x256x256xbf16>, %w2: tensor<64x256x128xbf16>) -> tensor<?x256xbf16> {
  %ids, %w = moe.route softmax_topk %logits top 4 renormalize
      : (tensor<?x64xf32>) -> (tensor<?x4xi32>, tensor<?x4xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids
      : (tensor<?x256xbf16>, tensor<?x4xi32>) -> (tensor<?x256xbf16>, tensor<65xi32>, tensor<?x4xi32>)
  %h = moe.expert_mlp silu %rows, %offsets, %w13, %w2
      : (tensor<?x256xbf16>, tensor<65xi32>, tensor<64x256x256xbf16>, tensor<64x256x128xbf16>) -> tensor<?x256xbf16>
  %y = moe.unpermute %h, %slots weights %w
      : (tensor<?x256xbf16>, tensor<?x4xi32>, tensor<?x4xf32>) -> tensor<?x256xbf16>
  return %y : tensor<?x256xbf16>
}
