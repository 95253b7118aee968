// A hand-written program with donated arguments (in place and reused).
func.func @wide(%gu: tensor<?x128xbf16> {moe.donated, moe.name = "gate_up"},
                %o: tensor<?x32xbf16> {moe.donated, moe.name = "expert_out"},
                %rows: tensor<?x32xbf16> {moe.name = "rows"},
                %do: tensor<?x32xbf16> {moe.name = "grad_rows"},
                %off: tensor<9xi64> {moe.name = "offsets"},
                %w13: tensor<8x128x32xbf16> {moe.name = "gate_up_weights"},
                %w2: tensor<8x32x64xbf16> {moe.name = "down_weights"})
    -> (tensor<8x32x32xbf16>, tensor<8x32x64xbf16>, tensor<?x16xbf16>, tensor<8x128x32xbf16>)
    attributes {moe.program} {
  %r = moe.grouped_wgrad %o, %rows, %off
      : (tensor<?x32xbf16>, tensor<?x32xbf16>, tensor<9xi64>) -> tensor<8x32x32xbf16>
  %h = moe.swiglu silu %gu : (tensor<?x128xbf16>) -> tensor<?x64xbf16>
  %dw2 = moe.grouped_wgrad %do, %h, %off
      : (tensor<?x32xbf16>, tensor<?x64xbf16>, tensor<9xi64>) -> tensor<8x32x64xbf16>
  %dgu = moe.grouped_dgrad %do, %w2, %off act_grad silu %gu
      : (tensor<?x32xbf16>, tensor<8x32x64xbf16>, tensor<9xi64>, tensor<?x128xbf16>) -> tensor<?x128xbf16>
  %dx = moe.grouped_dgrad %dgu, %w13, %off
      : (tensor<?x128xbf16>, tensor<8x128x32xbf16>, tensor<9xi64>) -> tensor<?x32xbf16>
  %dw13 = moe.grouped_wgrad %dgu, %rows, %off
      : (tensor<?x128xbf16>, tensor<?x32xbf16>, tensor<9xi64>) -> tensor<8x128x32xbf16>
  %s = moe.swiglu silu %dx : (tensor<?x32xbf16>) -> tensor<?x16xbf16>
  return %r, %dw2, %s, %dw13 : tensor<8x32x32xbf16>, tensor<8x32x64xbf16>, tensor<?x16xbf16>, tensor<8x128x32xbf16>
}
