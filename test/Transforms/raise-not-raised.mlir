// RUN: moe-opt %s --allow-unregistered-dialect --moe-raise --split-input-file --verify-diagnostics | FileCheck %s

// Near misses of a MoE layer: --moe-raise leaves each untouched and says why
// in a remark on the top-k sort.

// Softmax over the token dimension: not the router.
// CHECK-LABEL: func @softmax_over_tokens
// CHECK-NOT: moe.
// CHECK: tm_tensor.sort
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
func.func @softmax_over_tokens(%x: tensor<?x8xf32>, %logits: tensor<?x4xf32>, %w13: tensor<4x16x8xf32>, %w2: tensor<4x8x8xf32>) -> tensor<?x8xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %one = arith.constant 1.0 : f32
  %T = tensor.dim %logits, %c0 : tensor<?x4xf32>
  %row = tensor.empty() : tensor<4xf32>
  %max_init = linalg.fill ins(%ninf : f32) outs(%row : tensor<4xf32>) -> tensor<4xf32>
  %max = linalg.generic {indexing_maps = [#tk, #e], iterator_types = ["reduction", "parallel"]}
      ins(%logits : tensor<?x4xf32>) outs(%max_init : tensor<4xf32>) {
  ^bb0(%l: f32, %acc: f32):
    %m = arith.maximumf %l, %acc : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  %scores_init = tensor.empty(%T) : tensor<?x4xf32>
  %exp = linalg.generic {indexing_maps = [#tk, #e, #tk], iterator_types = ["parallel", "parallel"]}
      ins(%logits, %max : tensor<?x4xf32>, tensor<4xf32>) outs(%scores_init : tensor<?x4xf32>) {
  ^bb0(%l: f32, %m: f32, %o: f32):
    %d = arith.subf %l, %m : f32
    %ev = math.exp %d : f32
    linalg.yield %ev : f32
  } -> tensor<?x4xf32>
  %sum_init = linalg.fill ins(%zero : f32) outs(%row : tensor<4xf32>) -> tensor<4xf32>
  %sum = linalg.generic {indexing_maps = [#tk, #e], iterator_types = ["reduction", "parallel"]}
      ins(%exp : tensor<?x4xf32>) outs(%sum_init : tensor<4xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %a = arith.addf %v, %acc : f32
    linalg.yield %a : f32
  } -> tensor<4xf32>
  %probs = linalg.generic {indexing_maps = [#tk, #e, #tk], iterator_types = ["parallel", "parallel"]}
      ins(%exp, %sum : tensor<?x4xf32>, tensor<4xf32>) outs(%scores_init : tensor<?x4xf32>) {
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
  // expected-remark @+1 {{moe-raise: not raised: the softmax is not normalised by a sum over the expert dimension}}
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

// sigmoid(gate) * up is not SwiGLU's silu(gate) * up.
// CHECK-LABEL: func @sigmoid_not_silu
// CHECK-NOT: moe.
// CHECK: linalg.generic
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
func.func @sigmoid_not_silu(%x: tensor<?x8xf32>, %logits: tensor<?x4xf32>, %w13: tensor<4x16x8xf32>, %w2: tensor<4x8x8xf32>) -> tensor<?x8xf32> {
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
  // expected-remark @+1 {{moe-raise: not raised: the expert activation is not silu(gate) * up}}
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
    %a = arith.mulf %sig, %u : f32
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

// Dividing by the sum over all E scores (1 up to rounding) is not
// renormalisation: refused rather than guessed.
// CHECK-LABEL: func @renormalize_over_all_experts
// CHECK-NOT: moe.
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
func.func @renormalize_over_all_experts(%x: tensor<?x8xf32>, %logits: tensor<?x4xf32>, %w13: tensor<4x16x8xf32>, %w2: tensor<4x8x8xf32>) -> tensor<?x8xf32> {
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
  // expected-remark @+1 {{moe-raise: not raised: routing weights are divided by something other than their sum over the token's top-k}}
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
      ins(%probs : tensor<?x4xf32>) outs(%wsum_zero : tensor<?xf32>) {
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

// Top-3 weights renormalised over 3, but only 2 slots combined.
// CHECK-LABEL: func @topk_mismatch
// CHECK-NOT: moe.
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
func.func @topk_mismatch(%x: tensor<?x8xf32>, %logits: tensor<?x4xf32>, %w13: tensor<4x16x8xf32>, %w2: tensor<4x8x8xf32>) -> tensor<?x8xf32> {
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
  // expected-remark @+1 {{moe-raise: not raised: renormalisation sums 3 weights, the layer routes to 2}}
  %sorted:2 = "tm_tensor.sort"(%probs, %iota) <{dimension = 1 : i64, operandSegmentSizes = array<i32: 0, 2>}> ({
  ^bb0(%a: f32, %b: f32, %ia: i64, %ib: i64):
    %ge = arith.cmpf oge, %a, %b : f32
    "tm_tensor.yield"(%ge) : (i1) -> ()
  }) : (tensor<?x4xf32>, tensor<?x4xi64>) -> (tensor<?x4xf32>, tensor<?x4xi64>)
  %Ts = tensor.dim %sorted#0, %c0 : tensor<?x4xf32>
  %top_w = tensor.extract_slice %sorted#0[0, 0] [%Ts, 3] [1, 1] : tensor<?x4xf32> to tensor<?x3xf32>
  %top_ids = tensor.extract_slice %sorted#1[0, 0] [%Ts, 2] [1, 1] : tensor<?x4xi64> to tensor<?x2xi64>
  %wsum_init = tensor.empty(%Ts) : tensor<?xf32>
  %wsum_zero = linalg.fill ins(%zero : f32) outs(%wsum_init : tensor<?xf32>) -> tensor<?xf32>
  %wsum = linalg.generic {indexing_maps = [#tk, #t], iterator_types = ["parallel", "reduction"]}
      ins(%top_w : tensor<?x3xf32>) outs(%wsum_zero : tensor<?xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %a = arith.addf %v, %acc : f32
    linalg.yield %a : f32
  } -> tensor<?xf32>
  %w_init = tensor.empty(%Ts) : tensor<?x3xf32>
  %w = linalg.generic {indexing_maps = [#tk, #t, #tk], iterator_types = ["parallel", "parallel"]}
      ins(%top_w, %wsum : tensor<?x3xf32>, tensor<?xf32>) outs(%w_init : tensor<?x3xf32>) {
  ^bb0(%v: f32, %s: f32, %o: f32):
    %d = arith.divf %v, %s : f32
    linalg.yield %d : f32
  } -> tensor<?x3xf32>
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
      ins(%down, %w : tensor<?x2x8xf32>, tensor<?x3xf32>) outs(%y_zero : tensor<?x8xf32>) {
  ^bb0(%o: f32, %wv: f32, %acc: f32):
    %p = arith.mulf %o, %wv : f32
    %a = arith.addf %acc, %p : f32
    linalg.yield %a : f32
  } -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

// `ogt` swaps equal scores: ties would not go to the lower expert id.
// CHECK-LABEL: func @unstable_sort
// CHECK-NOT: moe.
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
func.func @unstable_sort(%x: tensor<?x8xf32>, %logits: tensor<?x4xf32>, %w13: tensor<4x16x8xf32>, %w2: tensor<4x8x8xf32>) -> tensor<?x8xf32> {
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
  // expected-remark @+1 {{moe-raise: not raised: the sort's comparator is not `oge` on the scores (descending with ties in expert order)}}
  %sorted:2 = "tm_tensor.sort"(%probs, %iota) <{dimension = 1 : i64, operandSegmentSizes = array<i32: 0, 2>}> ({
  ^bb0(%a: f32, %b: f32, %ia: i64, %ib: i64):
    %ge = arith.cmpf ogt, %a, %b : f32
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

// Top-k of the raw logits (no softmax).
// CHECK-LABEL: func @no_softmax
// CHECK-NOT: moe.
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
func.func @no_softmax(%x: tensor<?x8xf32>, %logits: tensor<?x4xf32>, %w13: tensor<4x16x8xf32>, %w2: tensor<4x8x8xf32>) -> tensor<?x8xf32> {
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
  // expected-remark @+1 {{moe-raise: not raised: the sorted scores are not a softmax of logits over the expert dimension}}
  %sorted:2 = "tm_tensor.sort"(%logits, %iota) <{dimension = 1 : i64, operandSegmentSizes = array<i32: 0, 2>}> ({
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

// A gate-up projection accumulated into an uninitialised tensor, not zeros.
// CHECK-LABEL: func @projection_not_from_zero
// CHECK-NOT: moe.
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
func.func @projection_not_from_zero(%x: tensor<?x8xf32>, %logits: tensor<?x4xf32>, %w13: tensor<4x16x8xf32>, %w2: tensor<4x8x8xf32>) -> tensor<?x8xf32> {
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
  // expected-remark @+1 {{moe-raise: not raised: an expert projection is not a sum of products from zero (a bias or another reduction)}}
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
      ins(%x, %top_ids : tensor<?x8xf32>, tensor<?x2xi64>) outs(%gu_init : tensor<?x2x16xf32>) {
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

// Expert 1's output is computed but never added: not the layer.
// CHECK-LABEL: func @dense_missing_expert
// CHECK-NOT: moe.
#te = affine_map<(t, e) -> (t, e)>
#t = affine_map<(t, e) -> (t)>
#oh_in = affine_map<(t, e, j) -> (t, j)>
#oh_out = affine_map<(t, e, j) -> (t, e)>
#th = affine_map<(t, h) -> (t, h)>
#col0 = affine_map<(t, h) -> (t, 0)>
#col1 = affine_map<(t, h) -> (t, 1)>
func.func @dense_missing_expert(%x: tensor<3x8xf32>, %logits: tensor<3x2xf32>,
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
  // expected-remark @+1 {{moe-raise: not raised: the combine covers 1 of the router's 2 experts}}
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
    linalg.yield %p0 : f32
  } -> tensor<3x8xf32>
  return %y : tensor<3x8xf32>
}

