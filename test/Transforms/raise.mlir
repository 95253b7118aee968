// RUN: moe-opt %s --allow-unregistered-dialect --moe-raise --split-input-file | FileCheck %s
// RUN: moe-opt %s --allow-unregistered-dialect --moe-raise --split-input-file \
// RUN:   --moe-cpu-reference-pipeline -o /dev/null

// Hand-written MoE layers in linalg that --moe-raise rewrites to moe ops:
// forms torch-mlir does not produce for the checked-in fixtures
// (raise-fixtures.mlir). Near misses are in raise-not-raised.mlir.

// Stacked [E, 2I, H] / [E, H, I] weights gathered by the routed id, weights
// renormalised: the stacked tensors are the moe weights as they are.
// CHECK-LABEL: func @gathered_renormalized
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<?x8xf32>, %[[L:[a-z0-9]+]]: tensor<?x4xf32>, %[[W13:[a-z0-9]+]]: tensor<4x16x8xf32>, %[[W2:[a-z0-9]+]]: tensor<4x8x8xf32>)
// CHECK-NOT: linalg.generic
// CHECK-NOT: tm_tensor.sort
// CHECK: %[[IDS:.*]], %[[W:.*]] = moe.route softmax_topk %[[L]] top 2 renormalize : (tensor<?x4xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
// CHECK: %[[ROWS:.*]], %[[OFF:.*]], %[[SLOTS:.*]] = moe.permute %[[X]], %[[IDS]] : (tensor<?x8xf32>, tensor<?x2xi32>) -> (tensor<?x8xf32>, tensor<5xi64>, tensor<?x2xi64>)
// CHECK: %[[H:.*]] = moe.expert_mlp silu %[[ROWS]], %[[OFF]], %[[W13]], %[[W2]] : (tensor<?x8xf32>, tensor<5xi64>, tensor<4x16x8xf32>, tensor<4x8x8xf32>) -> tensor<?x8xf32>
// CHECK: %[[Y:.*]] = moe.unpermute %[[H]], %[[SLOTS]] weights %[[W]] : (tensor<?x8xf32>, tensor<?x2xi64>, tensor<?x2xf32>) -> tensor<?x8xf32>
// CHECK-NOT: linalg.generic
// CHECK: return %[[Y]]
#tk = affine_map<(t, e) -> (t, e)>
#t = affine_map<(t, e) -> (t)>
#e = affine_map<(t, e) -> (e)>
#gu_x = affine_map<(t, j, n, h) -> (t, h)>
#gu_id = affine_map<(t, j, n, h) -> (t, j)>
#gu_out = affine_map<(t, j, n, h) -> (t, j, n)>
#tji = affine_map<(t, j, i) -> (t, j, i)>
#dn_a = affine_map<(t, j, h, i) -> (t, j, i)>
#dn_id = affine_map<(t, j, h, i) -> (t, j)>
#dn_out = affine_map<(t, j, h, i) -> (t, j, h)>
#cb_o = affine_map<(t, h, j) -> (t, j, h)>
#cb_w = affine_map<(t, h, j) -> (t, j)>
#cb_y = affine_map<(t, h, j) -> (t, h)>
func.func @gathered_renormalized(%x: tensor<?x8xf32>, %logits: tensor<?x4xf32>, %w13: tensor<4x16x8xf32>, %w2: tensor<4x8x8xf32>) -> tensor<?x8xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %one = arith.constant 1.0 : f32
  %T = tensor.dim %logits, %c0 : tensor<?x4xf32>
  %row = tensor.empty(%T) : tensor<?xf32>
  %max_init = linalg.fill ins(%ninf : f32) outs(%row : tensor<?xf32>) -> tensor<?xf32>
  %max = linalg.generic {indexing_maps = [#tk, #t], iterator_types = ["parallel", "reduction"]}
      ins(%logits : tensor<?x4xf32>) outs(%max_init : tensor<?xf32>) {
  ^bb0(%l: f32, %acc: f32):
    %m = arith.maximumf %l, %acc : f32
    linalg.yield %m : f32
  } -> tensor<?xf32>
  %scores_init = tensor.empty(%T) : tensor<?x4xf32>
  %exp = linalg.generic {indexing_maps = [#tk, #t, #tk], iterator_types = ["parallel", "parallel"]}
      ins(%logits, %max : tensor<?x4xf32>, tensor<?xf32>) outs(%scores_init : tensor<?x4xf32>) {
  ^bb0(%l: f32, %m: f32, %o: f32):
    %d = arith.subf %l, %m : f32
    %ev = math.exp %d : f32
    linalg.yield %ev : f32
  } -> tensor<?x4xf32>
  %sum_init = linalg.fill ins(%zero : f32) outs(%row : tensor<?xf32>) -> tensor<?xf32>
  %sum = linalg.generic {indexing_maps = [#tk, #t], iterator_types = ["parallel", "reduction"]}
      ins(%exp : tensor<?x4xf32>) outs(%sum_init : tensor<?xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %a = arith.addf %v, %acc : f32
    linalg.yield %a : f32
  } -> tensor<?xf32>
  %probs = linalg.generic {indexing_maps = [#tk, #t, #tk], iterator_types = ["parallel", "parallel"]}
      ins(%exp, %sum : tensor<?x4xf32>, tensor<?xf32>) outs(%scores_init : tensor<?x4xf32>) {
  ^bb0(%v: f32, %s: f32, %o: f32):
    %p = arith.divf %v, %s : f32
    linalg.yield %p : f32
  } -> tensor<?x4xf32>
  %ids_init = tensor.empty(%T) : tensor<?x4xi64>
  %iota = linalg.generic {indexing_maps = [#tk], iterator_types = ["parallel", "parallel"]}
      outs(%ids_init : tensor<?x4xi64>) {
  ^bb0(%o: i64):
    %i = linalg.index 1 : index
    %c = arith.index_cast %i : index to i64
    linalg.yield %c : i64
  } -> tensor<?x4xi64>
  %sorted:2 = "tm_tensor.sort"(%probs, %iota) <{dimension = 1 : i64, operandSegmentSizes = array<i32: 0, 2>}> ({
  ^bb0(%a: f32, %b: f32, %ia: i64, %ib: i64):
    %ge = arith.cmpf oge, %a, %b : f32
    "tm_tensor.yield"(%ge) : (i1) -> ()
  }) : (tensor<?x4xf32>, tensor<?x4xi64>) -> (tensor<?x4xf32>, tensor<?x4xi64>)
  %Ts = tensor.dim %sorted#0, %c0 : tensor<?x4xf32>
  %top_w = tensor.extract_slice %sorted#0[0, 0] [%Ts, 2] [1, 1] : tensor<?x4xf32> to tensor<?x2xf32>
  %top_ids = tensor.extract_slice %sorted#1[0, 0] [%Ts, 2] [1, 1] : tensor<?x4xi64> to tensor<?x2xi64>
  %wsum_init = tensor.empty(%Ts) : tensor<?xf32>
  %wsum_zero = linalg.fill ins(%zero : f32) outs(%wsum_init : tensor<?xf32>) -> tensor<?xf32>
  %wsum = linalg.generic {indexing_maps = [#tk, #t], iterator_types = ["parallel", "reduction"]}
      ins(%top_w : tensor<?x2xf32>) outs(%wsum_zero : tensor<?xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %a = arith.addf %v, %acc : f32
    linalg.yield %a : f32
  } -> tensor<?xf32>
  %w_init = tensor.empty(%Ts) : tensor<?x2xf32>
  %w = linalg.generic {indexing_maps = [#tk, #t, #tk], iterator_types = ["parallel", "parallel"]}
      ins(%top_w, %wsum : tensor<?x2xf32>, tensor<?xf32>) outs(%w_init : tensor<?x2xf32>) {
  ^bb0(%v: f32, %s: f32, %o: f32):
    %d = arith.divf %v, %s : f32
    linalg.yield %d : f32
  } -> tensor<?x2xf32>
  %T2 = tensor.dim %x, %c0 : tensor<?x8xf32>
  %gu_init = tensor.empty(%T2) : tensor<?x2x16xf32>
  %gu_zero = linalg.fill ins(%zero : f32) outs(%gu_init : tensor<?x2x16xf32>) -> tensor<?x2x16xf32>
  %gate_up = linalg.generic {indexing_maps = [#gu_x, #gu_id, #gu_out], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%x, %top_ids : tensor<?x8xf32>, tensor<?x2xi64>) outs(%gu_zero : tensor<?x2x16xf32>) {
  ^bb0(%xv: f32, %id: i64, %acc: f32):
    %e = arith.index_cast %id : i64 to index
    %nn = linalg.index 2 : index
    %hh = linalg.index 3 : index
    %wv = tensor.extract %w13[%e, %nn, %hh] : tensor<4x16x8xf32>
    %p = arith.mulf %xv, %wv : f32
    %a = arith.addf %acc, %p : f32
    linalg.yield %a : f32
  } -> tensor<?x2x16xf32>
  %gate = tensor.extract_slice %gate_up[0, 0, 0] [%T2, 2, 8] [1, 1, 1] : tensor<?x2x16xf32> to tensor<?x2x8xf32>
  %up = tensor.extract_slice %gate_up[0, 0, 8] [%T2, 2, 8] [1, 1, 1] : tensor<?x2x16xf32> to tensor<?x2x8xf32>
  %act_init = tensor.empty(%T2) : tensor<?x2x8xf32>
  %act = linalg.generic {indexing_maps = [#tji, #tji, #tji], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%gate, %up : tensor<?x2x8xf32>, tensor<?x2x8xf32>) outs(%act_init : tensor<?x2x8xf32>) {
  ^bb0(%g: f32, %u: f32, %o: f32):
    %n = arith.negf %g : f32
    %ex = math.exp %n : f32
    %den = arith.addf %ex, %one : f32
    %sig = arith.divf %one, %den : f32
    %s = arith.mulf %g, %sig : f32
    %a = arith.mulf %s, %u : f32
    linalg.yield %a : f32
  } -> tensor<?x2x8xf32>
  %dn_zero = linalg.fill ins(%zero : f32) outs(%act_init : tensor<?x2x8xf32>) -> tensor<?x2x8xf32>
  %down = linalg.generic {indexing_maps = [#dn_a, #dn_id, #dn_out], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%act, %top_ids : tensor<?x2x8xf32>, tensor<?x2xi64>) outs(%dn_zero : tensor<?x2x8xf32>) {
  ^bb0(%av: f32, %id: i64, %acc: f32):
    %e = arith.index_cast %id : i64 to index
    %hh = linalg.index 2 : index
    %ii = linalg.index 3 : index
    %wv = tensor.extract %w2[%e, %hh, %ii] : tensor<4x8x8xf32>
    %p = arith.mulf %av, %wv : f32
    %a = arith.addf %acc, %p : f32
    linalg.yield %a : f32
  } -> tensor<?x2x8xf32>
  %y_init = tensor.empty(%T2) : tensor<?x8xf32>
  %y_zero = linalg.fill ins(%zero : f32) outs(%y_init : tensor<?x8xf32>) -> tensor<?x8xf32>
  %y = linalg.generic {indexing_maps = [#cb_o, #cb_w, #cb_y], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%down, %w : tensor<?x2x8xf32>, tensor<?x2xf32>) outs(%y_zero : tensor<?x8xf32>) {
  ^bb0(%o: f32, %wv: f32, %acc: f32):
    %p = arith.mulf %o, %wv : f32
    %a = arith.addf %acc, %p : f32
    linalg.yield %a : f32
  } -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

// Without renormalisation (Qwen3's norm_topk_prob=False): no `renormalize`.
// CHECK-LABEL: func @gathered_plain
// CHECK: moe.route softmax_topk %{{.*}} top 2 :
// CHECK: moe.expert_mlp silu
// CHECK: moe.unpermute
#tk = affine_map<(t, e) -> (t, e)>
#t = affine_map<(t, e) -> (t)>
#e = affine_map<(t, e) -> (e)>
#gu_x = affine_map<(t, j, n, h) -> (t, h)>
#gu_id = affine_map<(t, j, n, h) -> (t, j)>
#gu_out = affine_map<(t, j, n, h) -> (t, j, n)>
#tji = affine_map<(t, j, i) -> (t, j, i)>
#dn_a = affine_map<(t, j, h, i) -> (t, j, i)>
#dn_id = affine_map<(t, j, h, i) -> (t, j)>
#dn_out = affine_map<(t, j, h, i) -> (t, j, h)>
#cb_o = affine_map<(t, h, j) -> (t, j, h)>
#cb_w = affine_map<(t, h, j) -> (t, j)>
#cb_y = affine_map<(t, h, j) -> (t, h)>
func.func @gathered_plain(%x: tensor<?x8xf32>, %logits: tensor<?x4xf32>, %w13: tensor<4x16x8xf32>, %w2: tensor<4x8x8xf32>) -> tensor<?x8xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %one = arith.constant 1.0 : f32
  %T = tensor.dim %logits, %c0 : tensor<?x4xf32>
  %row = tensor.empty(%T) : tensor<?xf32>
  %max_init = linalg.fill ins(%ninf : f32) outs(%row : tensor<?xf32>) -> tensor<?xf32>
  %max = linalg.generic {indexing_maps = [#tk, #t], iterator_types = ["parallel", "reduction"]}
      ins(%logits : tensor<?x4xf32>) outs(%max_init : tensor<?xf32>) {
  ^bb0(%l: f32, %acc: f32):
    %m = arith.maximumf %l, %acc : f32
    linalg.yield %m : f32
  } -> tensor<?xf32>
  %scores_init = tensor.empty(%T) : tensor<?x4xf32>
  %exp = linalg.generic {indexing_maps = [#tk, #t, #tk], iterator_types = ["parallel", "parallel"]}
      ins(%logits, %max : tensor<?x4xf32>, tensor<?xf32>) outs(%scores_init : tensor<?x4xf32>) {
  ^bb0(%l: f32, %m: f32, %o: f32):
    %d = arith.subf %l, %m : f32
    %ev = math.exp %d : f32
    linalg.yield %ev : f32
  } -> tensor<?x4xf32>
  %sum_init = linalg.fill ins(%zero : f32) outs(%row : tensor<?xf32>) -> tensor<?xf32>
  %sum = linalg.generic {indexing_maps = [#tk, #t], iterator_types = ["parallel", "reduction"]}
      ins(%exp : tensor<?x4xf32>) outs(%sum_init : tensor<?xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %a = arith.addf %v, %acc : f32
    linalg.yield %a : f32
  } -> tensor<?xf32>
  %probs = linalg.generic {indexing_maps = [#tk, #t, #tk], iterator_types = ["parallel", "parallel"]}
      ins(%exp, %sum : tensor<?x4xf32>, tensor<?xf32>) outs(%scores_init : tensor<?x4xf32>) {
  ^bb0(%v: f32, %s: f32, %o: f32):
    %p = arith.divf %v, %s : f32
    linalg.yield %p : f32
  } -> tensor<?x4xf32>
  %ids_init = tensor.empty(%T) : tensor<?x4xi64>
  %iota = linalg.generic {indexing_maps = [#tk], iterator_types = ["parallel", "parallel"]}
      outs(%ids_init : tensor<?x4xi64>) {
  ^bb0(%o: i64):
    %i = linalg.index 1 : index
    %c = arith.index_cast %i : index to i64
    linalg.yield %c : i64
  } -> tensor<?x4xi64>
  %sorted:2 = "tm_tensor.sort"(%probs, %iota) <{dimension = 1 : i64, operandSegmentSizes = array<i32: 0, 2>}> ({
  ^bb0(%a: f32, %b: f32, %ia: i64, %ib: i64):
    %ge = arith.cmpf oge, %a, %b : f32
    "tm_tensor.yield"(%ge) : (i1) -> ()
  }) : (tensor<?x4xf32>, tensor<?x4xi64>) -> (tensor<?x4xf32>, tensor<?x4xi64>)
  %Ts = tensor.dim %sorted#0, %c0 : tensor<?x4xf32>
  %top_w = tensor.extract_slice %sorted#0[0, 0] [%Ts, 2] [1, 1] : tensor<?x4xf32> to tensor<?x2xf32>
  %top_ids = tensor.extract_slice %sorted#1[0, 0] [%Ts, 2] [1, 1] : tensor<?x4xi64> to tensor<?x2xi64>
  %T2 = tensor.dim %x, %c0 : tensor<?x8xf32>
  %gu_init = tensor.empty(%T2) : tensor<?x2x16xf32>
  %gu_zero = linalg.fill ins(%zero : f32) outs(%gu_init : tensor<?x2x16xf32>) -> tensor<?x2x16xf32>
  %gate_up = linalg.generic {indexing_maps = [#gu_x, #gu_id, #gu_out], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%x, %top_ids : tensor<?x8xf32>, tensor<?x2xi64>) outs(%gu_zero : tensor<?x2x16xf32>) {
  ^bb0(%xv: f32, %id: i64, %acc: f32):
    %e = arith.index_cast %id : i64 to index
    %nn = linalg.index 2 : index
    %hh = linalg.index 3 : index
    %wv = tensor.extract %w13[%e, %nn, %hh] : tensor<4x16x8xf32>
    %p = arith.mulf %xv, %wv : f32
    %a = arith.addf %acc, %p : f32
    linalg.yield %a : f32
  } -> tensor<?x2x16xf32>
  %gate = tensor.extract_slice %gate_up[0, 0, 0] [%T2, 2, 8] [1, 1, 1] : tensor<?x2x16xf32> to tensor<?x2x8xf32>
  %up = tensor.extract_slice %gate_up[0, 0, 8] [%T2, 2, 8] [1, 1, 1] : tensor<?x2x16xf32> to tensor<?x2x8xf32>
  %act_init = tensor.empty(%T2) : tensor<?x2x8xf32>
  %act = linalg.generic {indexing_maps = [#tji, #tji, #tji], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%gate, %up : tensor<?x2x8xf32>, tensor<?x2x8xf32>) outs(%act_init : tensor<?x2x8xf32>) {
  ^bb0(%g: f32, %u: f32, %o: f32):
    %n = arith.negf %g : f32
    %ex = math.exp %n : f32
    %den = arith.addf %ex, %one : f32
    %sig = arith.divf %one, %den : f32
    %s = arith.mulf %g, %sig : f32
    %a = arith.mulf %s, %u : f32
    linalg.yield %a : f32
  } -> tensor<?x2x8xf32>
  %dn_zero = linalg.fill ins(%zero : f32) outs(%act_init : tensor<?x2x8xf32>) -> tensor<?x2x8xf32>
  %down = linalg.generic {indexing_maps = [#dn_a, #dn_id, #dn_out], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%act, %top_ids : tensor<?x2x8xf32>, tensor<?x2xi64>) outs(%dn_zero : tensor<?x2x8xf32>) {
  ^bb0(%av: f32, %id: i64, %acc: f32):
    %e = arith.index_cast %id : i64 to index
    %hh = linalg.index 2 : index
    %ii = linalg.index 3 : index
    %wv = tensor.extract %w2[%e, %hh, %ii] : tensor<4x8x8xf32>
    %p = arith.mulf %av, %wv : f32
    %a = arith.addf %acc, %p : f32
    linalg.yield %a : f32
  } -> tensor<?x2x8xf32>
  %y_init = tensor.empty(%T2) : tensor<?x8xf32>
  %y_zero = linalg.fill ins(%zero : f32) outs(%y_init : tensor<?x8xf32>) -> tensor<?x8xf32>
  %y = linalg.generic {indexing_maps = [#cb_o, #cb_w, #cb_y], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%down, %top_w : tensor<?x2x8xf32>, tensor<?x2xf32>) outs(%y_zero : tensor<?x8xf32>) {
  ^bb0(%o: f32, %wv: f32, %acc: f32):
    %p = arith.mulf %o, %wv : f32
    %a = arith.addf %acc, %p : f32
    linalg.yield %a : f32
  } -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

// A residual added after the layer is not part of it: the layer is raised,
// the addition stays.
// CHECK-LABEL: func @residual_after_layer
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<?x8xf32>
// CHECK: %[[Y:.*]] = moe.unpermute
// CHECK: %[[R:.*]] = linalg.generic {{.*}} ins(%[[Y]], %[[X]] : tensor<?x8xf32>, tensor<?x8xf32>)
// CHECK: arith.addf
// CHECK: return %[[R]]
#tk = affine_map<(t, e) -> (t, e)>
#t = affine_map<(t, e) -> (t)>
#e = affine_map<(t, e) -> (e)>
#gu_x = affine_map<(t, j, n, h) -> (t, h)>
#gu_id = affine_map<(t, j, n, h) -> (t, j)>
#gu_out = affine_map<(t, j, n, h) -> (t, j, n)>
#tji = affine_map<(t, j, i) -> (t, j, i)>
#dn_a = affine_map<(t, j, h, i) -> (t, j, i)>
#dn_id = affine_map<(t, j, h, i) -> (t, j)>
#dn_out = affine_map<(t, j, h, i) -> (t, j, h)>
#cb_o = affine_map<(t, h, j) -> (t, j, h)>
#cb_w = affine_map<(t, h, j) -> (t, j)>
#cb_y = affine_map<(t, h, j) -> (t, h)>
#cb_y2 = affine_map<(t, h) -> (t, h)>
func.func @residual_after_layer(%x: tensor<?x8xf32>, %logits: tensor<?x4xf32>, %w13: tensor<4x16x8xf32>, %w2: tensor<4x8x8xf32>) -> tensor<?x8xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %one = arith.constant 1.0 : f32
  %T = tensor.dim %logits, %c0 : tensor<?x4xf32>
  %row = tensor.empty(%T) : tensor<?xf32>
  %max_init = linalg.fill ins(%ninf : f32) outs(%row : tensor<?xf32>) -> tensor<?xf32>
  %max = linalg.generic {indexing_maps = [#tk, #t], iterator_types = ["parallel", "reduction"]}
      ins(%logits : tensor<?x4xf32>) outs(%max_init : tensor<?xf32>) {
  ^bb0(%l: f32, %acc: f32):
    %m = arith.maximumf %l, %acc : f32
    linalg.yield %m : f32
  } -> tensor<?xf32>
  %scores_init = tensor.empty(%T) : tensor<?x4xf32>
  %exp = linalg.generic {indexing_maps = [#tk, #t, #tk], iterator_types = ["parallel", "parallel"]}
      ins(%logits, %max : tensor<?x4xf32>, tensor<?xf32>) outs(%scores_init : tensor<?x4xf32>) {
  ^bb0(%l: f32, %m: f32, %o: f32):
    %d = arith.subf %l, %m : f32
    %ev = math.exp %d : f32
    linalg.yield %ev : f32
  } -> tensor<?x4xf32>
  %sum_init = linalg.fill ins(%zero : f32) outs(%row : tensor<?xf32>) -> tensor<?xf32>
  %sum = linalg.generic {indexing_maps = [#tk, #t], iterator_types = ["parallel", "reduction"]}
      ins(%exp : tensor<?x4xf32>) outs(%sum_init : tensor<?xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %a = arith.addf %v, %acc : f32
    linalg.yield %a : f32
  } -> tensor<?xf32>
  %probs = linalg.generic {indexing_maps = [#tk, #t, #tk], iterator_types = ["parallel", "parallel"]}
      ins(%exp, %sum : tensor<?x4xf32>, tensor<?xf32>) outs(%scores_init : tensor<?x4xf32>) {
  ^bb0(%v: f32, %s: f32, %o: f32):
    %p = arith.divf %v, %s : f32
    linalg.yield %p : f32
  } -> tensor<?x4xf32>
  %ids_init = tensor.empty(%T) : tensor<?x4xi64>
  %iota = linalg.generic {indexing_maps = [#tk], iterator_types = ["parallel", "parallel"]}
      outs(%ids_init : tensor<?x4xi64>) {
  ^bb0(%o: i64):
    %i = linalg.index 1 : index
    %c = arith.index_cast %i : index to i64
    linalg.yield %c : i64
  } -> tensor<?x4xi64>
  %sorted:2 = "tm_tensor.sort"(%probs, %iota) <{dimension = 1 : i64, operandSegmentSizes = array<i32: 0, 2>}> ({
  ^bb0(%a: f32, %b: f32, %ia: i64, %ib: i64):
    %ge = arith.cmpf oge, %a, %b : f32
    "tm_tensor.yield"(%ge) : (i1) -> ()
  }) : (tensor<?x4xf32>, tensor<?x4xi64>) -> (tensor<?x4xf32>, tensor<?x4xi64>)
  %Ts = tensor.dim %sorted#0, %c0 : tensor<?x4xf32>
  %top_w = tensor.extract_slice %sorted#0[0, 0] [%Ts, 2] [1, 1] : tensor<?x4xf32> to tensor<?x2xf32>
  %top_ids = tensor.extract_slice %sorted#1[0, 0] [%Ts, 2] [1, 1] : tensor<?x4xi64> to tensor<?x2xi64>
  %T2 = tensor.dim %x, %c0 : tensor<?x8xf32>
  %gu_init = tensor.empty(%T2) : tensor<?x2x16xf32>
  %gu_zero = linalg.fill ins(%zero : f32) outs(%gu_init : tensor<?x2x16xf32>) -> tensor<?x2x16xf32>
  %gate_up = linalg.generic {indexing_maps = [#gu_x, #gu_id, #gu_out], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%x, %top_ids : tensor<?x8xf32>, tensor<?x2xi64>) outs(%gu_zero : tensor<?x2x16xf32>) {
  ^bb0(%xv: f32, %id: i64, %acc: f32):
    %e = arith.index_cast %id : i64 to index
    %nn = linalg.index 2 : index
    %hh = linalg.index 3 : index
    %wv = tensor.extract %w13[%e, %nn, %hh] : tensor<4x16x8xf32>
    %p = arith.mulf %xv, %wv : f32
    %a = arith.addf %acc, %p : f32
    linalg.yield %a : f32
  } -> tensor<?x2x16xf32>
  %gate = tensor.extract_slice %gate_up[0, 0, 0] [%T2, 2, 8] [1, 1, 1] : tensor<?x2x16xf32> to tensor<?x2x8xf32>
  %up = tensor.extract_slice %gate_up[0, 0, 8] [%T2, 2, 8] [1, 1, 1] : tensor<?x2x16xf32> to tensor<?x2x8xf32>
  %act_init = tensor.empty(%T2) : tensor<?x2x8xf32>
  %act = linalg.generic {indexing_maps = [#tji, #tji, #tji], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%gate, %up : tensor<?x2x8xf32>, tensor<?x2x8xf32>) outs(%act_init : tensor<?x2x8xf32>) {
  ^bb0(%g: f32, %u: f32, %o: f32):
    %n = arith.negf %g : f32
    %ex = math.exp %n : f32
    %den = arith.addf %ex, %one : f32
    %sig = arith.divf %one, %den : f32
    %s = arith.mulf %g, %sig : f32
    %a = arith.mulf %s, %u : f32
    linalg.yield %a : f32
  } -> tensor<?x2x8xf32>
  %dn_zero = linalg.fill ins(%zero : f32) outs(%act_init : tensor<?x2x8xf32>) -> tensor<?x2x8xf32>
  %down = linalg.generic {indexing_maps = [#dn_a, #dn_id, #dn_out], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%act, %top_ids : tensor<?x2x8xf32>, tensor<?x2xi64>) outs(%dn_zero : tensor<?x2x8xf32>) {
  ^bb0(%av: f32, %id: i64, %acc: f32):
    %e = arith.index_cast %id : i64 to index
    %hh = linalg.index 2 : index
    %ii = linalg.index 3 : index
    %wv = tensor.extract %w2[%e, %hh, %ii] : tensor<4x8x8xf32>
    %p = arith.mulf %av, %wv : f32
    %a = arith.addf %acc, %p : f32
    linalg.yield %a : f32
  } -> tensor<?x2x8xf32>
  %y_init = tensor.empty(%T2) : tensor<?x8xf32>
  %y_zero = linalg.fill ins(%zero : f32) outs(%y_init : tensor<?x8xf32>) -> tensor<?x8xf32>
  %y = linalg.generic {indexing_maps = [#cb_o, #cb_w, #cb_y], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%down, %top_w : tensor<?x2x8xf32>, tensor<?x2xf32>) outs(%y_zero : tensor<?x8xf32>) {
  ^bb0(%o: f32, %wv: f32, %acc: f32):
    %p = arith.mulf %o, %wv : f32
    %a = arith.addf %acc, %p : f32
    linalg.yield %a : f32
  } -> tensor<?x8xf32>
  %res = linalg.generic {indexing_maps = [#cb_y2, #cb_y2, #cb_y2], iterator_types = ["parallel", "parallel"]}
      ins(%y, %x : tensor<?x8xf32>, tensor<?x8xf32>) outs(%y_init : tensor<?x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.addf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<?x8xf32>
  return %res : tensor<?x8xf32>
}

// -----

// Dense experts (every expert on every token, weighted by a one-hot mask of
// the top-1 id built with select), static T, the softmax without its max,
// silu as gate / (1 + exp(-gate)), per-expert [K, N] weights: the stacked
// weights are built by transposes and insert_slice.
// CHECK-LABEL: func @dense_one_hot
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<3x8xf32>, %[[L:[a-z0-9]+]]: tensor<3x2xf32>, %[[G0:[a-z0-9]+]]: tensor<8x4xf32>, %[[U0:[a-z0-9]+]]: tensor<8x4xf32>, %[[D0:[a-z0-9]+]]: tensor<4x8xf32>, %[[G1:[a-z0-9]+]]: tensor<8x4xf32>, %[[U1:[a-z0-9]+]]: tensor<8x4xf32>, %[[D1:[a-z0-9]+]]: tensor<4x8xf32>)
// CHECK-NOT: linalg.matmul
// CHECK: %[[IDS:.*]], %[[W:.*]] = moe.route softmax_topk %[[L]] top 1 : (tensor<3x2xf32>) -> (tensor<3x1xi32>, tensor<3x1xf32>)
// CHECK: %[[ROWS:.*]], %[[OFF:.*]], %[[SLOTS:.*]] = moe.permute %[[X]], %[[IDS]] : (tensor<3x8xf32>, tensor<3x1xi32>) -> (tensor<3x8xf32>, tensor<3xi64>, tensor<3x1xi64>)
// CHECK: %[[GT0:.*]] = linalg.transpose ins(%[[G0]] : tensor<8x4xf32>)
// CHECK: %[[S0:.*]] = tensor.insert_slice %[[GT0]] into %{{.*}}[0, 0, 0] [1, 4, 8] [1, 1, 1] : tensor<4x8xf32> into tensor<2x8x8xf32>
// CHECK: linalg.transpose ins(%[[U0]] : tensor<8x4xf32>)
// CHECK: tensor.insert_slice %{{.*}}[0, 4, 0] [1, 4, 8]
// CHECK: linalg.transpose ins(%[[G1]] : tensor<8x4xf32>)
// CHECK: tensor.insert_slice %{{.*}}[1, 0, 0] [1, 4, 8]
// CHECK: linalg.transpose ins(%[[U1]] : tensor<8x4xf32>)
// CHECK: %[[W13:.*]] = tensor.insert_slice %{{.*}}[1, 4, 0] [1, 4, 8]
// CHECK: linalg.transpose ins(%[[D0]] : tensor<4x8xf32>)
// CHECK: tensor.insert_slice %{{.*}}[0, 0, 0] [1, 8, 4] [1, 1, 1] : tensor<8x4xf32> into tensor<2x8x4xf32>
// CHECK: linalg.transpose ins(%[[D1]] : tensor<4x8xf32>)
// CHECK: %[[W2:.*]] = tensor.insert_slice %{{.*}}[1, 0, 0] [1, 8, 4]
// CHECK: %[[H:.*]] = moe.expert_mlp silu %[[ROWS]], %[[OFF]], %[[W13]], %[[W2]] : (tensor<3x8xf32>, tensor<3xi64>, tensor<2x8x8xf32>, tensor<2x8x4xf32>) -> tensor<3x8xf32>
// CHECK: %[[Y:.*]] = moe.unpermute %[[H]], %[[SLOTS]] weights %[[W]]
// CHECK-NOT: linalg.matmul
// CHECK: return %[[Y]]
#te = affine_map<(t, e) -> (t, e)>
#t = affine_map<(t, e) -> (t)>
#oh_in = affine_map<(t, e, j) -> (t, j)>
#oh_out = affine_map<(t, e, j) -> (t, e)>
#th = affine_map<(t, h) -> (t, h)>
#col0 = affine_map<(t, h) -> (t, 0)>
#col1 = affine_map<(t, h) -> (t, 1)>
func.func @dense_one_hot(%x: tensor<3x8xf32>, %logits: tensor<3x2xf32>,
    %wg0: tensor<8x4xf32>, %wu0: tensor<8x4xf32>, %wd0: tensor<4x8xf32>,
    %wg1: tensor<8x4xf32>, %wu1: tensor<8x4xf32>, %wd1: tensor<4x8xf32>) -> tensor<3x8xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %scores_init = tensor.empty() : tensor<3x2xf32>
  %exp = linalg.generic {indexing_maps = [#te, #te], iterator_types = ["parallel", "parallel"]}
      ins(%logits : tensor<3x2xf32>) outs(%scores_init : tensor<3x2xf32>) {
  ^bb0(%l: f32, %o: f32):
    %ev = math.exp %l : f32
    linalg.yield %ev : f32
  } -> tensor<3x2xf32>
  %row = tensor.empty() : tensor<3xf32>
  %sum_init = linalg.fill ins(%zero : f32) outs(%row : tensor<3xf32>) -> tensor<3xf32>
  %sum = linalg.generic {indexing_maps = [#te, #t], iterator_types = ["parallel", "reduction"]}
      ins(%exp : tensor<3x2xf32>) outs(%sum_init : tensor<3xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %a = arith.addf %v, %acc : f32
    linalg.yield %a : f32
  } -> tensor<3xf32>
  %probs = linalg.generic {indexing_maps = [#te, #t, #te], iterator_types = ["parallel", "parallel"]}
      ins(%exp, %sum : tensor<3x2xf32>, tensor<3xf32>) outs(%scores_init : tensor<3x2xf32>) {
  ^bb0(%v: f32, %sv: f32, %o: f32):
    %p = arith.divf %v, %sv : f32
    linalg.yield %p : f32
  } -> tensor<3x2xf32>
  %ids_init = tensor.empty() : tensor<3x2xi64>
  %iota = linalg.generic {indexing_maps = [#te], iterator_types = ["parallel", "parallel"]}
      outs(%ids_init : tensor<3x2xi64>) {
  ^bb0(%o: i64):
    %i = linalg.index 1 : index
    %c = arith.index_cast %i : index to i64
    linalg.yield %c : i64
  } -> tensor<3x2xi64>
  %sorted:2 = "tm_tensor.sort"(%probs, %iota) <{dimension = 1 : i64, operandSegmentSizes = array<i32: 0, 2>}> ({
  ^bb0(%a: f32, %b: f32, %ia: i64, %ib: i64):
    %ge = arith.cmpf oge, %a, %b : f32
    "tm_tensor.yield"(%ge) : (i1) -> ()
  }) : (tensor<3x2xf32>, tensor<3x2xi64>) -> (tensor<3x2xf32>, tensor<3x2xi64>)
  %top_w = tensor.extract_slice %sorted#0[0, 0] [3, 1] [1, 1] : tensor<3x2xf32> to tensor<3x1xf32>
  %top_ids = tensor.extract_slice %sorted#1[0, 0] [3, 1] [1, 1] : tensor<3x2xi64> to tensor<3x1xi64>
  %dense_zero = linalg.fill ins(%zero : f32) outs(%scores_init : tensor<3x2xf32>) -> tensor<3x2xf32>
  %dense_w = linalg.generic {indexing_maps = [#oh_in, #oh_in, #oh_out], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%top_w, %top_ids : tensor<3x1xf32>, tensor<3x1xi64>) outs(%dense_zero : tensor<3x2xf32>) {
  ^bb0(%wv: f32, %id: i64, %acc: f32):
    %e = linalg.index 1 : index
    %ei = arith.index_cast %e : index to i64
    %hit = arith.cmpi eq, %id, %ei : i64
    %m = arith.select %hit, %one, %zero : f32
    %p = arith.mulf %wv, %m : f32
    %a = arith.addf %acc, %p : f32
    linalg.yield %a : f32
  } -> tensor<3x2xf32>
  %ti = tensor.empty() : tensor<3x4xf32>
  %ti_zero = linalg.fill ins(%zero : f32) outs(%ti : tensor<3x4xf32>) -> tensor<3x4xf32>
  %th = tensor.empty() : tensor<3x8xf32>
  %th_zero = linalg.fill ins(%zero : f32) outs(%th : tensor<3x8xf32>) -> tensor<3x8xf32>
  %g0 = linalg.matmul ins(%x, %wg0 : tensor<3x8xf32>, tensor<8x4xf32>) outs(%ti_zero : tensor<3x4xf32>) -> tensor<3x4xf32>
  %u0 = linalg.matmul ins(%x, %wu0 : tensor<3x8xf32>, tensor<8x4xf32>) outs(%ti_zero : tensor<3x4xf32>) -> tensor<3x4xf32>
  %a0 = linalg.generic {indexing_maps = [#th, #th, #th], iterator_types = ["parallel", "parallel"]}
      ins(%g0, %u0 : tensor<3x4xf32>, tensor<3x4xf32>) outs(%ti : tensor<3x4xf32>) {
  ^bb0(%g: f32, %u: f32, %o: f32):
    %n = arith.negf %g : f32
    %ex = math.exp %n : f32
    %den = arith.addf %one, %ex : f32
    %s = arith.divf %g, %den : f32
    %a = arith.mulf %s, %u : f32
    linalg.yield %a : f32
  } -> tensor<3x4xf32>
  %o0 = linalg.matmul ins(%a0, %wd0 : tensor<3x4xf32>, tensor<4x8xf32>) outs(%th_zero : tensor<3x8xf32>) -> tensor<3x8xf32>
  %g1 = linalg.matmul ins(%x, %wg1 : tensor<3x8xf32>, tensor<8x4xf32>) outs(%ti_zero : tensor<3x4xf32>) -> tensor<3x4xf32>
  %u1 = linalg.matmul ins(%x, %wu1 : tensor<3x8xf32>, tensor<8x4xf32>) outs(%ti_zero : tensor<3x4xf32>) -> tensor<3x4xf32>
  %a1 = linalg.generic {indexing_maps = [#th, #th, #th], iterator_types = ["parallel", "parallel"]}
      ins(%g1, %u1 : tensor<3x4xf32>, tensor<3x4xf32>) outs(%ti : tensor<3x4xf32>) {
  ^bb0(%g: f32, %u: f32, %o: f32):
    %n = arith.negf %g : f32
    %ex = math.exp %n : f32
    %den = arith.addf %one, %ex : f32
    %s = arith.divf %g, %den : f32
    %a = arith.mulf %s, %u : f32
    linalg.yield %a : f32
  } -> tensor<3x4xf32>
  %o1 = linalg.matmul ins(%a1, %wd1 : tensor<3x4xf32>, tensor<4x8xf32>) outs(%th_zero : tensor<3x8xf32>) -> tensor<3x8xf32>
  %y = linalg.generic {indexing_maps = [#th, #th, #col0, #col1, #th], iterator_types = ["parallel", "parallel"]}
      ins(%o0, %o1, %dense_w, %dense_w : tensor<3x8xf32>, tensor<3x8xf32>, tensor<3x2xf32>, tensor<3x2xf32>)
      outs(%th : tensor<3x8xf32>) {
  ^bb0(%v0: f32, %v1: f32, %d0: f32, %d1: f32, %o: f32):
    %p0 = arith.mulf %v0, %d0 : f32
    %p1 = arith.mulf %d1, %v1 : f32
    %sy = arith.addf %p0, %p1 : f32
    linalg.yield %sy : f32
  } -> tensor<3x8xf32>
  return %y : tensor<3x8xf32>
}

