// Issue 25, class 5: runtime entries are named after their function (@f's
// first moe op 'f', its further ones 'f_0', 'f_1', ..., the parts of a fused
// op '<name>_<part>'), and the runtime finds them by name. Two entries of one
// name used to be noticed only by moe-translate; --moe-extract-device-code
// (so --moe-gpu-pipeline) now refuses the second where the names are made,
// naming both ops, and a name a bundle cannot hold. The last case is
// accepted: names that only look alike.
//
// RUN: not moe-opt %s --split-input-file --mlir-print-op-on-diagnostic=false --moe-select-kernels --convert-moe-to-nvgpu --moe-extract-device-code -o /dev/null 2>&1 | FileCheck %s
// RUN: not moe-opt %s --split-input-file --mlir-print-op-on-diagnostic=false --moe-gpu-pipeline="format=isa" -o /dev/null 2>&1 | FileCheck %s

// @f's second op is 'f_0', as is @f_0's first.
// CHECK: refusals-entry-names.mlir:[[# @LINE + 8]]:8: error: 'moe.grouped_matmul' op would get the runtime entry name 'f_0' (from @f_0), which the entry of 'moe.grouped_matmul' in @f already has: an entry is named after its function, @f's first moe op 'f', its further ones 'f_0', 'f_1', ..., the parts of a fused op '<name>_<part>'; rename one of the functions
// CHECK: refusals-entry-names.mlir:[[# @LINE + 3]]:8: note: the op whose entry is already named 'f_0'
func.func @f(%rows: tensor<?x256xbf16>, %w: tensor<8x256x256xbf16>, %off: tensor<9xi32>) -> tensor<?x256xbf16> {
  %a = moe.grouped_matmul %rows, %w, %off : (tensor<?x256xbf16>, tensor<8x256x256xbf16>, tensor<9xi32>) -> tensor<?x256xbf16>
  %b = moe.grouped_matmul %a, %w, %off : (tensor<?x256xbf16>, tensor<8x256x256xbf16>, tensor<9xi32>) -> tensor<?x256xbf16>
  return %b : tensor<?x256xbf16>
}
func.func @f_0(%rows: tensor<?x256xbf16>, %w: tensor<8x256x256xbf16>, %off: tensor<9xi32>) -> tensor<?x256xbf16> {
  %a = moe.grouped_matmul %rows, %w, %off : (tensor<?x256xbf16>, tensor<8x256x256xbf16>, tensor<9xi32>) -> tensor<?x256xbf16>
  return %a : tensor<?x256xbf16>
}

// -----

// @g's expert MLP makes 'g_gate_up' and 'g_down'; @g_down's op is 'g_down'.
// CHECK: error: 'moe.grouped_matmul' op would get the runtime entry name 'g_down' (from @g_down), which the entry of 'moe.expert_mlp' in @g already has
// CHECK: note: the op whose entry is already named 'g_down'
func.func @g(%rows: tensor<?x256xbf16>, %off: tensor<9xi32>, %w13: tensor<8x1024x256xbf16>, %w2: tensor<8x256x512xbf16>) -> tensor<?x256xbf16> {
  %y = moe.expert_mlp silu %rows, %off, %w13, %w2 : (tensor<?x256xbf16>, tensor<9xi32>, tensor<8x1024x256xbf16>, tensor<8x256x512xbf16>) -> tensor<?x256xbf16>
  return %y : tensor<?x256xbf16>
}
func.func @g_down(%rows: tensor<?x256xbf16>, %w: tensor<8x256x256xbf16>, %off: tensor<9xi32>) -> tensor<?x256xbf16> {
  %a = moe.grouped_matmul %rows, %w, %off : (tensor<?x256xbf16>, tensor<8x256x256xbf16>, tensor<9xi32>) -> tensor<?x256xbf16>
  return %a : tensor<?x256xbf16>
}

// -----

// A layer's parts are '<name>_route', ...: @l_route (first) collides with
// @l's route part (named after it).
// CHECK: error: 'moe.route' op would get the runtime entry name 'l_route' (from @l), which the entry of 'moe.route' in @l_route already has
// CHECK: note: the op whose entry is already named 'l_route'
func.func @l_route(%logits: tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>) {
  %ids, %w = moe.route softmax_topk %logits top 2 : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  return %ids, %w : tensor<?x2xi32>, tensor<?x2xf32>
}
func.func @l(%x: tensor<?x256xbf16>, %logits: tensor<?x8xf32>, %w13: tensor<8x1024x256xbf16>, %w2: tensor<8x256x512xbf16>) -> tensor<?x256xbf16> {
  %y = moe.layer : tensor<?x256xbf16> {
    %ids, %w = moe.route softmax_topk %logits top 2 renormalize : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
    %rows, %off, %slots = moe.permute %x, %ids : (tensor<?x256xbf16>, tensor<?x2xi32>) -> (tensor<?x256xbf16>, tensor<9xi32>, tensor<?x2xi32>)
    %h = moe.expert_mlp silu %rows, %off, %w13, %w2 : (tensor<?x256xbf16>, tensor<9xi32>, tensor<8x1024x256xbf16>, tensor<8x256x512xbf16>) -> tensor<?x256xbf16>
    %out = moe.unpermute %h, %slots weights %w : (tensor<?x256xbf16>, tensor<?x2xi32>, tensor<?x2xf32>) -> tensor<?x256xbf16>
    moe.yield %out : tensor<?x256xbf16>
  }
  return %y : tensor<?x256xbf16>
}

