//===- EpilogueFusion.cpp - per-value epilogue of the grouped GEMM --------===//
//
// What every epilogue applies to an f32 accumulator value before it is
// stored: the expert's bias, the gated activation (SwiGLU, or GPT-OSS's
// clamped form) with its up partner, and the row's routing weight.
//
//===----------------------------------------------------------------------===//

#include "../KernelUtils.h"
#include "GemmKernel.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::sm90;

Value sm90::fuseEpilogueValue(ImplicitLocOpBuilder &b,
                              const GroupedMatmulTile &t, Value v, Value up,
                              Value bias, Value upBias, Value weight) {
  if (bias)
    v = arith::AddFOp::create(b, v, bias);
  if (t.gated()) {
    if (upBias)
      up = arith::AddFOp::create(b, up, upBias);
    v = t.activation == GroupedMatmulTile::Activation::GptOss
            ? gptOssGlu(b, v, up, t.alpha, t.limit)
            : siluTimes(b, v, up);
  }
  if (weight)
    v = arith::MulFOp::create(b, v, weight);
  return v;
}

Value sm90::loadBias(ImplicitLocOpBuilder &b, Value biases, Value expert,
                     Value column, Value columns) {
  IndexMath m{b};
  column = arith::MinSIOp::create(b, column, m.sub(columns, m.c(1)));
  Value v = m.load(biases, ValueRange{expert, column});
  return v.getType().isF32()
             ? v
             : arith::ExtFOp::create(b, b.getF32Type(), v).getResult();
}

std::pair<Value, Value> sm90::loadBiasPair(ImplicitLocOpBuilder &b,
                                           const GemmKernel &k, Value column) {
  Value bias = loadBias(b, k.biases, k.current.expert, column, k.numCols);
  if (!k.t.gated())
    return {bias, Value()};
  // The up rows lie N / 2 = numCols further in the [E, 2 numCols] bias.
  IndexMath m{b};
  Value upColumn = m.add(column, k.numCols);
  Value columns = m.mul(k.numCols, m.c(2));
  return {bias, loadBias(b, k.biases, k.current.expert, upColumn, columns)};
}
