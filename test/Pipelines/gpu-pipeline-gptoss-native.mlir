// GPT-OSS's layer with its experts as transformers keeps them
// (--moe-build-layer native-layout: gate-up [E, H, 2I] interleaved, down
// [E, I, H]), its train forward and backward, through --moe-gpu-pipeline
// into one bundle: the GEMMs read the weights as they lie (the forward's
// kn_weights forms with their biases, the backward's input gradients as
// plain grouped matmuls over the same weights with swap-AB forms for few
// rows, the weight gradients as kn_weights wgrads whose out lies [E, K, N]),
// the activation and its gradient interleaved kernels of their own.
// RUN: moe-opt %s --moe-build-layer="name=gptoss hidden=256 intermediate=128 experts=8 top-k=2 routing=topk_softmax activation=gptoss alpha=1.702 limit=7.0 expert-bias=true native-layout=true" --moe-generate-backward --moe-gpu-pipeline -o %t.mlir
// RUN: moe-translate --moe-to-bundle %t.mlir -o %t.moebundle
// RUN: moe-bundle-info %t.moebundle | FileCheck %s

// CHECK: entry gptoss_train.2 op=moe.grouped_matmul abi=grouped_matmul.v3 epilogue=store experts=8 n=256 k=256 {{.*}} bias=bf16
// CHECK: kernel grouped_matmul_bf16_128x256x64_s4_biasbf16_wkn_off64
// CHECK: entry gptoss_train.3 op=moe.swiglu abi=planned.v1
// CHECK: kernel moe_swiglu_gptoss_a3fd9db23_l40e00000_il
// CHECK: entry gptoss_train.4 op=moe.grouped_matmul abi=grouped_matmul.v3 epilogue=store experts=8 n=256 k=128 {{.*}} bias=f32
// CHECK: kernel grouped_matmul_bf16_128x256x64_s4_biasf32_wkn_off64
// CHECK: entry gptoss_train op=func.func abi=program.v1
// dW2 and db2: out [E, I, H] = H^T dO, the bias from dO.
// CHECK: entry gptoss_backward.2 op=moe.grouped_wgrad abi=planned.v1
// CHECK: arg grad bf16 in align=16 dims=M,256
// CHECK-NEXT: arg rows bf16 in align=16 dims=M,128
// CHECK: arg out bf16 out align=16 dims=8,128,256
// CHECK-NEXT: arg bias_grad f32 out align=16 dims=8,256
// dH = dO . W2[e]^T: [E, I, H] is W2^T as K-major B.
// CHECK: entry gptoss_backward.3 op=moe.grouped_matmul abi=grouped_matmul.v3 epilogue=store experts=8 n=128 k=256 {{.*}} bias=none
// CHECK: kernel grouped_matmul_bf16_16x64x64_s4_swapab_off64
// CHECK: entry gptoss_backward.4 op=moe.swiglu_grad abi=planned.v1
// CHECK: kernel moe_swiglu_grad_gptoss_a3fd9db23_l40e00000_il
// CHECK: entry gptoss_backward.5 op=moe.grouped_matmul abi=grouped_matmul.v3 epilogue=store experts=8 n=256 k=256 {{.*}} bias=none
// CHECK: entry gptoss_backward.6 op=moe.grouped_wgrad abi=planned.v1
// CHECK: arg out bf16 out align=16 dims=8,256,256
// CHECK-NEXT: arg bias_grad bf16 out align=16 dims=8,256
// CHECK: entry gptoss_backward op=func.func abi=program.v1
// CHECK-NOT: grouped_dgrad
