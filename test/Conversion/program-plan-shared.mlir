// A DeepSeek-V3 layer's train forward and backward as programs: the shared
// expert is grouped ops of one group (--moe-expand-shared-mlp). Its offsets
// [0, 2^31 - 1] are a constant that a kernel of its own writes into the
// workspace (planned.v1 of arith.constant); its weights viewed as one
// expert's and its [1, R, C] weight gradients collapsed to [R, C] are views
// (no step: the reshape's buffer is its source's, or the output's it
// becomes); the combine adds the shared expert's rows (planned.v1 of
// moe.unpermute with 'shared').
// RUN: moe-opt %s --moe-generate-backward --moe-check-placement=target=gpu --moe-fuse-experts --moe-route-shared-experts=pack-function=false --moe-expand-shared-mlp --moe-select-kernels --convert-moe-to-nvgpu | FileCheck %s
// RUN: moe-opt %s --moe-generate-backward --moe-gpu-pipeline=format=isa | FileCheck %s --check-prefix=ENTRIES

// The inference function runs the shared expert as routed experts (its
// weights arranged by the caller); the programs keep its weights as they are.
// CHECK-LABEL: func.func @deepseek(
// CHECK-SAME: tensor<18x256x256xbf16>, %{{.*}}: tensor<18x256x128xbf16>) -> tensor<?x256xbf16>

// CHECK-LABEL: func.func @deepseek_train(
// CHECK-SAME: moe.launch = {abi = "program.v1"
// CHECK-SAME: {align = 16 : i64, dims = "512,256", dtype = "bf16", name = "shared_gate_up_weights", role = "in"}
// CHECK-SAME: {align = 16 : i64, dims = "256,256", dtype = "bf16", name = "shared_down_weights", role = "in"}
// CHECK-SAME: {align = 16 : i64, dims = "T,256", dtype = "bf16", name = "out", role = "out"}
// CHECK-SAME: tmap:tokens:bf16:[256,T]:[512]:[64,128];tmap:shared_gate_up_weights:bf16:[256,512,1]:[512,262144]:[64,256,1];mem:@[[OFF:v[0-9]+]][2]
// CHECK-SAME: params = "mem:expert_out[T*4,256];mem:slots[T,4];mem:weights[T,4];mem:@v{{[0-9]+}}[T,256];mem:out[T,256]"
// CHECK: arith.constant {moe.launch = {abi = "planned.v1", element = i64, elements = 2 : i64,
// CHECK-SAME: op = "arith.constant", plan = {args = [{align = 8 : i64, dims = "2", dtype = "i64", name = "out", role = "out"}]
// CHECK-SAME: steps = [{grid = "1", kernel = 0 : i64, params = "mem:out[2]", when = "1"}]
// CHECK-SAME: dense<[0, 2147483647]> : tensor<2xi64>
// CHECK: tensor.expand_shape %arg5
// CHECK: moe.unpermute {{.*}} shared

// The backward: the shared expert's weight gradients are outputs of the
// declared [R, C] that the one-group wgrad writes as [1, R, C]. The routed
// offsets, dead after the gate-up wgrad, hold the shared expert's constant
// offsets; the gate-up output, dead after the activation's gradient, the
// rows' gradient (moe.donated).
// CHECK-LABEL: func.func @deepseek_backward(
// CHECK-SAME: {align = 8 : i64, dims = "17", dtype = "i64", name = "offsets", role = "donated"}
// CHECK-SAME: {align = 16 : i64, dims = "M,256", dtype = "bf16", name = "gate_up", role = "donated"}
// CHECK-SAME: {align = 16 : i64, dims = "T,256", dtype = "bf16", name = "tokens", role = "in"}
// CHECK-SAME: {align = 16 : i64, dims = "512,256", dtype = "bf16", name = "grad_shared_gate_up_weights", role = "out"}
// CHECK-SAME: {align = 16 : i64, dims = "256,256", dtype = "bf16", name = "grad_shared_down_weights", role = "out"}]
// CHECK-SAME: params = "mem:offsets[2]", part = "p7"
// CHECK-SAME: mem:grad_shared_down_weights[1,256,256];i32:T"
// CHECK-SAME: mem:grad_shared_gate_up_weights[1,512,256];i32:T"
// CHECK-SAME: params = "mem:gate_up[M,256];mem:slots[T,4];mem:@v{{[0-9]+}}[T,256];mem:grad_tokens[T,256]"
// CHECK: tensor.collapse_shape
// CHECK-SAME: tensor<1x256x256xbf16> into tensor<256x256xbf16>

// ENTRIES: name = "deepseek_train.0", op = "arith.constant"
// ENTRIES: name = "deepseek_train", op = "func.func"
// ENTRIES-SAME: p0 = "deepseek_train.0"
// ENTRIES: name = "deepseek_backward.0", op = "arith.constant"
// ENTRIES-DAG: .entry moe_constant_i64_0_2147483647(
// ENTRIES-DAG: .entry moe_unpermute_k4_slots64_weighted_shared(
// ENTRIES-DAG: .entry moe_unpermute_k4_slots64_shared(
func.func @deepseek(%x: tensor<?x256xbf16>, %logits: tensor<?x16xf32>, %bias: tensor<16xf32>,
                    %w13: tensor<16x256x256xbf16>, %w2: tensor<16x256x128xbf16>,
                    %sw13: tensor<512x256xbf16>, %sw2: tensor<256x256xbf16>) -> tensor<?x256xbf16> {
  %ids, %w = moe.route sigmoid_topk %logits bias %bias top 4 groups 4 select 2 renormalize scale 2.5
      : (tensor<?x16xf32>, tensor<16xf32>) -> (tensor<?x4xi32>, tensor<?x4xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids
      : (tensor<?x256xbf16>, tensor<?x4xi32>) -> (tensor<?x256xbf16>, tensor<17xi64>, tensor<?x4xi64>)
  %o = moe.expert_mlp silu %rows, %offsets, %w13, %w2
      : (tensor<?x256xbf16>, tensor<17xi64>, tensor<16x256x256xbf16>, tensor<16x256x128xbf16>) -> tensor<?x256xbf16>
  %sh = moe.shared_mlp silu %x, %sw13, %sw2
      : (tensor<?x256xbf16>, tensor<512x256xbf16>, tensor<256x256xbf16>) -> tensor<?x256xbf16>
  %y = moe.unpermute %o, %slots weights %w shared %sh
      : (tensor<?x256xbf16>, tensor<?x4xi64>, tensor<?x4xf32>, tensor<?x256xbf16>) -> tensor<?x256xbf16>
  return %y : tensor<?x256xbf16>
}
