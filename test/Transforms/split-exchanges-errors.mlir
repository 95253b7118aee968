// What --moe-split-exchanges refuses, with the reason.
// RUN: moe-opt %s --moe-split-exchanges -split-input-file -verify-diagnostics

func.func @f(%rows: tensor<?x4xbf16>, %offsets: tensor<9xi64>, %c: i1) {
  scf.if %c {
    // expected-error @+1 {{--moe-split-exchanges: an exchange must be at the top level of a function of the module}}
    %r, %i, %n = moe.dispatch %rows, %offsets ranks 2 : (tensor<?x4xbf16>, tensor<9xi64>) -> (tensor<?x4xbf16>, tensor<?x1xi32>, tensor<2xi64>)
  }
  return
}

// -----

func.func @f_stage1() { return }
// expected-error @+1 {{--moe-split-exchanges: a symbol named @f_stage1 already exists}}
func.func @f(%rows: tensor<?x4xbf16>, %offsets: tensor<9xi64>) -> tensor<?x4xbf16> {
  %r, %i, %n = moe.dispatch %rows, %offsets ranks 2 : (tensor<?x4xbf16>, tensor<9xi64>) -> (tensor<?x4xbf16>, tensor<?x1xi32>, tensor<2xi64>)
  return %r : tensor<?x4xbf16>
}

// -----

// expected-error @+1 {{--moe-split-exchanges: @f has more than one block; its exchanges must be in straight-line code}}
func.func @f(%rows: tensor<?x4xbf16>, %offsets: tensor<9xi64>) -> tensor<?x4xbf16> {
  cf.br ^next
^next:
  %r, %i, %n = moe.dispatch %rows, %offsets ranks 2 : (tensor<?x4xbf16>, tensor<9xi64>) -> (tensor<?x4xbf16>, tensor<?x1xi32>, tensor<2xi64>)
  return %r : tensor<?x4xbf16>
}

// -----

// A result of @F named as an exchange's result would be.
// expected-error @+1 {{--moe-split-exchanges: @f names a value 'x0_0', the name of an exchange's result}}
func.func @f(%rows: tensor<?x4xbf16>, %offsets: tensor<9xi64>) -> (tensor<?x1xi32> {moe.name = "x0_0"}) {
  %r, %i, %n = moe.dispatch %rows, %offsets ranks 2 : (tensor<?x4xbf16>, tensor<9xi64>) -> (tensor<?x4xbf16>, tensor<?x1xi32>, tensor<2xi64>)
  return %i : tensor<?x1xi32>
}
