// RUN: moe-opt %s --moe-select-kernels="swap-ab-max-rows=0" --convert-moe-to-nvgpu | FileCheck %s
// RUN: moe-opt %s --moe-gpu-pipeline="format=isa" -o %t.isa.mlir
// RUN: %python %S/../../prototypes/sm90_grouped_gemm/extract_gpu_object.py %t.isa.mlir %t.ptx
// RUN: %ptxas -arch=sm_90a %t.ptx -o %t.cubin
// RUN: FileCheck %s --check-prefix=PTX --input-file %t.ptx

// DeepSeek-V3 routing: one warp per token (lane l holds experts 8l, ...,
// 8l + 7, so group g is lanes 4g to 4g + 3). Sigmoid scores plus the bias
// choose; a group's score is the sum of its two best (a max/min merge over
// its 4 lanes, fetched from its first); 4 of the 8 groups stay; then 8
// rounds of one redux.sync umax over the lanes' best score orders and a
// ballot for the lowest lane holding it (the lower expert), its pick and
// score fetched from it and retired there; weights are the unbiased
// scores, renormalised, x 2.5.
// CHECK-LABEL: func.func @deepseek
// CHECK: moe.route {{.*}}moe.launch = {abi = "route.v1", bias = true, experts = 256 : i64, kernels = [{kernel = @moe_kernels::@moe_route_sigmoid_topk_e256_k8_g8s4_renorm_x40200000_f32_bias}], logits = f32, max_rows = 2147483647 : i64, plan = {{.*}}, top_k = 8 : i64}
// The combine: one CTA per token, 8 columns (16 bytes) per thread, slots
// outside [0, M) skipped, the k rows summed in order in f32.
// CHECK-LABEL: func.func @combine
// CHECK: moe.unpermute {{.*}}moe.launch = {abi = "unpermute.v2", hidden = 4096 : i64, kernels = [{kernel = @moe_kernels::@moe_unpermute_k2_slots64_weighted}], max_rows = 2147483647 : i64, plan = {{.*}}, slots = i64, top_k = 2 : i64, weighted = true}
// CHECK-LABEL: func.func @perm
// CHECK: moe.permute {{.*}}moe.launch = {abi = "permute.v2", chunk = 4096 : i64, experts = 128 : i64, hidden = 2048 : i64, index_counts = true, kernels = [{kernel = @moe_kernels::@moe_permute_count_e128_k8}, {kernel = @moe_kernels::@moe_permute_index_e128_k8_off64}, {kernel = @moe_kernels::@moe_permute_gather_off64}], max_rows = 2147483647 : i64, offsets = i64, plan = {{.*}}, top_k = 8 : i64}
// CHECK: gpu.func @moe_route_sigmoid_topk_e256_k8_g8s4_renorm_x40200000_f32_bias(%{{.*}}: memref<?x?xf32>, %{{.*}}: memref<?xf32>, %{{.*}}: memref<?x?xi32>, %{{.*}}: memref<?x?xf32>) kernel attributes {known_block_size = array<i32: 128, 1, 1>, moe.dynamic_shared_bytes = 0 : i64}
// The groups: 2 x 2 xor shuffles (4 lanes), one idx shuffle per group;
// per pick: a redux, a ballot, the lowest set bit, two idx shuffles.
// CHECK-COUNT-4: gpu.shuffle  xor
// CHECK-COUNT-8: gpu.shuffle  idx
// CHECK: %[[TOP:.*]] = nvvm.redux.sync umax %[[KEY:.*]], %{{.*}} : i32 -> i32
// CHECK-NEXT: %[[HELD:.*]] = arith.cmpi eq, %[[KEY]], %[[TOP]] : i32
// CHECK-NEXT: %[[HOLDERS:.*]] = nvvm.vote.sync ballot %{{.*}}, %[[HELD]] -> i32
// CHECK-NEXT: %[[WINNER:.*]] = "llvm.intr.cttz"(%[[HOLDERS]])
// CHECK: gpu.shuffle  idx %{{.*}}, %[[WINNER]], %{{.*}} : i32
// CHECK: gpu.shuffle  idx {{.*}} : f32
// CHECK-COUNT-7: nvvm.redux.sync umax
// CHECK-COUNT-2: gpu.shuffle  idx
// CHECK-NOT: gpu.shuffle
// CHECK: gpu.func @moe_unpermute_k2_slots64_weighted(%{{.*}}: memref<?x?xbf16>, %{{.*}}: memref<?x?xi64>, %{{.*}}: memref<?x?xf32>, %{{.*}}: memref<?x?xbf16>)
// One CTA per (token, 1024 columns); the k rows' loads issued together.
// CHECK: arith.divui
// CHECK: arith.remui
// CHECK-COUNT-2: vector.load %{{.*}} {alignment = 16 : i64} : memref<?x?xbf16>, vector<8xbf16>
// CHECK: vector.store %{{.*}} {alignment = 16 : i64} : memref<?x?xbf16>, vector<8xbf16>
// The permutation, one CTA of 1024 threads per chunk of 4096 ids: a count
// kernel (each chunk's counts per expert by shared-memory atomics), an
// index kernel (first the chunk's stable ranks by match.any over 4 rounds of
// 32 per warp into a [warp][expert] table; then each expert's total and its
// ids in earlier chunks — of a single chunk, the table's column sums, so
// the runtime launches no count kernel then (index_counts = true) — a warp
// scan to offsets, and the table's rows scanned across warps) and a gather
// kernel (one CTA per 4 rows and 1024 columns, loads before stores, zeros
// past offsets[E]).
// CHECK: gpu.func @moe_permute_count_e128_k8(%{{.*}}: memref<?x?xi32>, %{{.*}}: memref<?xi32>) workgroup(%{{.*}} : memref<128xi32, #gpu.address_space<workgroup>>)
// CHECK: memref.atomic_rmw addi
// CHECK: gpu.func @moe_permute_index_e128_k8_off64(%{{.*}}: memref<?x?xi32>, %{{.*}}: memref<?xi32>, %{{.*}}: memref<?xi64>, %{{.*}}: memref<?x?xi64>, %{{.*}}: memref<?xi32>) workgroup(%{{.*}} : memref<128xi32, #gpu.address_space<workgroup>>, %{{.*}} : memref<128xi32, #gpu.address_space<workgroup>>, %[[TABLE:.*]] : memref<4096xi32, #gpu.address_space<workgroup>>)
// CHECK: nvvm.read.ptx.sreg.lanemask.lt
// Four rounds of 32 ids per warp and chunk, each a match.any between two
// warp syncs (the round's leader updates the warp's running count).
// CHECK-COUNT-4: nvvm.match.sync  any
// CHECK-NOT: nvvm.match.sync
// CHECK: gpu.barrier
// One chunk: its 32 warps' counts from the table; else eight chunks' counts
// loaded at a time.
// CHECK: %[[ONE:.*]] = arith.cmpi slt, %grid_dim_x, %c2
// CHECK: scf.if %[[ONE]] -> (i32, i32)
// CHECK-COUNT-32: memref.load %[[TABLE]]
// CHECK: } else {
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c8
// CHECK-COUNT-8: memref.load %{{.*}} : memref<?xi32>
// CHECK: gpu.func @moe_permute_gather_off64(
// CHECK: %[[BLOCKS:.*]] = arith.divsi %{{.*}}, %c1024 : index
// CHECK: %[[PAIRS:.*]] = arith.muli %{{.*}}, %[[BLOCKS]] : index
// CHECK: scf.for %[[PAIR:.*]] = %{{.*}} to %[[PAIRS]] step %{{.*}} {
// CHECK-NEXT: arith.divui %[[PAIR]], %[[BLOCKS]]
// CHECK-NEXT: arith.remui %[[PAIR]], %[[BLOCKS]]
// The small kernels let the next kernel launch as soon as they start.
// PTX-DAG: griddepcontrol.launch_dependents;
// PTX-DAG: match.any.sync.b32
// PTX-DAG: atom.shared.add.u32
// PTX-DAG: .entry moe_route_sigmoid_topk_e256_k8_g8s4_renorm_x40200000_f32_bias(
// PTX-DAG: shfl.sync.bfly.b32
// PTX-DAG: redux.sync.max.u32
// PTX-DAG: vote.sync.ballot.b32
// PTX-DAG: ex2.approx.ftz.f32
// PTX-DAG: .entry moe_unpermute_k2_slots64_weighted(
// PTX-DAG: ld.global.v4.b32
// PTX-DAG: st.global.v4.b32
func.func @deepseek(%logits: tensor<?x256xf32>, %b: tensor<256xf32>) -> (tensor<?x8xi32>, tensor<?x8xf32>) {
  %ids, %w = moe.route sigmoid_topk %logits bias %b top 8 groups 8 select 4 renormalize scale 2.5
      : (tensor<?x256xf32>, tensor<256xf32>) -> (tensor<?x8xi32>, tensor<?x8xf32>)
  return %ids, %w : tensor<?x8xi32>, tensor<?x8xf32>
}
func.func @combine(%rows: tensor<?x4096xbf16>, %slots: tensor<?x2xi64>, %w: tensor<?x2xf32>) -> tensor<?x4096xbf16> {
  %y = moe.unpermute %rows, %slots weights %w : (tensor<?x4096xbf16>, tensor<?x2xi64>, tensor<?x2xf32>) -> tensor<?x4096xbf16>
  return %y : tensor<?x4096xbf16>
}
func.func @perm(%x: tensor<?x2048xbf16>, %ids: tensor<?x8xi32>) -> (tensor<?x2048xbf16>, tensor<129xi64>, tensor<?x8xi64>) {
  %rows, %offsets, %slots = moe.permute %x, %ids : (tensor<?x2048xbf16>, tensor<?x8xi32>) -> (tensor<?x2048xbf16>, tensor<129xi64>, tensor<?x8xi64>)
  return %rows, %offsets, %slots : tensor<?x2048xbf16>, tensor<129xi64>, tensor<?x8xi64>
}
