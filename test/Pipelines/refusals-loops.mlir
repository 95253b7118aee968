// Issue 25, class 7: the GPU pipeline compiles each moe op to a runtime entry
// launched once per call from its function's top level. A moe op in a loop
// that carries the tensor (scf.for iter_args, scf.while) used to be compiled
// as if it ran once; now the GPU pipeline, --moe-check-placement and the
// GPU passes run alone refuse a moe op in any loop or region but a
// moe.layer's, naming the op and the loop. The CPU rules take loops
// (target=cpu: no error); a loop without moe ops is not this check's (the
// last case; extraction refuses host code, gpu-pipeline-no-drops.mlir).
//
// RUN: not moe-opt %s --split-input-file --mlir-print-op-on-diagnostic=false --moe-gpu-pipeline="format=isa" -o /dev/null 2>&1 | FileCheck %s --check-prefixes=CHECK,ACCEPT
// RUN: not moe-opt %s --split-input-file --mlir-print-op-on-diagnostic=false --moe-select-kernels -o /dev/null 2>&1 | FileCheck %s --check-prefixes=CHECK,ACCEPT
// RUN: not moe-opt %s --split-input-file --mlir-print-op-on-diagnostic=false --convert-moe-to-nvgpu -o /dev/null 2>&1 | FileCheck %s
// RUN: not moe-opt %s --split-input-file --mlir-print-op-on-diagnostic=false --moe-check-placement -o /dev/null 2>&1 | FileCheck %s --check-prefixes=CHECK,ACCEPT
// RUN: moe-opt %s --split-input-file --moe-check-placement=target=cpu -o /dev/null

// CHECK: refusals-loops.mlir:[[# @LINE + 7]]:10: error: 'moe.grouped_matmul' op is inside the loop 'scf.for', which carries tensors from one iteration to the next: the GPU pipeline compiles each moe op to a runtime entry launched once per call of @for_iter_args from its top level; unroll the loop, or call the function from a loop on the host
// CHECK: refusals-loops.mlir:[[# @LINE + 5]]:8: note: the enclosing loop
func.func @for_iter_args(%rows: tensor<?x256xbf16>, %w: tensor<8x256x256xbf16>, %off: tensor<9xi32>) -> tensor<?x256xbf16> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %rows) -> (tensor<?x256xbf16>) {
    %y = moe.grouped_matmul %acc, %w, %off : (tensor<?x256xbf16>, tensor<8x256x256xbf16>, tensor<9xi32>) -> tensor<?x256xbf16>
    scf.yield %y : tensor<?x256xbf16>
  }
  return %r : tensor<?x256xbf16>
}

// -----

// CHECK: error: 'moe.grouped_matmul' op is inside the loop 'scf.while', which carries tensors from one iteration to the next: the GPU pipeline compiles each moe op to a runtime entry launched once per call of @while
// CHECK: note: the enclosing loop
func.func @while(%rows: tensor<?x256xbf16>, %w: tensor<8x256x256xbf16>, %off: tensor<9xi32>, %go: i1) -> tensor<?x256xbf16> {
  %r = scf.while (%acc = %rows) : (tensor<?x256xbf16>) -> tensor<?x256xbf16> {
    scf.condition(%go) %acc : tensor<?x256xbf16>
  } do {
  ^bb0(%cur: tensor<?x256xbf16>):
    %y = moe.grouped_matmul %cur, %w, %off : (tensor<?x256xbf16>, tensor<8x256x256xbf16>, tensor<9xi32>) -> tensor<?x256xbf16>
    scf.yield %y : tensor<?x256xbf16>
  }
  return %r : tensor<?x256xbf16>
}

// -----

// A loop that carries nothing: the entry would still run once, not 4 times.
// CHECK: error: 'moe.route' op is inside the loop 'scf.for': the GPU pipeline compiles each moe op to a runtime entry launched once per call of @for_plain
func.func @for_plain(%logits: tensor<?x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  scf.for %i = %c0 to %c4 step %c1 {
    %ids, %w = moe.route softmax_topk %logits top 2 : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  }
  return
}

// -----

