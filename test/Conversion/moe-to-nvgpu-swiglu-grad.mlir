// moe.swiglu_grad on sm_90a (BackwardKernels.cpp): a planned.v1 entry whose
// plan alone says how to call it; a grid-stride loop over 8-column vectors
// of the gradient, each giving 8 gate and 8 up gradients.
// RUN: moe-opt %s --moe-select-kernels --convert-moe-to-nvgpu | FileCheck %s

// CHECK-LABEL: func.func @silu(
// CHECK: moe.swiglu_grad
// CHECK-SAME: abi = "planned.v1"
// CHECK-SAME: kernels = [{kernel = @moe_kernels::@moe_swiglu_grad_silu}]
// CHECK-SAME: op = "moe.swiglu_grad"
// CHECK-SAME: {align = 16 : i64, dims = "M,512", dtype = "bf16", name = "input", role = "in"}
// CHECK-SAME: {align = 16 : i64, dims = "M,256", dtype = "bf16", name = "grad", role = "in"}
// CHECK-SAME: {align = 16 : i64, dims = "M,512", dtype = "bf16", name = "out", role = "out"}
// CHECK-SAME: {grid = "min(ceildiv(M*32,256),1048576)", kernel = 0 : i64, params = "mem:input[M,512];mem:grad[M,256];mem:out[M,512]", when = "M>=1"}
func.func @silu(%gu: tensor<?x512xbf16>, %dh: tensor<?x256xbf16>) -> tensor<?x512xbf16> {
  %dgu = moe.swiglu_grad silu %gu, %dh : (tensor<?x512xbf16>, tensor<?x256xbf16>) -> tensor<?x512xbf16>
  return %dgu : tensor<?x512xbf16>
}

// GPT-OSS: its constants are in the kernel's name (alpha 1.702, limit 7),
// the width a size checked a multiple of 8.
// CHECK-LABEL: func.func @gptoss(
// CHECK: moe.swiglu_grad gptoss
// CHECK-SAME: kernels = [{kernel = @moe_kernels::@moe_swiglu_grad_gptoss_a3fd9db23_l40e00000}]
// CHECK-SAME: message = "I must be a multiple of 8 (rows are read in 16-byte vectors)"
func.func @gptoss(%gu: tensor<?x?xbf16>, %dh: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
  %dgu = moe.swiglu_grad gptoss %gu, %dh alpha 1.702 limit 7.0 : (tensor<?x?xbf16>, tensor<?x?xbf16>) -> tensor<?x?xbf16>
  return %dgu : tensor<?x?xbf16>
}

// Interleaved (GPT-OSS's gate-up as transformers keeps it): a kernel of its
// own.
// CHECK-LABEL: func.func @interleaved(
// CHECK: moe.swiglu_grad gptoss
// CHECK-SAME: kernels = [{kernel = @moe_kernels::@moe_swiglu_grad_gptoss_a3fd9db23_l40e00000_il}]
// CHECK-LABEL: func.func @interleaved_act(
// CHECK: moe.swiglu silu
// CHECK-SAME: kernels = [{kernel = @moe_kernels::@moe_swiglu_silu_il}]
func.func @interleaved(%gu: tensor<?x512xbf16>, %dh: tensor<?x256xbf16>) -> tensor<?x512xbf16> {
  %dgu = moe.swiglu_grad gptoss %gu, %dh interleaved : (tensor<?x512xbf16>, tensor<?x256xbf16>) -> tensor<?x512xbf16>
  return %dgu : tensor<?x512xbf16>
}
func.func @interleaved_act(%gu: tensor<?x512xbf16>) -> tensor<?x256xbf16> {
  %h = moe.swiglu silu %gu interleaved : (tensor<?x512xbf16>) -> tensor<?x256xbf16>
  return %h : tensor<?x256xbf16>
}

// The silu kernel: 8-wide bf16 loads of gate, up (I columns further) and the
// gradient, 8 scalar slopes, two 8-wide stores.
// CHECK: gpu.func @moe_swiglu_grad_silu(%{{.*}}: memref<?x?xbf16>, %{{.*}}: memref<?x?xbf16>, %{{.*}}: memref<?x?xbf16>)
// CHECK: scf.for
// CHECK-COUNT-3: vector.load {{.*}} : memref<?x?xbf16>, vector<8xbf16>
// CHECK-COUNT-8: nvvm.ex2.approx
// CHECK: vector.from_elements
// CHECK: vector.from_elements
// CHECK-COUNT-2: vector.store {{.*}} : memref<?x?xbf16>, vector<8xbf16>
// The GPT-OSS kernel: the clamps, and where they pass the gradient.
// CHECK: gpu.func @moe_swiglu_grad_gptoss_a3fd9db23_l40e00000(
// CHECK: arith.minimumf
// CHECK: arith.maximumf
// CHECK: arith.cmpf ole
// CHECK: arith.cmpf oge
// CHECK: arith.select
// Interleaved: the 16 input columns from 2 * col (two 8-wide loads) and
// the gradient's 8, and the gradients stored alternating as the input lies:
// two 8-wide stores from 2 * col.
// CHECK: gpu.func @moe_swiglu_grad_gptoss_a3fd9db23_l40e00000_il(
// CHECK: scf.for
// CHECK: %[[COL2:.*]] = arith.muli %[[COL:.*]], %c2{{.*}} : index
// CHECK-NEXT: vector.load %{{.*}}[%{{.*}}, %[[COL2]]] {alignment = 16 : i64} : memref<?x?xbf16>, vector<8xbf16>
// CHECK: %[[HI:.*]] = arith.addi %[[COL2]], %c8{{.*}} : index
// CHECK-NEXT: vector.load %{{.*}}[%{{.*}}, %[[HI]]] {alignment = 16 : i64} : memref<?x?xbf16>, vector<8xbf16>
// CHECK: vector.load %{{.*}}[%{{.*}}, %[[COL]]] {alignment = 16 : i64} : memref<?x?xbf16>, vector<8xbf16>
// CHECK: vector.store {{.*}} : memref<?x?xbf16>, vector<8xbf16>
// CHECK: vector.store {{.*}} : memref<?x?xbf16>, vector<8xbf16>
// CHECK-NOT: vector.store
// CHECK: gpu.return
// The forward activation, interleaved: two loads from 2 * col, one store.
// CHECK: gpu.func @moe_swiglu_silu_il(
// CHECK: arith.muli %{{.*}}, %c2{{.*}} : index
// CHECK-COUNT-2: vector.load {{.*}} : memref<?x?xbf16>, vector<8xbf16>
// CHECK: vector.store {{.*}} : memref<?x?xbf16>, vector<8xbf16>
// CHECK-NOT: vector.store
// CHECK: gpu.return
