// A GPT-OSS layer (expert biases, the clamped SwiGLU, top-k then softmax)
// trained as two programs: the train forward's GEMMs read the biases,
// [E, N] (an entry's arguments are matched to the op by role: a GEMM's
// plan declares its output before its bias), and the backward's weight
// gradients are planned.v1 entries that also sum each expert's rows of the
// gradient into the bias gradients (bf16 for the gate-up bias, f32 for the
// down bias, the biases' own types).
// RUN: echo 'module {}' | moe-opt --moe-build-layer="name=gptoss hidden=256 intermediate=256 experts=8 top-k=2 routing=topk_softmax logits=bf16 activation=gptoss alpha=1.702 limit=7.0 expert-bias=true" --moe-generate-backward --moe-select-kernels --convert-moe-to-nvgpu | FileCheck %s

// CHECK-LABEL: func.func @gptoss_train(
// CHECK-SAME: abi = "program.v1"
// CHECK-SAME: {align = 2 : i64, dims = "8,512", dtype = "bf16", name = "gate_up_bias", role = "in"}
// CHECK-SAME: {align = 4 : i64, dims = "8,256", dtype = "f32", name = "down_bias", role = "in"}
// CHECK-NOT: must be T
// CHECK-SAME: mem:offsets[9];mem:gate_up[T*2,512];i32:256;i32:1;i32:16;mem:gate_up_bias[8,512]"
// CHECK-LABEL: func.func @gptoss_backward(
// CHECK-SAME: {align = 16 : i64, dims = "8,512", dtype = "bf16", name = "grad_gate_up_bias", role = "out"}
// CHECK-SAME: {align = 16 : i64, dims = "8,256", dtype = "f32", name = "grad_down_bias", role = "out"}
// The experts' output's gradient is written over the experts' output
// (donated), in place.
// CHECK-SAME: params = "mem:expert_out[M,256];mem:offsets[9];mem:grad_down_bias[8,256]", part = "p{{[0-9]+}}"
// CHECK-SAME: params = "mem:{{@v[0-9]+}}[M,512];mem:offsets[9];mem:grad_gate_up_bias[8,512]", part = "p{{[0-9]+}}"
