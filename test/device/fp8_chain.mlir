// A bf16 grouped GEMM that scripts/build-gpu-artifacts.sh compiles with
// --moe-quantize="scope=weights+activations" --moe-gpu-pipeline into
// fp8chain.moebundle: `gate_up_prepack` quantizes the weights once
// (quantize.v1, [128, 128] blocks), `gate_up` the rows per call ([1, 128]
// groups), `gate_up_0` is the block-FP8 GEMM reading both
// (grouped_matmul_fp8.v1). test/device/fp8_grouped_matmul.py runs the chain.
func.func @gate_up(%rows: tensor<?x1024xbf16>, %w: tensor<8x512x1024xbf16>, %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  %y = moe.grouped_matmul %rows, %w, %off
      : (tensor<?x1024xbf16>, tensor<8x512x1024xbf16>, tensor<9xi32>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}
