// program.v1 from the compiler to the runtime's reader: the backward that
// --moe-generate-backward writes for a Mixtral-style layer is one entry
// (moe.program) whose plan runs its ops' entries <name>.<i>; moe-translate
// writes the bundle, and moe-bundle-info (no MLIR inside) reads the
// entries back with their signatures: the saved values and the output's
// gradient in, grad_<input> out, sizes T and M only.
// RUN: env CUDA_ROOT=%cuda_toolkit moe-opt %s --moe-generate-backward --moe-gpu-pipeline -o %t.mlir
// RUN: moe-translate --moe-to-bundle %t.mlir -o %t.moebundle
// RUN: moe-bundle-info %t.moebundle | FileCheck %s
// RUN: FileCheck %s --check-prefix=LINES --input-file %t.moebundle
// A step naming a part that is no earlier entry is refused.
// RUN: sed -e 's/ part=mixtral_backward.7 / part=mixtral_backward.8 /' %t.moebundle > %t.bad.moebundle
// RUN: not moe-bundle-info %t.bad.moebundle 2>&1 | FileCheck %s --check-prefix=BAD

// CHECK: entry mixtral_train.3 op=moe.swiglu abi=planned.v1 max_rows=2147483647
// CHECK: entry mixtral_train op=func.func abi=program.v1 max_rows=2147483647
// CHECK-NEXT: size T min=0 max=9223372036854775807
// CHECK-NEXT: arg tokens bf16 in align=16 dims=T,16
// CHECK-NEXT: arg logits f32 in align=4 dims=T,8
// CHECK-NEXT: arg gate_up_weights bf16 in align=16 dims=8,48,16
// CHECK-NEXT: arg down_weights bf16 in align=16 dims=8,16,24
// CHECK-NEXT: arg out bf16 out align=16 dims=T,16
// CHECK-NEXT: arg ids i32 out align=4 dims=T,2
// CHECK-NEXT: arg weights f32 out align=4 dims=T,2
// CHECK-NEXT: arg rows bf16 out align=16 dims=T*2,16
// CHECK-NEXT: arg offsets i64 out align=8 dims=9
// CHECK-NEXT: arg slots i64 out align=8 dims=T,2
// CHECK-NEXT: arg gate_up bf16 out align=16 dims=T*2,48
// CHECK-NEXT: arg expert_out bf16 out align=16 dims=T*2,16
// CHECK-NEXT: entry mixtral_backward.0 op=moe.unpermute_grad abi=planned.v1
// The down projection's dgrad with the activation's gradient in its
// epilogue (--moe-fuse-backward): an entry its plan describes.
// CHECK:      entry mixtral_backward.3 op=moe.grouped_dgrad abi=planned.v1 max_rows=2147483647
// CHECK-NEXT: size M min=0 max=2147483647
// CHECK-NEXT: arg rows bf16 in align=16 dims=M,16
// CHECK-NEXT: arg weights bf16 in align=16 dims=8,16,24
// CHECK-NEXT: arg offsets i64 in align=8 dims=9
// CHECK-NEXT: arg out bf16 out align=16 dims=M,48
// CHECK-NEXT: arg act_input bf16 in align=16 dims=M,48
// CHECK-NEXT: kernel grouped_matmul_bf16_64x128x64_s4_actgrad_wkn_off64 threads=128 smem=106496
// CHECK-NEXT: kernel grouped_matmul_bf16_128x128x64_s4_actgrad_wkn_off64 threads=256 smem=147456
// CHECK: entry mixtral_backward op=func.func abi=program.v1 max_rows=2147483647
// CHECK-NEXT: size T min=0 max=9223372036854775807
// CHECK-NEXT: size M min=0 max=9223372036854775807
// CHECK-NEXT: arg logits f32 in align=4 dims=T,8
// CHECK:      arg gate_up bf16 donated align=16 dims=M,48
// CHECK-NEXT: arg expert_out bf16 donated align=16 dims=M,16
// CHECK:      arg grad_out bf16 in align=16 dims=T,16
// CHECK-NEXT: arg grad_tokens bf16 out align=16 dims=T,16
// CHECK-NEXT: arg grad_logits f32 out align=4 dims=T,8
// CHECK-NEXT: arg grad_gate_up_weights bf16 out align=16 dims=8,48,16
// CHECK-NEXT: arg grad_down_weights bf16 out align=16 dims=8,16,24
// CHECK-NOT: kernel

// The bundle lines: a program has no kernel lines; its launches name their
// parts.
// LINES: entry mixtral_backward op=func.func abi=program.v1 max_rows=2147483647
// LINES-NOT: kernel mixtral_backward
// LINES: launch mixtral_backward 0 part=mixtral_backward.0 grid=
// LINES: launch mixtral_backward 0 part=mixtral_backward.7 grid=

// BAD: moe-bundle-info: error: {{.*}}entry 'mixtral_backward': launch record: part='mixtral_backward.8' names no earlier entry
func.func @mixtral(%x: tensor<?x16xbf16>, %logits: tensor<?x8xf32>,
                   %w13: tensor<8x48x16xbf16>, %w2: tensor<8x16x24xbf16>)
    -> tensor<?x16xbf16> {
  %ids, %w = moe.route softmax_topk %logits top 2 renormalize
      : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids
      : (tensor<?x16xbf16>, tensor<?x2xi32>)
      -> (tensor<?x16xbf16>, tensor<9xi64>, tensor<?x2xi64>)
  %gu = moe.grouped_matmul %rows, %w13, %offsets
      : (tensor<?x16xbf16>, tensor<8x48x16xbf16>, tensor<9xi64>) -> tensor<?x48xbf16>
  %h = moe.swiglu silu %gu : (tensor<?x48xbf16>) -> tensor<?x24xbf16>
  %o = moe.grouped_matmul %h, %w2, %offsets
      : (tensor<?x24xbf16>, tensor<8x16x24xbf16>, tensor<9xi64>) -> tensor<?x16xbf16>
  %y = moe.unpermute %o, %slots weights %w
      : (tensor<?x16xbf16>, tensor<?x2xi64>, tensor<?x2xf32>) -> tensor<?x16xbf16>
  return %y : tensor<?x16xbf16>
}
