// A donated argument (the backward's saved values, which it may overwrite)
// stays donated only in the last stage that reads it, and in none when an
// exchange from that stage on reads it: an earlier stage overwriting it
// would hand the later ones garbage.
// RUN: moe-opt %s --moe-expert-parallel=ranks=2 --moe-generate-backward --moe-split-exchanges | FileCheck %s

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

// The train forward donates nothing; the counts it saves keep the name its
// backward takes them by.
// CHECK: func.func @layer_train_stage0(
// CHECK-SAME: moe.exchange_results = ["x0_0", "x0_1", "counts"]
// CHECK-NOT: moe.donated
// CHECK: func.func @layer_backward_stage0(
// `slots` is read again by stage 2: not donated here.
// CHECK-SAME: {moe.donated, moe.name = "weights"}
// CHECK-SAME: {moe.name = "slots"}
// CHECK-SAME: {moe.donated, moe.name = "combined"}
// The exchanges read `dispatch_offsets` and `counts`: donated nowhere.
// CHECK-NOT: moe.donated, moe.name = "dispatch_offsets"
// CHECK-NOT: moe.donated, moe.name = "counts"
// CHECK: func.func @layer_backward_stage1(
// `rows` and `offsets` are read again by stage 2.
// CHECK-SAME: {moe.name = "rows"}
// CHECK-SAME: {moe.name = "offsets"}
// CHECK-SAME: {moe.donated, moe.name = "local_slots"}
// CHECK-SAME: {moe.donated, moe.name = "gate_up"}
// CHECK-NOT: moe.donated, moe.name = "dispatch_offsets"
// CHECK: func.func @layer_backward_stage2(
// CHECK-SAME: {moe.donated, moe.name = "ids"}
// CHECK-SAME: {moe.donated, moe.name = "rows"}
// CHECK-SAME: {moe.donated, moe.name = "offsets"}
// CHECK-SAME: {moe.donated, moe.name = "slots"}
