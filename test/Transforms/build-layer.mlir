// --moe-build-layer adds the layer function its options describe (what a
// frontend such as moe_mlir.layer would otherwise print as MLIR text).
// RUN: moe-opt %s --moe-build-layer="hidden=4096 intermediate=14336 experts=8 top-k=2 renormalize=true" | FileCheck %s --check-prefix=MIXTRAL
// RUN: moe-opt %s --moe-build-layer="name=dsv3 hidden=7168 intermediate=2048 experts=256 top-k=8 routing=sigmoid_topk logits=f32 score-bias=true groups=8 select-groups=4 renormalize=true scale=2.5 shared-intermediate=2048" | FileCheck %s --check-prefix=DSV3
// RUN: moe-opt %s --moe-build-layer="name=qwen2 hidden=2048 intermediate=1408 experts=60 top-k=4 shared-intermediate=5632 shared-gate=true" | FileCheck %s --check-prefix=QWEN2
// RUN: moe-opt %s --moe-build-layer="name=gptoss hidden=2880 intermediate=2880 experts=128 top-k=4 routing=topk_softmax activation=gptoss alpha=1.702 limit=7.0 expert-bias=true" | FileCheck %s --check-prefix=GPTOSS
// RUN: moe-opt %s --moe-build-layer="name=gptoss hidden=2880 intermediate=2880 experts=128 top-k=4 routing=topk_softmax activation=gptoss alpha=1.702 limit=7.0 expert-bias=true native-layout=true" | FileCheck %s --check-prefix=NATIVE
// routing=none: the model routes; the function takes the ids and weights.
// RUN: moe-opt %s --moe-build-layer="name=experts hidden=2880 intermediate=2880 experts=128 top-k=4 routing=none activation=gptoss alpha=1.702 limit=7.0 expert-bias=true" | FileCheck %s --check-prefix=NONE
// RUN: moe-opt %s --moe-build-layer="routing=none hidden=64 intermediate=32 experts=4 top-k=2" --moe-fuse-layer | FileCheck %s --check-prefix=NONE-FUSED
// The built function is a layer the pipelines take whole.
// RUN: moe-opt %s --moe-build-layer="hidden=64 intermediate=32 experts=4 top-k=2" --moe-fuse-layer | FileCheck %s --check-prefix=FUSED
//
// Options no layer can have: an error naming the option or the op's rule,
// and a non-zero exit.
// RUN: not moe-opt %s --moe-build-layer="hidden=0 intermediate=32 experts=4 top-k=2" 2>&1 | FileCheck %s --check-prefix=HIDDEN
// RUN: not moe-opt %s --moe-build-layer="hidden=64 intermediate=32 experts=4 top-k=2 routing=softmax" 2>&1 | FileCheck %s --check-prefix=ROUTING
// RUN: not moe-opt %s --moe-build-layer="hidden=64 intermediate=32 experts=4 top-k=2 activation=gelu" 2>&1 | FileCheck %s --check-prefix=ACT
// RUN: not moe-opt %s --moe-build-layer="hidden=64 intermediate=32 experts=4 top-k=2 logits=f16" 2>&1 | FileCheck %s --check-prefix=LOGITS
// RUN: not moe-opt %s --moe-build-layer="hidden=64 intermediate=32 experts=4 top-k=2 alpha=1.0" 2>&1 | FileCheck %s --check-prefix=ALPHA
// RUN: not moe-opt %s --moe-build-layer="hidden=64 intermediate=32 experts=4 top-k=2 routing=sigmoid_topk groups=2" 2>&1 | FileCheck %s --check-prefix=GROUPS
// RUN: not moe-opt %s --moe-build-layer="hidden=64 intermediate=32 experts=4 top-k=2 shared-gate=true" 2>&1 | FileCheck %s --check-prefix=GATE
// RUN: not moe-opt %s --moe-build-layer="hidden=64 intermediate=32 experts=4 top-k=8" 2>&1 | FileCheck %s --check-prefix=TOPK
// RUN: not moe-opt %s --moe-build-layer="hidden=64 intermediate=32 experts=6 top-k=2 routing=sigmoid_topk groups=4 select-groups=2" 2>&1 | FileCheck %s --check-prefix=DIVIDE
// RUN: not moe-opt %s --moe-build-layer="name=taken hidden=64 intermediate=32 experts=4 top-k=2" 2>&1 | FileCheck %s --check-prefix=TAKEN
// RUN: not moe-opt %s --moe-build-layer="hidden=64 intermediate=32 experts=4 top-k=2 scale=x" 2>&1 | FileCheck %s --check-prefix=PARSE
// RUN: not moe-opt %s --moe-build-layer="hidden=64 intermediate=32 experts=4 top-k=2 routing=none renormalize=true" 2>&1 | FileCheck %s --check-prefix=NONE-RENORM
// RUN: not moe-opt %s --moe-build-layer="hidden=64 intermediate=32 experts=4 top-k=2 routing=none shared-intermediate=32" 2>&1 | FileCheck %s --check-prefix=NONE-SHARED

