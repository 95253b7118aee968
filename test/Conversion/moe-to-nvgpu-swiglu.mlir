// moe.swiglu on sm_90a (BackwardKernels.cpp): the train forward's activation
// of a saved gate-up output (the inference forward fuses it into the gate-up
// GEMM's epilogue); a planned.v1 entry, a grid-stride loop over 8-column
// vectors of the activation.
// RUN: moe-opt %s --moe-select-kernels --convert-moe-to-nvgpu | FileCheck %s

// CHECK-LABEL: func.func @silu(
// CHECK: moe.swiglu silu
// CHECK-SAME: abi = "planned.v1"
// CHECK-SAME: kernels = [{kernel = @moe_kernels::@moe_swiglu_silu}]
// CHECK-SAME: op = "moe.swiglu"
// CHECK-SAME: {align = 16 : i64, dims = "M,512", dtype = "bf16", name = "input", role = "in"}
// CHECK-SAME: {align = 16 : i64, dims = "M,256", dtype = "bf16", name = "out", role = "out"}
// CHECK-SAME: {grid = "min(ceildiv(M*32,256),1048576)", kernel = 0 : i64, params = "mem:input[M,512];mem:out[M,256]", when = "M>=1"}
func.func @silu(%gu: tensor<?x512xbf16>) -> tensor<?x256xbf16> {
  %h = moe.swiglu silu %gu : (tensor<?x512xbf16>) -> tensor<?x256xbf16>
  return %h : tensor<?x256xbf16>
}

// GPT-OSS: its constants in the kernel's name; a dynamic width is a size
// checked to be a multiple of 8.
// CHECK-LABEL: func.func @gptoss(
// CHECK: moe.swiglu gptoss
// CHECK-SAME: kernels = [{kernel = @moe_kernels::@moe_swiglu_gptoss_a3fd9db23_l40e00000}]
// CHECK-SAME: message = "I must be a multiple of 8 (rows are read in 16-byte vectors)"
func.func @gptoss(%gu: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
  %h = moe.swiglu gptoss %gu alpha 1.702 limit 7.0 : (tensor<?x?xbf16>) -> tensor<?x?xbf16>
  return %h : tensor<?x?xbf16>
}

// The silu kernel: gate and up (I columns further) loaded 8 wide, 8 sigmoids,
// one 8-wide store; the GPT-OSS one clamps first.
// CHECK: gpu.func @moe_swiglu_silu(%{{.*}}: memref<?x?xbf16>, %{{.*}}: memref<?x?xbf16>)
// CHECK: scf.for
// CHECK-COUNT-2: vector.load {{.*}} : memref<?x?xbf16>, vector<8xbf16>
// CHECK-COUNT-8: nvvm.ex2.approx
// CHECK: vector.from_elements
// CHECK-NEXT: arith.truncf
// CHECK-NEXT: vector.store {{.*}} : memref<?x?xbf16>, vector<8xbf16>
// CHECK-NOT: vector.store
// CHECK: gpu.func @moe_swiglu_gptoss_a3fd9db23_l40e00000(
// CHECK: arith.minimumf
// CHECK: arith.maximumf
