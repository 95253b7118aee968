// RUN: moe-opt %s --split-input-file --moe-select-kernels="swap-ab-max-rows=0" --convert-moe-to-nvgpu --mlir-print-op-on-diagnostic=false -verify-diagnostics | FileCheck %s
// Ops with the same parameters share one kernel.
// CHECK-LABEL: func.func @shared
// CHECK-COUNT-2: moe.route {{.*}}@moe_kernels::@moe_route_topk_softmax_e128_k4_bf16
// CHECK-COUNT-1: gpu.func @moe_route_topk_softmax_e128_k4_bf16(
func.func @shared(%a: tensor<?x128xbf16>, %b: tensor<7x128xbf16>) -> (tensor<?x4xi32>, tensor<7x4xi32>) {
  %i0, %w0 = moe.route topk_softmax %a top 4 : (tensor<?x128xbf16>) -> (tensor<?x4xi32>, tensor<?x4xf32>)
  %i1, %w1 = moe.route topk_softmax %b top 4 : (tensor<7x128xbf16>) -> (tensor<7x4xi32>, tensor<7x4xf32>)
  return %i0, %i1 : tensor<?x4xi32>, tensor<7x4xi32>
}

// -----

func.func @f16_logits(%a: tensor<?x128xf16>) -> tensor<?x4xi32> {
  // expected-error @+1 {{cannot be lowered to sm_90a yet: only f32 and bf16 logits are implemented}}
  %i, %w = moe.route softmax_topk %a top 4 : (tensor<?x128xf16>) -> (tensor<?x4xi32>, tensor<?x4xf32>)
  return %i : tensor<?x4xi32>
}

// -----

func.func @too_many_experts(%a: tensor<?x1024xf32>) -> tensor<?x4xi32> {
  // expected-error @+1 {{the expert count must be static and at most 512}}
  %i, %w = moe.route softmax_topk %a top 4 : (tensor<?x1024xf32>) -> (tensor<?x4xi32>, tensor<?x4xf32>)
  return %i : tensor<?x4xi32>
}

// -----

func.func @odd_hidden(%rows: tensor<?x100xbf16>, %slots: tensor<?x2xi64>) -> tensor<?x100xbf16> {
  // expected-error @+1 {{the hidden size must be a multiple of 8}}
  %y = moe.unpermute %rows, %slots : (tensor<?x100xbf16>, tensor<?x2xi64>) -> tensor<?x100xbf16>
  return %y : tensor<?x100xbf16>
}

// -----

func.func @padded(%x: tensor<?x256xbf16>, %ids: tensor<?x2xi32>) -> tensor<?x256xbf16> {
  // expected-error @+1 {{pad_to is not implemented yet}}
  %r, %o, %s = moe.permute %x, %ids pad_to 64 : (tensor<?x256xbf16>, tensor<?x2xi32>) -> (tensor<?x256xbf16>, tensor<9xi64>, tensor<?x2xi64>)
  return %r : tensor<?x256xbf16>
}

// -----

func.func @many_experts(%x: tensor<?x256xbf16>, %ids: tensor<?x2xi32>) -> tensor<?x256xbf16> {
  // expected-error @+1 {{at most 512 experts are implemented}}
  %r, %o, %s = moe.permute %x, %ids : (tensor<?x256xbf16>, tensor<?x2xi32>) -> (tensor<?x256xbf16>, tensor<514xi64>, tensor<?x2xi64>)
  return %r : tensor<?x256xbf16>
}