func.func private @taken()

// MIXTRAL-LABEL: func.func @moe_layer(
// Each argument named as --moe-generate-backward and the runtime's callers
// name it (moe.name).
// MIXTRAL-SAME: %[[X:[^:]*]]: tensor<?x4096xbf16> {moe.name = "tokens"}, %[[L:[^:]*]]: tensor<?x8xbf16> {moe.name = "logits"}, %[[W13:[^:]*]]: tensor<8x28672x4096xbf16> {moe.name = "gate_up_weights"}, %[[W2:[^:]*]]: tensor<8x4096x14336xbf16> {moe.name = "down_weights"}) -> (tensor<?x4096xbf16> {moe.name = "out"})
// MIXTRAL: %[[IDS:.*]], %[[W:.*]] = moe.route softmax_topk %[[L]] top 2 renormalize : (tensor<?x8xbf16>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
// MIXTRAL: %[[ROWS:.*]], %[[OFF:.*]], %[[SLOTS:.*]] = moe.permute %[[X]], %[[IDS]] : (tensor<?x4096xbf16>, tensor<?x2xi32>) -> (tensor<?x4096xbf16>, tensor<9xi64>, tensor<?x2xi64>)
// MIXTRAL: %[[Y:.*]] = moe.expert_mlp silu %[[ROWS]], %[[OFF]], %[[W13]], %[[W2]] :
// MIXTRAL: %[[OUT:.*]] = moe.unpermute %[[Y]], %[[SLOTS]] weights %[[W]] :
// MIXTRAL: return %[[OUT]] : tensor<?x4096xbf16>

// DSV3-LABEL: func.func @dsv3(
// DSV3-SAME: %[[X:[^:]*]]: tensor<?x7168xbf16> {moe.name = "tokens"}, %[[L:[^:]*]]: tensor<?x256xf32> {moe.name = "logits"}, %[[B:[^:]*]]: tensor<256xf32> {moe.name = "score_bias"}, %[[W13:[^:]*]]: tensor<256x4096x7168xbf16> {moe.name = "gate_up_weights"}, %[[W2:[^:]*]]: tensor<256x7168x2048xbf16> {moe.name = "down_weights"}, %[[S13:[^:]*]]: tensor<4096x7168xbf16> {moe.name = "shared_gate_up_weights"}, %[[S2:[^:]*]]: tensor<7168x2048xbf16> {moe.name = "shared_down_weights"})
// DSV3: moe.route sigmoid_topk %[[L]] bias %[[B]] top 8 groups 8 select 4 renormalize scale 2.500000e+00
// DSV3: %[[S:.*]] = moe.shared_mlp silu %[[X]], %[[S13]], %[[S2]] :
// DSV3: moe.unpermute %{{.*}}, %{{.*}} weights %{{.*}} shared %[[S]] :

// QWEN2-LABEL: func.func @qwen2(
// QWEN2-SAME: %[[S13:[^:]*]]: tensor<11264x2048xbf16> {moe.name = "shared_gate_up_weights"}, %[[S2:[^:]*]]: tensor<2048x5632xbf16> {moe.name = "shared_down_weights"}, %[[G:[^:]*]]: tensor<1x2048xbf16> {moe.name = "shared_gate_weights"})
// QWEN2: moe.route softmax_topk %{{.*}} top 4 : (tensor<?x60xbf16>)
// QWEN2: moe.shared_mlp silu %{{.*}}, %[[S13]], %[[S2]] gate %[[G]] :

