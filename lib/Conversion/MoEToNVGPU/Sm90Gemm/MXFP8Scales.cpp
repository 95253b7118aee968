//===- MXFP8Scales.cpp - MXFP8 scale codes staged in shared memory --------===//

#include "MXFP8Scales.h"
#include "../KernelUtils.h"
#include "MoE/Utils/FP8Codec.h"

#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::sm90;

void MXFP8ScaleStaging::setUp() {
  ImplicitLocOpBuilder &b = k.b;
  const GroupedMatmulTile &t = k.t;
  IndexMath m{b};
  int64_t scaleBlocks = t.scaleBlocksPerStep();
  int64_t scaleRows = t.tileN + t.tileM;
  int64_t offset =
      t.tileSharedBytes() + (t.widened() ? 2 * t.widenedStageBytes() : 0);
  blockMajor = t.specialized();
  SmallVector<int64_t, 3> shape{t.scaleBuffers(), scaleRows, scaleBlocks};
  if (blockMajor)
    std::swap(shape[1], shape[2]);
  buffers = m.view(k.smem, m.c(offset),
                   MemRefType::get(shape, b.getF32Type(),
                                   MemRefLayoutAttrInterface(), k.ty.smem));
  Value aligned = arith::ConstantIntOp::create(b, b.getI1Type(), 1);
  auto divides = [&](Value v) {
    return arith::CmpIOp::create(b, arith::CmpIPredicate::eq,
                                 arith::RemUIOp::create(b, v, m.c(scaleBlocks)),
                                 m.c(0));
  };
  for (Value scales : {k.rowsScales, k.weightsScales}) {
    auto meta = memref::ExtractStridedMetadataOp::create(b, scales);
    Value base = m.add(
        memref::ExtractAlignedPointerAsIndexOp::create(b, scales).getResult(),
        meta.getOffset());
    aligned = arith::AndIOp::create(b, aligned, divides(base));
    for (Value stride : meta.getStrides().drop_back())
      aligned = arith::AndIOp::create(b, aligned, divides(stride));
    codeTensors[scales] =
        CodeTensor{base, SmallVector<Value>(meta.getStrides())};
  }
  wordsAligned = aligned;
}

