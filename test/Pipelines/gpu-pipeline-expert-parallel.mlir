// A rank's expert-parallel layer for the GPU: --moe-expert-parallel and
// --moe-split-exchanges give three stage programs (moe.program), each one entry of the bundle (program.v1) whose arguments are
// named as the stages name their values (moe.stage_args / stage_results):
// route + permute up to the dispatch, the rank's experts (the permute by
// local expert, the expert MLP unfused since a program's steps are one
// entry each, the unpermute) up to the undispatch, and the weighted combine.
// RUN: moe-opt %s --moe-expert-parallel=ranks=2 --moe-split-exchanges --moe-gpu-pipeline -o %t.mlir
// RUN: moe-translate --moe-to-bundle %t.mlir -o %t.moebundle
// RUN: moe-bundle-info %t.moebundle | FileCheck %s
// Its train forward and backward (--moe-generate-backward after the
// rewrite: the adjoint exchanges) split the same way, every stage a program.
// RUN: moe-opt %s --moe-expert-parallel=ranks=2 --moe-generate-backward --moe-split-exchanges --moe-gpu-pipeline -o %t.train.mlir
// RUN: moe-translate --moe-to-bundle %t.train.mlir -o %t.train.moebundle
// RUN: moe-bundle-info %t.train.moebundle | FileCheck %s --check-prefix=TRAIN

func.func @layer(%x: tensor<?x256xbf16>, %logits: tensor<?x8xf32>,
                 %w13: tensor<8x256x256xbf16>, %w2: tensor<8x256x128xbf16>)
    -> tensor<?x256xbf16> {
  %ids, %w = moe.route softmax_topk %logits top 2 renormalize
      : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids
      : (tensor<?x256xbf16>, tensor<?x2xi32>)
      -> (tensor<?x256xbf16>, tensor<9xi64>, tensor<?x2xi64>)
  %gu = moe.grouped_matmul %rows, %w13, %offsets
      : (tensor<?x256xbf16>, tensor<8x256x256xbf16>, tensor<9xi64>) -> tensor<?x256xbf16>
  %h = moe.swiglu silu %gu : (tensor<?x256xbf16>) -> tensor<?x128xbf16>
  %o = moe.grouped_matmul %h, %w2, %offsets
      : (tensor<?x128xbf16>, tensor<8x256x128xbf16>, tensor<9xi64>) -> tensor<?x256xbf16>
  %y = moe.unpermute %o, %slots weights %w
      : (tensor<?x256xbf16>, tensor<?x2xi64>, tensor<?x2xf32>) -> tensor<?x256xbf16>
  return %y : tensor<?x256xbf16>
}

// CHECK-LABEL: entry layer_stage0 op=func.func abi=program.v1
// CHECK-NEXT: size T
// CHECK-NEXT: arg arg0 bf16 in align=16 dims=T,256
// CHECK-NEXT: arg arg1 f32 in align=4 dims=T,8
// CHECK-NEXT: arg v0 f32 out align=4 dims=T,2
// CHECK-NEXT: arg v1 bf16 out align=16 dims=T*2,256
// CHECK-NEXT: arg v2 i64 out align=8 dims=9
// CHECK-NEXT: arg v3 i64 out align=8 dims=T,2
// The rank's 8 / 2 = 4 experts, over the rows it received.
// CHECK: entry layer_stage1.0 op=moe.permute abi=permute.v2 {{.*}} experts=4 top_k=1
// CHECK: entry layer_stage1.1 op=moe.grouped_matmul {{.*}} experts=4 n=256 k=256
// CHECK: entry layer_stage1.2 op=moe.swiglu
// CHECK: entry layer_stage1.3 op=moe.grouped_matmul {{.*}} experts=4 n=256 k=128
// CHECK: entry layer_stage1.4 op=moe.unpermute {{.*}} top_k=1
// Each stage entry says how its caller connects it (contract 3.14).
// CHECK-LABEL: entry layer_stage1 op=func.func abi=program.v1 max_rows=2147483647 stage_of=layer stage=1 exchange=moe.undispatch ranks=2 exchange_args=v4,x0_2,v2 exchange_results=x1_0 function_args=arg0,arg1,arg2,arg3 function_results=result0
// CHECK-NEXT: size T
// CHECK-NEXT: arg arg2 bf16 in align=16 dims=4,256,256
// CHECK-NEXT: arg arg3 bf16 in align=16 dims=4,256,128
// CHECK-NEXT: arg x0_0 bf16 in align=16 dims=T,256
// CHECK-NEXT: arg x0_1 i32 in align=4 dims=T,1
// CHECK-NEXT: arg v4 bf16 out align=16 dims=T,256
// CHECK: entry layer_stage2.0 op=moe.unpermute {{.*}} top_k=2 {{.*}} weighted=1
// CHECK-LABEL: entry layer_stage2 op=func.func abi=program.v1 max_rows=2147483647 stage_of=layer stage=2 function_args=arg0,arg1,arg2,arg3 function_results=result0{{$}}
// CHECK: arg v0 f32 in align=4 dims=T,2
// CHECK-NEXT: arg v3 i64 in align=8 dims=T,2
// CHECK-NEXT: arg x1_0 bf16 in align=16 dims=M,256
// CHECK-NEXT: arg result0 bf16 out align=16 dims=T,256

// TRAIN: entry layer_stage2 op=func.func abi=program.v1
// The train forward's saved counts keep the name the backward takes.
// TRAIN: entry layer_train_stage0 op=func.func abi=program.v1 {{.*}} exchange_results=x0_0,x0_1,counts
// TRAIN: entry layer_train_stage1 op=func.func abi=program.v1
// TRAIN: entry layer_train_stage2 op=func.func abi=program.v1
// TRAIN: entry layer_backward_stage0 op=func.func abi=program.v1
// TRAIN: entry layer_backward_stage1 op=func.func abi=program.v1 {{.*}} exchange=moe.undispatch ranks=2 exchange_args=v3,counts,dispatch_offsets
// The rank's experts' weight gradients where the backward computes them.
// TRAIN: arg grad_down_weights bf16 out align=16 dims=4,256,128
// TRAIN: entry layer_backward_stage2 op=func.func abi=program.v1
// TRAIN: arg grad_gate_up_weights bf16 out align=16 dims=4,256,256
// TRAIN: arg grad_tokens bf16 out align=16 dims=T,256
