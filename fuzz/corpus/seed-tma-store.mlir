// moe-fuzz-options: tma-store=1
// TMA-storing forms: a grouped matmul, one whose 1004 columns keep their
// stores, a dgrad and a hand-written form.
func.func @gate_up(%rows: tensor<?x512xbf16>, %w: tensor<8x1024x512xbf16>, %off: tensor<9xi64>) -> tensor<?x1024xbf16> {
  %y = moe.grouped_matmul %rows, %w, %off
      : (tensor<?x512xbf16>, tensor<8x1024x512xbf16>, tensor<9xi64>) -> tensor<?x1024xbf16>
  return %y : tensor<?x1024xbf16>
}
func.func @odd(%rows: tensor<?x512xbf16>, %w: tensor<8x1004x512xbf16>, %off: tensor<9xi64>) -> tensor<?x1004xbf16> {
  %y = moe.grouped_matmul %rows, %w, %off
      : (tensor<?x512xbf16>, tensor<8x1004x512xbf16>, tensor<9xi64>) -> tensor<?x1004xbf16>
  return %y : tensor<?x1004xbf16>
}
func.func @dgrad(%g: tensor<?x256xbf16>, %w: tensor<8x256x128xbf16>, %off: tensor<9xi32>) -> tensor<?x128xbf16> {
  %dx = moe.grouped_dgrad %g, %w, %off
      : (tensor<?x256xbf16>, tensor<8x256x128xbf16>, tensor<9xi32>) -> tensor<?x128xbf16>
  return %dx : tensor<?x128xbf16>
}
func.func @form(%rows: tensor<?x256xbf16>, %w: tensor<8x512x256xbf16>, %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  %y = moe.grouped_matmul %rows, %w, %off {moe.kernels = #moe.gemm_kernels<chip = "sm_90a", forms = [
      #moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 128, tile_n = 256, tile_k = 64, stages = 4, tma_store = true>]>}
      : (tensor<?x256xbf16>, tensor<8x512x256xbf16>, tensor<9xi32>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}