SmallVector<Value> MXFP8ScaleStaging::load(ImplicitLocOpBuilder &nb,
                                           const WorkItem &w, Value kStep,
                                           Value colBase, Value loader,
                                           int64_t loaders) const {
  const GroupedMatmulTile &t = k.t;
  int64_t scaleBlocks = t.scaleBlocksPerStep();
  int64_t scaleRows = t.tileN + t.tileM;
  IndexMath n{nb};
  Value lastBlock = n.sub(
      memref::DimOp::create(nb, k.rowsScales, n.c(1)).getResult(), n.c(1));
  Value lastToken = n.sub(
      memref::DimOp::create(nb, k.rowsScales, n.c(0)).getResult(), n.c(1));
  Value lastWeight = n.sub(
      memref::DimOp::create(nb, k.weightsScales, n.c(1)).getResult(), n.c(1));
  // K past the end is zero-filled by the TMA: any finite scale will do.
  auto block = [&](ImplicitLocOpBuilder &lb, int64_t j) {
    IndexMath l{lb};
    return arith::MinSIOp::create(
        lb, l.add(l.mul(kStep, l.c(scaleBlocks)), l.c(j)), lastBlock);
  };
  auto byteCodes = [&](ImplicitLocOpBuilder &lb, Value scales,
                       ArrayRef<Value> rowIndices) {
    IndexMath v{lb};
    SmallVector<Value> loaded;
    for (int64_t j = 0; j < scaleBlocks; ++j) {
      SmallVector<Value> at(rowIndices);
      at.push_back(block(lb, j));
      loaded.push_back(v.load(scales, at));
    }
    return loaded;
  };
  // The 128-row form's producer loads a row's codes of the step as one
  // word when the word is aligned (every row stride and base a multiple
  // of scaleBlocks bytes, the step's blocks all inside the row): a sector
  // per row instead of per byte. The other forms keep byte loads: words
  // measured no faster there (faster gate-ups, slower downs).
  bool words = t.specialized() && t.warpgroups() == 2;
  Value lastOfStep =
      n.add(n.mul(kStep, n.c(scaleBlocks)), n.c(scaleBlocks - 1));
  Value wordLoads = words ? arith::AndIOp::create(nb, wordsAligned,
                                                  n.le(lastOfStep, lastBlock))
                                .getResult()
                          : Value();
  auto rowCodes = [&](ImplicitLocOpBuilder &lb, Value scales,
                      SmallVector<Value> rowIndices) {
    if (!words)
      return byteCodes(lb, scales, rowIndices);
    auto ifOp = scf::IfOp::create(
        lb, SmallVector<Type>(scaleBlocks, lb.getI8Type()), wordLoads,
        /*withElseRegion=*/true);
    {
      ImplicitLocOpBuilder tb =
          ImplicitLocOpBuilder::atBlockBegin(lb.getLoc(), ifOp.thenBlock());
      IndexMath v{tb};
      // An integer load through the address: LLVM would sink a vector of
      // bytes and the else branch's bytes into one set of byte loads.
      const CodeTensor &codes = codeTensors.at(scales);
      Value address =
          v.add(codes.base, v.mul(kStep, v.c(scaleBlocks))); // inner stride 1
      for (auto [index, stride] : llvm::zip(rowIndices, codes.strides))
        address = v.add(address, v.mul(index, stride));
      Value pointer = LLVM::IntToPtrOp::create(
          tb, LLVM::LLVMPointerType::get(k.ctx, /*global=*/1),
          arith::IndexCastOp::create(tb, tb.getI64Type(), address).getResult());
      Type wordType = tb.getIntegerType(8 * scaleBlocks);
      Value word = LLVM::LoadOp::create(tb, wordType, pointer, scaleBlocks);
      SmallVector<Value> loaded;
      for (int64_t j = 0; j < scaleBlocks; ++j)
        loaded.push_back(arith::TruncIOp::create(
            tb, tb.getI8Type(),
            arith::ShRUIOp::create(
                tb, word, arith::ConstantIntOp::create(tb, wordType, 8 * j))));
      scf::YieldOp::create(tb, loaded);
    }
    ImplicitLocOpBuilder eb =
        ImplicitLocOpBuilder::atBlockBegin(lb.getLoc(), ifOp.elseBlock());
    scf::YieldOp::create(eb, byteCodes(eb, scales, rowIndices));
    return SmallVector<Value>(ifOp.getResults());
  };
  SmallVector<Value> codes;
  SmallVector<Type> i8s(scaleBlocks, nb.getI8Type());
  for (int64_t r0 = 0; r0 < scaleRows; r0 += loaders) {
    Value i =
        arith::MinSIOp::create(nb, n.add(loader, n.c(r0)), n.c(scaleRows - 1));
    auto ifOp = scf::IfOp::create(nb, i8s, n.lt(i, n.c(t.tileN)),
                                  /*withElseRegion=*/true);
    {
      ImplicitLocOpBuilder tb =
          ImplicitLocOpBuilder::atBlockBegin(nb.getLoc(), ifOp.thenBlock());
      IndexMath v{tb};
      // Gated: the second half of the tile are the up rows, N / 2 further.
      Value row = v.add(colBase, i);
      if (t.gated()) {
        Value half = v.c(t.tileN / 2);
        row = arith::SelectOp::create(tb, v.lt(i, half), row,
                                      v.add(v.sub(row, half), k.numCols));
      }
      row = arith::MinSIOp::create(tb, row, lastWeight);
      scf::YieldOp::create(tb, rowCodes(tb, k.weightsScales, {w.expert, row}));
    }
    {
      ImplicitLocOpBuilder eb =
          ImplicitLocOpBuilder::atBlockBegin(nb.getLoc(), ifOp.elseBlock());
      IndexMath v{eb};
      Value token = arith::MinSIOp::create(
          eb, v.add(w.row0, v.sub(i, v.c(t.tileN))), lastToken);
      scf::YieldOp::create(eb, rowCodes(eb, k.rowsScales, {token}));
    }
    llvm::append_range(codes, ifOp.getResults());
  }
  return codes;
}

void MXFP8ScaleStaging::store(ImplicitLocOpBuilder &nb, ArrayRef<Value> codes,
                              Value buffer, Value loader,
                              int64_t loaders) const {
  const GroupedMatmulTile &t = k.t;
  int64_t scaleBlocks = t.scaleBlocksPerStep();
  int64_t scaleRows = t.tileN + t.tileM;
  IndexMath n{nb};
  for (int64_t r0 = 0, round = 0; r0 < scaleRows; r0 += loaders, ++round) {
    Value i = n.add(loader, n.c(r0));
    ifThen(nb, n.lt(i, n.c(scaleRows)), [&](ImplicitLocOpBuilder &sb) {
      IndexMath v{sb};
      SmallVector<Value> decoded;
      for (int64_t j = 0; j < scaleBlocks; ++j)
        decoded.push_back(decodeE8M0(sb, codes[round * scaleBlocks + j]));
      // Block-major: consecutive loaders store consecutive words.
      if (blockMajor) {
        for (int64_t j = 0; j < scaleBlocks; ++j)
          memref::StoreOp::create(sb, decoded[j], buffers,
                                  ValueRange{buffer, v.c(j), i});
        return;
      }
      // A row's blocks side by side: one 16-byte store, one load.
      vector::StoreOp::create(
          sb,
          vector::FromElementsOp::create(
              sb, VectorType::get({scaleBlocks}, sb.getF32Type()), decoded),
          buffers, ValueRange{buffer, i, v.c(0)},
          /*nontemporal=*/false, llvm::Align(16));
    });
  }
}
