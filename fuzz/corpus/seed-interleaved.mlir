// Gate and up interleaved: the activation and its gradient.
func.func @act(%gu: tensor<?x512xbf16>) -> tensor<?x256xbf16> {
  %h = moe.swiglu gptoss %gu interleaved alpha 1.702 limit 7.0 : (tensor<?x512xbf16>) -> tensor<?x256xbf16>
  return %h : tensor<?x256xbf16>
}
func.func @grad(%gu: tensor<?x512xbf16>, %dh: tensor<?x256xbf16>) -> tensor<?x512xbf16> {
  %d = moe.swiglu_grad silu %gu, %dh interleaved : (tensor<?x512xbf16>, tensor<?x256xbf16>) -> tensor<?x512xbf16>
  return %d : tensor<?x512xbf16>
}
