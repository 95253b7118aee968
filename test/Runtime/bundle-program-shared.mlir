// A DeepSeek-V3-style layer's backward from the compiler to the runtime's
// reader: its shared expert's one-group offsets are an entry of op
// arith.constant (planned.v1, a kernel writing [0, 2^31 - 1]), its combine
// with the shared expert's rows a planned.v1 moe.unpermute, and the program
// takes and returns the shared weights and their gradients as [R, C].
// RUN: env CUDA_ROOT=%cuda_toolkit moe-opt %s --moe-generate-backward --moe-gpu-pipeline -o %t.mlir
// RUN: moe-translate --moe-to-bundle %t.mlir -o %t.moebundle
// RUN: moe-bundle-info %t.moebundle | FileCheck %s

// CHECK: entry deepseek_backward.0 op=arith.constant abi=planned.v1 max_rows=2147483647
// CHECK-NEXT: arg out i64 out align=8 dims=2
// CHECK-NEXT: kernel moe_constant_i64_0_2147483647 threads=32
// CHECK: op=moe.unpermute abi=planned.v1
// CHECK: arg shared bf16 in align=16 dims=T,16
// CHECK: entry deepseek_backward op=func.func abi=program.v1 max_rows=2147483647
// CHECK-NEXT: size T min=0 max=9223372036854775807
// CHECK-NEXT: size M min=0 max=9223372036854775807
// CHECK:      arg tokens bf16 in align=16 dims=T,16
// CHECK-NEXT: arg shared_gate_up_weights bf16 in align=16 dims=64,16
// CHECK-NEXT: arg shared_down_weights bf16 in align=16 dims=16,32
// CHECK-NEXT: arg grad_out bf16 in align=16 dims=T,16
// CHECK:      arg grad_shared_gate_up_weights bf16 out align=16 dims=64,16
// CHECK-NEXT: arg grad_shared_down_weights bf16 out align=16 dims=16,32
func.func @deepseek(%x: tensor<?x16xbf16>, %logits: tensor<?x16xf32>, %bias: tensor<16xf32>,
                    %w13: tensor<16x32x16xbf16>, %w2: tensor<16x16x16xbf16>,
                    %sw13: tensor<64x16xbf16>, %sw2: tensor<16x32xbf16>) -> tensor<?x16xbf16> {
  %ids, %w = moe.route sigmoid_topk %logits bias %bias top 4 groups 4 select 2 renormalize scale 2.5
      : (tensor<?x16xf32>, tensor<16xf32>) -> (tensor<?x4xi32>, tensor<?x4xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids
      : (tensor<?x16xbf16>, tensor<?x4xi32>) -> (tensor<?x16xbf16>, tensor<17xi64>, tensor<?x4xi64>)
  %o = moe.expert_mlp silu %rows, %offsets, %w13, %w2
      : (tensor<?x16xbf16>, tensor<17xi64>, tensor<16x32x16xbf16>, tensor<16x16x16xbf16>) -> tensor<?x16xbf16>
  %sh = moe.shared_mlp silu %x, %sw13, %sw2
      : (tensor<?x16xbf16>, tensor<64x16xbf16>, tensor<16x32xbf16>) -> tensor<?x16xbf16>
  %y = moe.unpermute %o, %slots weights %w shared %sh
      : (tensor<?x16xbf16>, tensor<?x4xi64>, tensor<?x4xf32>, tensor<?x16xbf16>) -> tensor<?x16xbf16>
  return %y : tensor<?x16xbf16>
}