// -----

// Names a bundle cannot hold: a character outside [A-Za-z0-9_.$], and a
// 250-character function whose layer parts pass 255 bytes.
// CHECK: error: 'moe.route' op would get the runtime entry name 'router-1' (from @router-1), which a bundle cannot hold: names are 1-255 bytes of [A-Za-z0-9_.$]; rename the function
func.func @"router-1"(%logits: tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>) {
  %ids, %w = moe.route softmax_topk %logits top 2 : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  return %ids, %w : tensor<?x2xi32>, tensor<?x2xf32>
}

// -----

// CHECK: error: 'moe.route' op would get the runtime entry name 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx_route' (from @xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx), which a bundle cannot hold
func.func @xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx(%x: tensor<?x256xbf16>, %logits: tensor<?x8xf32>, %w13: tensor<8x1024x256xbf16>, %w2: tensor<8x256x512xbf16>) -> tensor<?x256xbf16> {
  %y = moe.layer : tensor<?x256xbf16> {
    %ids, %w = moe.route softmax_topk %logits top 2 renormalize : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
    %rows, %off, %slots = moe.permute %x, %ids : (tensor<?x256xbf16>, tensor<?x2xi32>) -> (tensor<?x256xbf16>, tensor<9xi32>, tensor<?x2xi32>)
    %h = moe.expert_mlp silu %rows, %off, %w13, %w2 : (tensor<?x256xbf16>, tensor<9xi32>, tensor<8x1024x256xbf16>, tensor<8x256x512xbf16>) -> tensor<?x256xbf16>
    %out = moe.unpermute %h, %slots weights %w : (tensor<?x256xbf16>, tensor<?x2xi32>, tensor<?x2xf32>) -> tensor<?x256xbf16>
    moe.yield %out : tensor<?x256xbf16>
  }
  return %y : tensor<?x256xbf16>
}

// -----

// Accepted: @f's only op is 'f' next to @f_0's 'f_0'; @g_up is no part name
// of @g's expert MLP ('g_gate_up', 'g_down'); '.' and '$' are bundle
// characters.
// CHECK-NOT: error
func.func @f(%rows: tensor<?x256xbf16>, %w: tensor<8x256x256xbf16>, %off: tensor<9xi32>) -> tensor<?x256xbf16> {
  %a = moe.grouped_matmul %rows, %w, %off : (tensor<?x256xbf16>, tensor<8x256x256xbf16>, tensor<9xi32>) -> tensor<?x256xbf16>
  return %a : tensor<?x256xbf16>
}
func.func @f_0(%rows: tensor<?x256xbf16>, %w: tensor<8x256x256xbf16>, %off: tensor<9xi32>) -> tensor<?x256xbf16> {
  %a = moe.grouped_matmul %rows, %w, %off : (tensor<?x256xbf16>, tensor<8x256x256xbf16>, tensor<9xi32>) -> tensor<?x256xbf16>
  return %a : tensor<?x256xbf16>
}
func.func @g(%rows: tensor<?x256xbf16>, %off: tensor<9xi32>, %w13: tensor<8x1024x256xbf16>, %w2: tensor<8x256x512xbf16>) -> tensor<?x256xbf16> {
  %y = moe.expert_mlp silu %rows, %off, %w13, %w2 : (tensor<?x256xbf16>, tensor<9xi32>, tensor<8x1024x256xbf16>, tensor<8x256x512xbf16>) -> tensor<?x256xbf16>
  return %y : tensor<?x256xbf16>
}
func.func @g_up(%rows: tensor<?x256xbf16>, %w: tensor<8x256x256xbf16>, %off: tensor<9xi32>) -> tensor<?x256xbf16> {
  %a = moe.grouped_matmul %rows, %w, %off : (tensor<?x256xbf16>, tensor<8x256x256xbf16>, tensor<9xi32>) -> tensor<?x256xbf16>
  return %a : tensor<?x256xbf16>
}
func.func @"a.b$c"(%logits: tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>) {
  %ids, %w = moe.route softmax_topk %logits top 2 : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  return %ids, %w : tensor<?x2xi32>, tensor<?x2xf32>
}
