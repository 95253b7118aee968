//===- Fragment.cpp - where a thread's wgmma accumulator values lie -------===//

#include "Fragment.h"
#include "../KernelUtils.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::sm90;

Fragment sm90::fragmentOf(ImplicitLocOpBuilder &b, Value tid) {
  IndexMath m{b};
  Value lane = arith::RemUIOp::create(b, tid, m.c(32));
  Value quad = arith::DivUIOp::create(b, lane, m.c(4));
  Value warpInGroup = arith::RemUIOp::create(
      b, arith::DivUIOp::create(b, tid, m.c(32)), m.c(4));
  return {quad, m.add(quad, m.mul(warpInGroup, m.c(16))),
          m.mul(arith::RemUIOp::create(b, lane, m.c(4)), m.c(2))};
}

Type FragmentRegs::structType(MLIRContext *ctx, int64_t columns) {
  return LLVM::LLVMStructType::getLiteral(
      ctx, {LLVM::LLVMStructType::getLiteral(
               ctx, SmallVector<Type>(columns / 2, Float32Type::get(ctx)))});
}

FragmentRegs::FragmentRegs(ImplicitLocOpBuilder &b, Value accumulator,
                           int64_t columns)
    : regs(UnrealizedConversionCastOp::create(
               b, structType(b.getContext(), columns), accumulator)
               .getResult(0)) {}

Value FragmentRegs::element(ImplicitLocOpBuilder &b, int64_t e) const {
  return LLVM::ExtractValueOp::create(b, regs, ArrayRef<int64_t>{0, e});
}

Value sm90::addScaled(ImplicitLocOpBuilder &b, Value acc, Value part,
                      int64_t count, Type products,
                      nvgpu::WarpgroupAccumulatorType accumulator,
                      function_ref<Value(int64_t)> scaleOf) {
  Type regsType = FragmentRegs::structType(b.getContext(), 2 * count);
  auto regs = [&](Value v) {
    return UnrealizedConversionCastOp::create(b, regsType, v).getResult(0);
  };
  bool bare = part.getType() == products;
  Value sum = regs(acc), parts = bare ? part : regs(part);
  for (int64_t e = 0; e < count; ++e) {
    int64_t at[] = {0, e};
    Value product = bare ? LLVM::ExtractValueOp::create(b, parts, e)
                         : LLVM::ExtractValueOp::create(b, parts, at);
    Value v = LLVM::FMAOp::create(b, product, scaleOf(e),
                                  LLVM::ExtractValueOp::create(b, sum, at));
    sum = LLVM::InsertValueOp::create(b, sum, v, at);
  }
  return UnrealizedConversionCastOp::create(b, accumulator, sum).getResult(0);
}
