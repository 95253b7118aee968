// A program's donated arguments (moe.donated: the backward's saved values
// that the train forward made) hold the values between its ops once they
// are dead, where those fit for every value of the sizes; their role is
// then `donated`. An op's result goes over an input it reads only where its
// entry allows it (the fused dgrad over the gate-up output).
// RUN: moe-opt %s --split-input-file --moe-select-kernels --convert-moe-to-nvgpu | FileCheck %s

// A Mixtral-like backward with I > H: the activation H [M, 64] fits no dead
// buffer (expert_out, read first, is [M, 32]; the wgrads name its rows, the
// rows' and gate_up's by one size) and takes a slice; dGU goes
// over gate_up, which the fused dgrad reads; dRows [M, 32] into expert_out.
// CHECK-LABEL: func.func @wide(
// CHECK-SAME: {align = 16 : i64, dims = "M,128", dtype = "bf16", name = "gate_up", role = "donated"}
// CHECK-SAME: {align = 16 : i64, dims = "M,32", dtype = "bf16", name = "expert_out", role = "donated"}
// CHECK-SAME: {align = 16 : i64, dims = "M,32", dtype = "bf16", name = "rows", role = "in"}
// CHECK-SAME: params = "mem:gate_up[M,128];mem:@v0[M,64]", part = "p1"
// CHECK-SAME: mem:gate_up[M,128];{{[^"]*}};mem:gate_up[M,128]", part = "p3"
// CHECK-SAME: mem:expert_out[M,32];i32:128;{{[^"]*}}", part = "p4"
// CHECK-SAME: work = [{align = 256 : i64, bytes = "2*M*64", name = "v0"}]
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

// -----

// Not over an input the op reads without its entry's leave (the unfused
// activation's gradient reads gate_up and writes dGU into a slice); not
// into a donated argument the program returns; not into one of other sizes
// (M and M2 are two sizes: [M2, 16] does not fit gate_up [M, 128], dead
// by then, for every value of them).
// CHECK-LABEL: func.func @refused(
// CHECK-SAME: {align = 16 : i64, dims = "M,128", dtype = "bf16", name = "gate_up", role = "in"}
// CHECK-SAME: {align = 16 : i64, dims = "M,64", dtype = "bf16", name = "returned", role = "in"}
// CHECK-SAME: {align = 16 : i64, dims = "M2,32", dtype = "bf16", name = "other", role = "in"}
// CHECK-SAME: params = "mem:gate_up[M,128];mem:returned[M,64];mem:@v0[M,128]", part = "p0"
// CHECK-SAME: params = "mem:other[M2,32];mem:@v1[M2,16]", part = "p1"
func.func @refused(%gu: tensor<?x128xbf16> {moe.donated, moe.name = "gate_up"},
                   %dh: tensor<?x64xbf16> {moe.donated, moe.name = "returned"},
                   %t: tensor<?x32xbf16> {moe.donated, moe.name = "other"})
    -> (tensor<?x64xbf16>, tensor<?x64xbf16>, tensor<?x8xbf16>)
    attributes {moe.program} {
  %dgu = moe.swiglu_grad silu %gu, %dh
      : (tensor<?x128xbf16>, tensor<?x64xbf16>) -> tensor<?x128xbf16>
  %u = moe.swiglu silu %t : (tensor<?x32xbf16>) -> tensor<?x16xbf16>
  %z = moe.swiglu silu %u : (tensor<?x16xbf16>) -> tensor<?x8xbf16>
  %h = moe.swiglu silu %dgu : (tensor<?x128xbf16>) -> tensor<?x64xbf16>
  return %h, %dh, %z : tensor<?x64xbf16>, tensor<?x64xbf16>, tensor<?x8xbf16>
}