// The innermost loop is named, whatever encloses it.
// CHECK: error: 'moe.route' op is inside the loop 'scf.for', which carries tensors
// CHECK: refusals-loops.mlir:[[# @LINE + 6]]:11: note: the enclosing loop
func.func @nested(%logits: tensor<?x8xf32>, %c: i1) -> tensor<?x2xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %init = tensor.empty() : tensor<1x2xf32>
  %r = scf.if %c -> tensor<?x2xf32> {
    %in = scf.for %i = %c0 to %c1 step %c1 iter_args(%acc = %logits) -> (tensor<?x8xf32>) {
      %ids, %w = moe.route softmax_topk %acc top 2 : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
      scf.yield %acc : tensor<?x8xf32>
    }
    %c2 = tensor.cast %init : tensor<1x2xf32> to tensor<?x2xf32>
    scf.yield %c2 : tensor<?x2xf32>
  } else {
    %c3 = tensor.cast %init : tensor<1x2xf32> to tensor<?x2xf32>
    scf.yield %c3 : tensor<?x2xf32>
  }
  return %r : tensor<?x2xf32>
}

// -----

// A branch: the entry would run whatever the condition.
// CHECK: error: 'moe.route' op is inside 'scf.if': the GPU pipeline compiles moe ops at the top level of a function (or of a moe.layer there), each launched once per call of @branch; move it out of the region
// CHECK: note: the enclosing op
func.func @branch(%logits: tensor<?x8xf32>, %c: i1) {
  scf.if %c {
    %ids, %w = moe.route softmax_topk %logits top 2 : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  }
  return
}

// -----

// A layer in a loop is refused as one op.
// CHECK: error: 'moe.layer' op is inside the loop 'scf.for', which carries tensors
// CHECK-NOT: error: 'moe.route' op is inside
func.func @layer_loop(%x: tensor<?x256xbf16>, %logits: tensor<?x8xf32>, %w13: tensor<8x1024x256xbf16>, %w2: tensor<8x256x512xbf16>) -> tensor<?x256xbf16> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %r = scf.for %i = %c0 to %c2 step %c1 iter_args(%acc = %x) -> (tensor<?x256xbf16>) {
    %y = moe.layer : tensor<?x256xbf16> {
      %ids, %w = moe.route softmax_topk %logits top 2 renormalize : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
      %rows, %off, %slots = moe.permute %acc, %ids : (tensor<?x256xbf16>, tensor<?x2xi32>) -> (tensor<?x256xbf16>, tensor<9xi32>, tensor<?x2xi32>)
      %h = moe.expert_mlp silu %rows, %off, %w13, %w2 : (tensor<?x256xbf16>, tensor<9xi32>, tensor<8x1024x256xbf16>, tensor<8x256x512xbf16>) -> tensor<?x256xbf16>
      %out = moe.unpermute %h, %slots weights %w : (tensor<?x256xbf16>, tensor<?x2xi32>, tensor<?x2xf32>) -> tensor<?x256xbf16>
      moe.yield %out : tensor<?x256xbf16>
    }
    scf.yield %y : tensor<?x256xbf16>
  }
  return %r : tensor<?x256xbf16>
}

// -----

// Accepted: a layer's body, and a loop with no moe op (the placement
// check's to leave; the GPU pipeline's fusion folds this empty one away,
// its extraction would refuse any host code left; --convert-moe-to-nvgpu
// alone wants its configurations).
// ACCEPT-NOT: error
func.func @layer_top(%x: tensor<?x256xbf16>, %logits: tensor<?x8xf32>, %w13: tensor<8x1024x256xbf16>, %w2: tensor<8x256x512xbf16>) -> tensor<?x256xbf16> {
  %y = moe.layer : tensor<?x256xbf16> {
    %ids, %w = moe.route softmax_topk %logits top 2 renormalize : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
    %rows, %off, %slots = moe.permute %x, %ids : (tensor<?x256xbf16>, tensor<?x2xi32>) -> (tensor<?x256xbf16>, tensor<9xi32>, tensor<?x2xi32>)
    %h = moe.expert_mlp silu %rows, %off, %w13, %w2 : (tensor<?x256xbf16>, tensor<9xi32>, tensor<8x1024x256xbf16>, tensor<8x256x512xbf16>) -> tensor<?x256xbf16>
    %out = moe.unpermute %h, %slots weights %w : (tensor<?x256xbf16>, tensor<?x2xi32>, tensor<?x2xf32>) -> tensor<?x256xbf16>
    moe.yield %out : tensor<?x256xbf16>
  }
  return %y : tensor<?x256xbf16>
}
func.func @host_loop(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
  }
  return
}
