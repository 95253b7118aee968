// chip=sm_100a: the MXFP8 grouped GEMM's one tcgen05 form; anything else is
// refused with the reason.
// RUN: moe-opt %s --split-input-file --moe-select-kernels="chip=sm_100a" --mlir-print-op-on-diagnostic=false -verify-diagnostics | FileCheck %s

// CHECK-LABEL: func @mxfp8
// CHECK: moe.kernels = #moe.gemm_kernels<chip = "sm_100a", forms = [#moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 128, tile_n = 128, tile_k = 128, stages = 4>]>
func.func @mxfp8(%xq: tensor<?x2048xf8E4M3FN>, %xs: tensor<?x64xf8E8M0FNU>, %wq: tensor<128x1536x2048xf8E4M3FN>, %ws: tensor<128x1536x64xf8E8M0FNU>, %off: tensor<129xi32>) -> tensor<?x1536xbf16> {
  %x = moe.dequantize %xq, %xs from <f8E4M3FN, [1, 32], f8E8M0FNU> : tensor<?x2048xf8E4M3FN>, tensor<?x64xf8E8M0FNU> -> tensor<?x2048xbf16>
  %w = moe.dequantize %wq, %ws from <f8E4M3FN, [1, 1, 32], f8E8M0FNU> : tensor<128x1536x2048xf8E4M3FN>, tensor<128x1536x64xf8E8M0FNU> -> tensor<128x1536x2048xbf16>
  %y = moe.grouped_matmul %x, %w, %off : (tensor<?x2048xbf16>, tensor<128x1536x2048xbf16>, tensor<129xi32>) -> tensor<?x1536xbf16>
  return %y : tensor<?x1536xbf16>
}

// -----

func.func @bf16(%rows: tensor<?x256xbf16>, %w: tensor<8x512x256xbf16>, %off: tensor<9xi64>) -> tensor<?x512xbf16> {
  // expected-error @+1 {{cannot be lowered to sm_100a yet: only MXFP8 operands are implemented}}
  %y = moe.grouped_matmul %rows, %w, %off
      : (tensor<?x256xbf16>, tensor<8x512x256xbf16>, tensor<9xi64>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}
