// moe.route_grad on sm_90a (BackwardKernels.cpp): a planned.v1 entry; one
// warp per token, lane j holding pair j, each lane E / 32 logits.
// RUN: moe-opt %s --moe-select-kernels --convert-moe-to-nvgpu | FileCheck %s

// Mixtral's router: softmax over all 8, top-2, renormalised.
// CHECK-LABEL: func.func @mixtral(
// CHECK: moe.route_grad softmax_topk
// CHECK-SAME: abi = "planned.v1"
// CHECK-SAME: kernels = [{kernel = @moe_kernels::@moe_route_grad_softmax_topk_e8_k2_renorm_f32}]
// CHECK-SAME: op = "moe.route_grad"
// CHECK-SAME: {align = 4 : i64, dims = "T,8", dtype = "f32", name = "logits", role = "in"}
// CHECK-SAME: {align = 4 : i64, dims = "T,2", dtype = "i32", name = "ids", role = "in"}
// CHECK-SAME: {align = 4 : i64, dims = "T,2", dtype = "f32", name = "grad", role = "in"}
// CHECK-SAME: {align = 4 : i64, dims = "T,8", dtype = "f32", name = "out", role = "out"}
// CHECK-SAME: {grid = "min(ceildiv(T,4),65535)", kernel = 0 : i64, params = "mem:logits[T,8];mem:ids[T,2];mem:grad[T,2];mem:out[T,8]", when = "T>=1"}
func.func @mixtral(%l: tensor<?x8xf32>, %ids: tensor<?x2xi32>, %dw: tensor<?x2xf32>) -> tensor<?x8xf32> {
  %d = moe.route_grad softmax_topk %l, %ids, %dw renormalize : (tensor<?x8xf32>, tensor<?x2xi32>, tensor<?x2xf32>) -> tensor<?x8xf32>
  return %d : tensor<?x8xf32>
}

// DeepSeek-V3's: sigmoid, renormalised, scaled (the scale's bits in the
// name), bf16 logits and result.
// CHECK-LABEL: func.func @deepseek(
// CHECK: moe.route_grad sigmoid_topk
// CHECK-SAME: kernels = [{kernel = @moe_kernels::@moe_route_grad_sigmoid_topk_e256_k8_renorm_x40200000_bf16}]
// CHECK-SAME: {align = 2 : i64, dims = "T,256", dtype = "bf16", name = "out", role = "out"}
func.func @deepseek(%l: tensor<?x256xbf16>, %ids: tensor<?x8xi32>, %dw: tensor<?x8xf32>) -> tensor<?x256xbf16> {
  %d = moe.route_grad sigmoid_topk %l, %ids, %dw renormalize scale 2.5 : (tensor<?x256xbf16>, tensor<?x8xi32>, tensor<?x8xf32>) -> tensor<?x256xbf16>
  return %d : tensor<?x256xbf16>
}

// The softmax_topk kernel: a grid-stride loop over tokens; the row's max and
// sum across the warp; each pair's (id, gradient) broadcast to every lane
// (2 pairs), then one store per logit a lane holds.
// CHECK: gpu.func @moe_route_grad_softmax_topk_e8_k2_renorm_f32(%{{.*}}: memref<?x?xf32>, %{{.*}}: memref<?x?xi32>, %{{.*}}: memref<?x?xf32>, %{{.*}}: memref<?x?xf32>)
// CHECK: scf.for
// CHECK: arith.maximumf
// CHECK: gpu.shuffle xor
// CHECK: nvvm.ex2.approx
// CHECK-COUNT-4: gpu.shuffle idx
// CHECK: memref.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] : memref<?x?xf32>
// The sigmoid kernel: 8 lanes of logits, 8 pairs broadcast, bf16 stores.
// CHECK: gpu.func @moe_route_grad_sigmoid_topk_e256_k8_renorm_x40200000_bf16(
// CHECK-COUNT-16: gpu.shuffle idx
// CHECK: arith.truncf %{{.*}} : f32 to bf16
