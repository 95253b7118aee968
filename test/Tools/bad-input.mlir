// Malformed input and bad options end with a diagnostic and a non-zero exit.
// RUN: not moe-opt %s --split-input-file 2>&1 | FileCheck %s
// RUN: not moe-opt %s --moe-no-such-pass 2>&1 | FileCheck %s --check-prefix=NOPASS
// RUN: not moe-opt /dev/null --moe-expand-fused-ops="x=1" 2>&1 | FileCheck %s --check-prefix=BADOPT

// NOPASS: Unknown command line argument '--moe-no-such-pass'
// BADOPT: no such option x

// CHECK: error: expected ':'
func.func @truncated(%l: tensor<?x8xf32>) {
  %i, %w = moe.route softmax_topk %l top 2
}

// -----

// CHECK: error: custom op 'moe.route' expected string or keyword containing one of the following enum values for attribute 'routing' [softmax_topk, topk_softmax, sigmoid_topk]
func.func @bad_routing(%l: tensor<?x8xf32>) {
  %i, %w = moe.route softmax %l top 2 : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  return
}

// -----

// CHECK: error: 'moe.grouped_matmul' op expected 3 or more operands, but found 2
func.func @generic_form_garbage(%x: tensor<?x8xf32>, %ids: tensor<?x2xi32>) {
  %r = "moe.grouped_matmul"(%x, %ids) : (tensor<?x8xf32>, tensor<?x2xi32>) -> (tensor<?x8xf32>)
  return
}