// native-layout: the weights as transformers keeps GPT-OSS's ([E, H, 2I]
// interleaved, [E, I, H]), the experts the kn_weights chain around an
// interleaved activation instead of moe.expert_mlp.
// NATIVE-LABEL: func.func @gptoss(
// NATIVE-SAME: %[[W13:[^:]*]]: tensor<128x2880x5760xbf16> {moe.name = "gate_up_weights"}, %[[B13:[^:]*]]: tensor<128x5760xbf16> {moe.name = "gate_up_bias"}, %[[W2:[^:]*]]: tensor<128x2880x2880xbf16> {moe.name = "down_weights"}, %[[B2:[^:]*]]: tensor<128x2880xf32> {moe.name = "down_bias"})
// NATIVE: %[[GU:.*]] = moe.grouped_matmul %{{.*}}, %[[W13]], %{{.*}} bias %[[B13]] kn_weights
// NATIVE: %[[H:.*]] = moe.swiglu gptoss %[[GU]] interleaved alpha 1.702000e+00 limit 7.000000e+00
// NATIVE: moe.grouped_matmul %[[H]], %[[W2]], %{{.*}} bias %[[B2]] kn_weights
// NATIVE-NOT: moe.expert_mlp
// GPTOSS-LABEL: func.func @gptoss(
// GPTOSS-SAME: %{{[^:]*}}: tensor<128x5760x2880xbf16> {moe.name = "gate_up_weights"}, %[[B13:[^:]*]]: tensor<128x5760xbf16> {moe.name = "gate_up_bias"}, %{{[^:]*}}: tensor<128x2880x2880xbf16> {moe.name = "down_weights"}, %[[B2:[^:]*]]: tensor<128x2880xf32> {moe.name = "down_bias"})
// GPTOSS: moe.route topk_softmax %{{.*}} top 4 :
// GPTOSS: moe.expert_mlp gptoss %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} gate_up_bias %[[B13]] down_bias %[[B2]] alpha 1.702000e+00 limit 7.000000e+00 :

// NONE-LABEL: func.func @experts(
// NONE-SAME: %[[X:[^:]*]]: tensor<?x2880xbf16> {moe.name = "tokens"}, %[[IDS:[^:]*]]: tensor<?x4xi32> {moe.name = "ids"}, %[[W:[^:]*]]: tensor<?x4xf32> {moe.name = "weights"}, %[[W13:[^:]*]]: tensor<128x5760x2880xbf16> {moe.name = "gate_up_weights"}, %[[B13:[^:]*]]: tensor<128x5760xbf16> {moe.name = "gate_up_bias"}, %[[W2:[^:]*]]: tensor<128x2880x2880xbf16> {moe.name = "down_weights"}, %[[B2:[^:]*]]: tensor<128x2880xf32> {moe.name = "down_bias"}) -> (tensor<?x2880xbf16> {moe.name = "out"})
// NONE-NOT: moe.route
// NONE: %[[ROWS:.*]], %[[OFF:.*]], %[[SLOTS:.*]] = moe.permute %[[X]], %[[IDS]] :
// NONE: %[[Y:.*]] = moe.expert_mlp gptoss %[[ROWS]], %[[OFF]], %[[W13]], %[[W2]] gate_up_bias %[[B13]] down_bias %[[B2]] alpha
// NONE: moe.unpermute %[[Y]], %[[SLOTS]] weights %[[W]] :

// NONE-FUSED: func.func @moe_layer
// NONE-FUSED-NEXT: moe.layer
// NONE-FUSED-NEXT: moe.permute
// NONE-FUSED: moe.yield

// FUSED: func.func @moe_layer
// FUSED: moe.layer
// FUSED: moe.yield

// HIDDEN: error: --moe-build-layer: hidden = 0: a positive size is required
// ROUTING: error: --moe-build-layer: routing = 'softmax': expected softmax_topk, topk_softmax, sigmoid_topk or none
// ACT: error: --moe-build-layer: activation = 'gelu': expected silu or gptoss
// LOGITS: error: --moe-build-layer: logits = 'f16': expected bf16 or f32
// ALPHA: error: --moe-build-layer: alpha and limit are gptoss's; silu takes neither
// GROUPS: error: --moe-build-layer: groups and select-groups go together
// GATE: error: --moe-build-layer: shared-gate needs a shared expert (shared-intermediate > 0)
// TOPK: error: {{.*}}'moe.route' op 'top' must be in [1, 4]
// TOPK: error: {{.*}}--moe-build-layer: the options describe no valid layer
// DIVIDE: error: {{.*}}'moe.route' op
// DIVIDE: error: {{.*}}--moe-build-layer: the options describe no valid layer
// TAKEN: error: --moe-build-layer: name = 'taken': the module has a symbol of that name
// PARSE: for the --scale option: 'x' value invalid for floating point argument
// NONE-RENORM: error: --moe-build-layer: renormalize needs a moe.route: routing=none takes the ids and weights as arguments
// NONE-SHARED: error: --moe-build-layer: shared-intermediate needs a moe.route: routing=none takes the ids and weights as arguments
