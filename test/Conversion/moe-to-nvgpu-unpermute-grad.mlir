// moe.unpermute_grad on sm_90a (BackwardKernels.cpp): a planned.v1 entry of
// three kernels over a workspace of per-row pair counts: zero the counts,
// count each row's pairs (integer atomics: exact), then a warp per pair (when
// it is its row's first pair, the weight gradients of the row's pairs, then
// the row's gradient, the later pairs of the row added in pair order; a zero
// weight gradient without a row) and a warp per row (zeroed when no pair
// names it). No float atomics: two runs are bit-identical. Only the first
// pair's warp reads or writes a row: rows_grad may be rows (in place, a
// program's choice).
// RUN: moe-opt %s --moe-select-kernels --convert-moe-to-nvgpu | FileCheck %s

// CHECK-LABEL: func.func @weighted(
// CHECK: moe.unpermute_grad
// CHECK-SAME: abi = "planned.v1"
// CHECK-SAME: kernels = [{kernel = @moe_kernels::@moe_unpermute_grad_init}, {kernel = @moe_kernels::@moe_unpermute_grad_count_s64}, {kernel = @moe_kernels::@moe_unpermute_grad_gather_s64}]
// CHECK-SAME: op = "moe.unpermute_grad"
// CHECK-SAME: {align = 16 : i64, dims = "T,256", dtype = "bf16", name = "grad", role = "in"}
// CHECK-SAME: {align = 16 : i64, dims = "M,256", dtype = "bf16", name = "rows", role = "in"}
// CHECK-SAME: {align = 8 : i64, dims = "T,2", dtype = "i64", name = "slots", role = "in"}
// CHECK-SAME: {align = 4 : i64, dims = "T,2", dtype = "f32", name = "weights", role = "in"}
// CHECK-SAME: {align = 16 : i64, dims = "M,256", dtype = "bf16", name = "rows_grad", role = "out"}
// CHECK-SAME: {align = 4 : i64, dims = "T,2", dtype = "f32", name = "weights_grad", role = "out"}
// CHECK-SAME: {grid = "min(ceildiv(M,128),65535)", kernel = 0 : i64, params = "mem:@counts[M]", when = "M>=1"}
// CHECK-SAME: {grid = "min(ceildiv(T*2,128),65535)", kernel = 1 : i64, params = "mem:slots[T,2];mem:@counts[M]", when = "M>=1&&T*2>=1"}
// CHECK-SAME: {grid = "min(ceildiv(T*2+M,4),65535)", kernel = 2 : i64, params = "mem:grad[T,256];mem:rows[M,256];mem:slots[T,2];mem:weights[T,2];mem:@counts[M];mem:rows_grad[M,256];mem:weights_grad[T,2]", when = "T*2+M>=1"}
// CHECK-SAME: work = [{align = 256 : i64, bytes = "M*4", name = "counts"}]
func.func @weighted(%g: tensor<?x256xbf16>, %r: tensor<?x256xbf16>, %s: tensor<?x2xi64>, %w: tensor<?x2xf32>) -> (tensor<?x256xbf16>, tensor<?x2xf32>) {
  %d, %dw = moe.unpermute_grad %g, %r, %s weights %w : (tensor<?x256xbf16>, tensor<?x256xbf16>, tensor<?x2xi64>, tensor<?x2xf32>) -> (tensor<?x256xbf16>, tensor<?x2xf32>)
  return %d, %dw : tensor<?x256xbf16>, tensor<?x2xf32>
}

// Without weights (the permute's adjoint written as a combine's): no weight
// gradient, and the gather reads no weights; i32 slots.
// CHECK-LABEL: func.func @unweighted(
// CHECK: moe.unpermute_grad
// CHECK-SAME: kernels = [{kernel = @moe_kernels::@moe_unpermute_grad_init}, {kernel = @moe_kernels::@moe_unpermute_grad_count_s32}, {kernel = @moe_kernels::@moe_unpermute_grad_gather_s32_unweighted}]
// CHECK-SAME: params = "mem:grad[T,256];mem:rows[M,256];mem:slots[T,2];mem:@counts[M];mem:rows_grad[M,256]"
func.func @unweighted(%g: tensor<?x256xbf16>, %r: tensor<?x256xbf16>, %s: tensor<?x2xi32>) -> tensor<?x256xbf16> {
  %d = moe.unpermute_grad %g, %r, %s : (tensor<?x256xbf16>, tensor<?x256xbf16>, tensor<?x2xi32>) -> tensor<?x256xbf16>
  return %d : tensor<?x256xbf16>
}

// The kernels: zeroing by thread, an i32 atomic add per pair in range, then
// the gather: a zero weight gradient for a pair without a row, the
// first-pair test only where a row has several pairs, the first pair's
// weight gradient (lane sums, then its butterfly), the later pairs' ones,
// the row's gradient with the later pairs in order, and the zeroing of rows
// no pair names.
// CHECK: gpu.func @moe_unpermute_grad_init(%{{.*}}: memref<?xi32>)
// CHECK: memref.store %{{.*}} : memref<?xi32>
// CHECK: gpu.func @moe_unpermute_grad_count_s64(%{{.*}}: memref<?x?xi64>, %{{.*}}: memref<?xi32>)
// CHECK: arith.cmpi sge
// CHECK: memref.atomic_rmw addi
// CHECK: gpu.func @moe_unpermute_grad_gather_s64(
// CHECK-NOT: atomic
// CHECK: memref.store %{{.*}} : memref<?x?xf32>
// CHECK: arith.cmpi sgt
// CHECK: scf.if
// CHECK: arith.maxui
// CHECK: scf.for
// CHECK: vector.load
// CHECK: gpu.shuffle xor {{.*}} : f32
// CHECK: memref.store %{{.*}} : memref<?x?xf32>
// CHECK: scf.for
// CHECK: gpu.shuffle xor {{.*}} : f32
// CHECK: memref.store %{{.*}} : memref<?x?xf32>
// CHECK: vector.broadcast
// CHECK: scf.for
// CHECK: arith.addf {{.*}} : vector<8xf32>
// CHECK: vector.store {{.*}} : memref<?x?xbf16>, vector<8xbf16>
// CHECK: arith.constant dense<0.000000e+00> : vector<8xbf16>
// CHECK: vector.store
// CHECK: gpu.func @moe_unpermute_grad_gather_s32_unweighted(
// CHECK-NOT: gpu.shuffle xor {{.*}} : f32
// CHECK: gpu.return
