//===- Raise.cpp - linalg MoE layers into moe ops -------------------------===//
//
// Recognises a sparse MoE layer in upstream linalg/tensor/arith by what it
// computes rather than by op order: a value is read as the expression of one
// of its elements, over iteration variables, with its producers (linalg ops,
// reshapes, static slices) inlined. The matcher compares those expressions
// with the layer's semantics and, only when every part agrees, rewrites the
// layer to moe.route -> moe.permute -> moe.expert_mlp -> moe.unpermute.
//
// One file (about 1,600 lines) on purpose: the expression form, its builder
// and the layer matcher are one recognizer whose types are not an interface
// to anything else; its sections below (expressions, matching helpers, the
// layer matcher, the rewrite) would otherwise have to export them.
//
//===----------------------------------------------------------------------===//

#include "MoE/Transforms/Passes.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/AffineExpr.h"
#include "mlir/IR/AffineMap.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <deque>
#include <map>

namespace mlir::moe {
#define GEN_PASS_DEF_MOERAISE
#include "MoE/Transforms/Passes.h.inc"
} // namespace mlir::moe

using namespace mlir;
using namespace mlir::moe;

namespace {

//===----------------------------------------------------------------------===//
// Element expressions
//===----------------------------------------------------------------------===//

/// What one element of a tensor computes, in terms of iteration variables
/// (affine dims, each with an extent).
struct Expr {
  enum class Kind {
    Element,  // value[indices]: a tensor that is not looked into
    Scalar,   // a scalar defined outside every inlined body
    Constant, // a float or integer constant
    Index,    // an iteration index, indices[0]
    Compute,  // a scalar arith/math op applied to operands
    Reduce,   // op-reduction of operands[1] over vars, starting at operands[0]
    Extract,  // tensor.extract value[operands...]
  };
  Kind kind;
  Value value;
  SmallVector<AffineExpr> indices;
  Attribute constant;
  Operation *op = nullptr;
  SmallVector<Expr *> operands;
  SmallVector<unsigned> vars;
  // The first tensor element this node was built for: what it equals (up
  // to the roundings between f32 and bf16 that are looked through).
  Value origin;
  SmallVector<AffineExpr> originIndices;
  // The last tensor element it was built for: through rounding casts, the
  // value that the op requesting it reads.
  Value nearest;
  SmallVector<AffineExpr> nearestIndices;
};

/// f32 or bf16: the float types between which conversions only round.
bool isRoundingType(Type type) { return isa<Float32Type, BFloat16Type>(type); }

/// An `arith.truncf` or `arith.extf` between f32 and bf16. Its result is its
/// operand up to a rounding to bf16 (extf is exact): in exact arithmetic, as
/// the matcher compares, the same value. Casts to or from any other type
/// (f16, f64, fp8) are not looked through.
bool isRoundingCast(Operation *op) {
  return isa<arith::TruncFOp, arith::ExtFOp>(op) &&
         isRoundingType(op->getOperand(0).getType()) &&
         isRoundingType(op->getResult(0).getType());
}

/// A conversion that can change values beyond rounding between f32 and
/// bf16: float casts involving other types, float to integer.
bool isOtherConversion(Operation *op) {
  if (isa<arith::FPToSIOp, arith::FPToUIOp>(op))
    return true;
  return isa<arith::TruncFOp, arith::ExtFOp>(op) && !isRoundingCast(op);
}

/// Whether `v` is computed by linalg ops, possibly through reshapes and
/// slices: those are looked through, anything else is a leaf.
bool isStructured(Value v) {
  Operation *def = v.getDefiningOp();
  while (def) {
    if (isa<linalg::LinalgOp>(def))
      return true;
    if (auto expand = dyn_cast<tensor::ExpandShapeOp>(def))
      def = expand.getSrc().getDefiningOp();
    else if (auto collapse = dyn_cast<tensor::CollapseShapeOp>(def))
      def = collapse.getSrc().getDefiningOp();
    else if (auto slice = dyn_cast<tensor::ExtractSliceOp>(def))
      def = slice.getSource().getDefiningOp();
    else
      return false;
  }
  return false;
}

/// Builds element expressions. Nodes live as long as the builder; equal
/// (value, indices) requests share one node.
class ExprBuilder {
public:
  explicit ExprBuilder(MLIRContext *context) : context(context) {}

  /// A fresh iteration variable ranging over [0, extent).
  AffineExpr newVar(int64_t extent) {
    extents.push_back(extent);
    return getAffineDimExpr(extents.size() - 1, context);
  }
  int64_t extentOf(AffineExpr var) const {
    auto dim = dyn_cast<AffineDimExpr>(var);
    return dim ? extents[dim.getPosition()] : ShapedType::kDynamic;
  }

  /// The expression of `tensor[indices]`.
  Expr *element(Value tensor, ArrayRef<AffineExpr> indices);

  /// Simplifies `expr` using the variables' extents: `(a*c + b) floordiv c`
  /// is `a` and `mod c` is `b` when 0 <= b < c.
  AffineExpr simplify(AffineExpr expr);

  /// Every op an expression was built from (the computation a rewrite
  /// replaces).
  const llvm::SetVector<Operation *> &visitedOps() const { return visited; }

  /// The first conversion that changes values beyond rounding (see
  /// isOtherConversion) met while building, or null.
  Operation *otherConversion() const { return conversion; }

private:
  struct Body {
    linalg::LinalgOp op;
    SmallVector<AffineExpr> loops;
    bool inReduction = false;
    DenseMap<Value, Expr *> memo;
  };

  Expr *make(Expr::Kind kind) {
    nodes.emplace_back();
    nodes.back().kind = kind;
    return &nodes.back();
  }
  Expr *leaf(Value tensor, ArrayRef<AffineExpr> indices) {
    Expr *e = make(Expr::Kind::Element);
    e->value = tensor;
    e->indices.assign(indices.begin(), indices.end());
    return e;
  }
  Expr *constant(Attribute value) {
    Expr *e = make(Expr::Kind::Constant);
    e->constant = value;
    return e;
  }
  Expr *index(AffineExpr expr) {
    if (auto c = dyn_cast<AffineConstantExpr>(expr))
      return constant(IntegerAttr::get(IndexType::get(context), c.getValue()));
    Expr *e = make(Expr::Kind::Index);
    e->indices.push_back(expr);
    return e;
  }
  Expr *outsideScalar(Value v);
  Expr *inlineLinalg(linalg::LinalgOp op, unsigned resultNo,
                     ArrayRef<AffineExpr> indices);
  Expr *scalar(Body &body, Value v);
  std::optional<SmallVector<AffineExpr>>
  throughView(Operation *view, ArrayRef<AffineExpr> indices);

  MLIRContext *context;
  std::deque<Expr> nodes;
  SmallVector<int64_t> extents;
  std::map<SmallVector<const void *>, Expr *> memo;
  llvm::SetVector<Operation *> visited;
  Operation *conversion = nullptr;
};

/// `expr` as sum(coefficient * dim) + constant, when it is linear.
bool linearize(AffineExpr expr, int64_t scale,
               llvm::SmallMapVector<unsigned, int64_t, 4> &coefficients,
               int64_t &constant) {
  if (auto c = dyn_cast<AffineConstantExpr>(expr)) {
    constant += scale * c.getValue();
    return true;
  }
  if (auto dim = dyn_cast<AffineDimExpr>(expr)) {
    coefficients[dim.getPosition()] += scale;
    return true;
  }
  auto binary = dyn_cast<AffineBinaryOpExpr>(expr);
  if (!binary)
    return false;
  if (binary.getKind() == AffineExprKind::Add)
    return linearize(binary.getLHS(), scale, coefficients, constant) &&
           linearize(binary.getRHS(), scale, coefficients, constant);
  if (binary.getKind() == AffineExprKind::Mul)
    if (auto c = dyn_cast<AffineConstantExpr>(binary.getRHS()))
      return linearize(binary.getLHS(), scale * c.getValue(), coefficients,
                       constant);
  return false;
}

AffineExpr ExprBuilder::simplify(AffineExpr expr) {
  if (!expr)
    return expr;
  if (auto dim = dyn_cast<AffineDimExpr>(expr))
    return extents[dim.getPosition()] == 1 ? getAffineConstantExpr(0, context)
                                           : expr;
  auto binary = dyn_cast<AffineBinaryOpExpr>(expr);
  if (!binary)
    return expr;
  AffineExpr lhs = simplify(binary.getLHS()), rhs = simplify(binary.getRHS());
  AffineExprKind kind = binary.getKind();
  auto divisor = dyn_cast<AffineConstantExpr>(rhs);
  if ((kind == AffineExprKind::FloorDiv || kind == AffineExprKind::Mod) &&
      divisor && divisor.getValue() > 0) {
    int64_t c = divisor.getValue();
    llvm::SmallMapVector<unsigned, int64_t, 4> coefficients;
    int64_t constant = 0;
    if (linearize(lhs, 1, coefficients, constant)) {
      AffineExpr quotient =
          getAffineConstantExpr(llvm::divideFloorSigned(constant, c), context);
      int64_t remainderConstant =
          constant - c * llvm::divideFloorSigned(constant, c);
      AffineExpr remainder = getAffineConstantExpr(remainderConstant, context);
      int64_t low = remainderConstant, high = remainderConstant;
      bool bounded = true;
      for (auto [position, coefficient] : coefficients) {
        AffineExpr dim = getAffineDimExpr(position, context);
        if (coefficient % c == 0) {
          quotient = quotient + dim * (coefficient / c);
          continue;
        }
        remainder = remainder + dim * coefficient;
        int64_t extent = extents[position];
        if (ShapedType::isDynamic(extent)) {
          bounded = false;
          continue;
        }
        int64_t span = coefficient * (extent - 1);
        low += std::min<int64_t>(0, span);
        high += std::max<int64_t>(0, span);
      }
      if (bounded && low >= 0 && high < c)
        return kind == AffineExprKind::FloorDiv ? quotient : remainder;
    }
  }
  return getAffineBinaryOpExpr(kind, lhs, rhs);
}

std::optional<SmallVector<AffineExpr>>
ExprBuilder::throughView(Operation *view, ArrayRef<AffineExpr> indices) {
  SmallVector<AffineExpr> source;
  if (auto expand = dyn_cast<tensor::ExpandShapeOp>(view)) {
    RankedTensorType resultType = expand.getResultType();
    bool unitOnly = true;
    for (ReassociationIndices group : expand.getReassociationIndices()) {
      AffineExpr linear = getAffineConstantExpr(0, context);
      int64_t nonUnit = 0;
      for (auto [position, dim] : llvm::enumerate(group)) {
        int64_t size = resultType.getDimSize(dim);
        nonUnit += size != 1;
        if (position > 0) {
          if (ShapedType::isDynamic(size))
            return std::nullopt;
          linear = linear * size;
        }
        linear = linear + indices[dim];
      }
      unitOnly &= nonUnit <= 1;
      source.push_back(linear);
    }
    // Only unit dims added to a leaf: the leaf keeps its lower rank.
    if (!unitOnly && !isStructured(expand.getSrc()))
      return std::nullopt;
    return source;
  }
  if (auto collapse = dyn_cast<tensor::CollapseShapeOp>(view)) {
    if (!isStructured(collapse.getSrc()))
      return std::nullopt;
    RankedTensorType sourceType = collapse.getSrcType();
    source.assign(sourceType.getRank(), AffineExpr());
    for (auto [resultDim, group] :
         llvm::enumerate(collapse.getReassociationIndices())) {
      SmallVector<int64_t> nonUnit;
      for (int64_t dim : group) {
        if (sourceType.getDimSize(dim) == 1)
          source[dim] = getAffineConstantExpr(0, context);
        else
          nonUnit.push_back(dim);
      }
      AffineExpr rest = indices[resultDim];
      for (auto [position, dim] : llvm::enumerate(llvm::reverse(nonUnit))) {
        if (position + 1 == nonUnit.size()) {
          source[dim] = rest;
          break;
        }
        int64_t size = sourceType.getDimSize(dim);
        if (ShapedType::isDynamic(size))
          return std::nullopt;
        source[dim] = rest % size;
        rest = rest.floorDiv(size);
      }
    }
    return source;
  }
  auto slice = cast<tensor::ExtractSliceOp>(view);
  if (!isStructured(slice.getSource()) || !slice.hasUnitStride() ||
      ShapedType::isDynamicShape(slice.getStaticOffsets()))
    return std::nullopt;
  llvm::SmallBitVector dropped = slice.getDroppedDims();
  unsigned next = 0;
  for (auto [dim, offset] : llvm::enumerate(slice.getStaticOffsets())) {
    AffineExpr at = getAffineConstantExpr(offset, context);
    source.push_back(dropped.test(dim) ? at : indices[next++] + at);
  }
  return source;
}

Expr *ExprBuilder::element(Value tensor, ArrayRef<AffineExpr> rawIndices) {
  SmallVector<AffineExpr> indices;
  for (AffineExpr index : rawIndices)
    indices.push_back(simplify(index));
  SmallVector<const void *> key{tensor.getAsOpaquePointer()};
  for (AffineExpr index : indices)
    key.push_back(index.getAsOpaquePointer());
  if (auto it = memo.find(key); it != memo.end())
    return it->second;

  // Bounds the work on huge or adversarial inputs: past it, values are leaves.
  constexpr size_t kMaxNodes = 1 << 18;
  Expr *result = nullptr;
  Operation *def = tensor.getDefiningOp();
  if (def && nodes.size() < kMaxNodes) {
    visited.insert(def);
    DenseElementsAttr dense;
    if (matchPattern(tensor, m_Constant(&dense)) && dense.isSplat())
      result = constant(dense.getSplatValue<Attribute>());
    else if (auto linalgOp = dyn_cast<linalg::LinalgOp>(def))
      result = inlineLinalg(linalgOp, cast<OpResult>(tensor).getResultNumber(),
                            indices);
    else if (isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp,
                 tensor::ExtractSliceOp>(def))
      if (auto source = throughView(def, indices))
        result = element(def->getOperand(0), *source);
  }
  if (!result)
    result = leaf(tensor, indices);
  if (!result->origin) {
    result->origin = tensor;
    result->originIndices = indices;
  }
  result->nearest = tensor;
  result->nearestIndices = indices;
  memo[key] = result;
  return result;
}

Expr *ExprBuilder::outsideScalar(Value v) {
  Attribute value;
  if (matchPattern(v, m_Constant(&value)) && isa<FloatAttr, IntegerAttr>(value))
    return constant(value);
  Expr *e = make(Expr::Kind::Scalar);
  e->value = v;
  return e;
}

Expr *ExprBuilder::inlineLinalg(linalg::LinalgOp op, unsigned resultNo,
                                ArrayRef<AffineExpr> indices) {
  if (!op.hasPureTensorSemantics() ||
      op.getNumDpsInits() != op->getNumResults() || !op.getBlock() ||
      op.getBlock()->getNumArguments() != op->getNumOperands())
    return nullptr;
  OpOperand *init = op.getDpsInitOperand(resultNo);
  AffineMap outMap = op.getMatchingIndexingMap(init);
  if (outMap.getNumSymbols() || outMap.getNumResults() != indices.size())
    return nullptr;
  // Loops that index the result take the requested indices.
  SmallVector<AffineExpr> loops(op.getNumLoops());
  for (auto [position, result] : llvm::enumerate(outMap.getResults())) {
    if (auto dim = dyn_cast<AffineDimExpr>(result)) {
      AffineExpr &loop = loops[dim.getPosition()];
      if (loop && loop != indices[position])
        return nullptr;
      loop = indices[position];
    } else if (result != indices[position]) {
      return nullptr;
    }
  }
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  SmallVector<unsigned> reductionVars;
  for (unsigned loop = 0; loop < loops.size(); ++loop) {
    bool reduction = iterators[loop] == utils::IteratorType::reduction;
    if (reduction == static_cast<bool>(loops[loop]))
      return nullptr;
    if (reduction) {
      loops[loop] = newVar(ranges[loop]);
      reductionVars.push_back(cast<AffineDimExpr>(loops[loop]).getPosition());
    }
  }

  Body body;
  body.op = op;
  body.loops = std::move(loops);
  Block *block = op.getBlock();
  Value yielded = block->getTerminator()->getOperand(resultNo);
  if (reductionVars.empty())
    return scalar(body, yielded);

  // A reduction yields combiner(x, accumulator); x must not read any
  // accumulator.
  Operation *combiner = yielded.getDefiningOp();
  if (!combiner || combiner->getBlock() != block ||
      !isa<arith::AddFOp, arith::MaximumFOp, arith::MaxNumFOp, arith::AddIOp>(
          combiner))
    return nullptr;
  Value accumulator = block->getArgument(op.getNumDpsInputs() + resultNo);
  Value x;
  if (combiner->getOperand(1) == accumulator)
    x = combiner->getOperand(0);
  else if (combiner->getOperand(0) == accumulator)
    x = combiner->getOperand(1);
  else
    return nullptr;
  body.inReduction = true;
  Expr *reduced = scalar(body, x);
  if (!reduced)
    return nullptr;
  Expr *e = make(Expr::Kind::Reduce);
  e->op = combiner;
  e->vars = reductionVars;
  e->operands = {element(init->get(), indices), reduced};
  return e;
}

Expr *ExprBuilder::scalar(Body &body, Value v) {
  if (auto it = body.memo.find(v); it != body.memo.end())
    return it->second;
  Block *block = body.op.getBlock();
  Expr *result = nullptr;
  if (auto arg = dyn_cast<BlockArgument>(v); arg && arg.getOwner() == block) {
    OpOperand &operand = body.op->getOpOperand(arg.getArgNumber());
    bool isInit = arg.getArgNumber() >= body.op.getNumDpsInputs();
    if (isInit && body.inReduction)
      return nullptr;
    if (!isa<RankedTensorType>(operand.get().getType())) {
      result = outsideScalar(operand.get());
    } else {
      AffineMap map = body.op.getMatchingIndexingMap(&operand);
      SmallVector<AffineExpr> indices;
      for (AffineExpr e : map.getResults())
        indices.push_back(e.replaceDims(body.loops));
      result = element(operand.get(), indices);
    }
  } else if (Operation *def = v.getDefiningOp();
             !def || !body.op->isAncestor(def)) {
    result = outsideScalar(v);
  } else if (def->getBlock() != block) {
    return nullptr;
  } else if (auto index = dyn_cast<linalg::IndexOp>(def)) {
    if (index.getDim() >= body.loops.size())
      return nullptr;
    result = this->index(body.loops[index.getDim()]);
  } else if (auto extract = dyn_cast<tensor::ExtractOp>(def)) {
    result = make(Expr::Kind::Extract);
    result->value = extract.getTensor();
    for (Value i : extract.getIndices()) {
      Expr *e = scalar(body, i);
      if (!e)
        return nullptr;
      result->operands.push_back(e);
    }
  } else if (def->getNumRegions() == 0 && def->getNumResults() == 1 &&
             isa_and_nonnull<arith::ArithDialect, math::MathDialect>(
                 def->getDialect())) {
    Attribute value;
    if (matchPattern(v, m_Constant(&value)))
      return body.memo[v] = outsideScalar(v);
    // A rounding between f32 and bf16 is looked through: its operand's
    // expression is its own.
    if (isRoundingCast(def)) {
      Expr *operand = scalar(body, def->getOperand(0));
      if (!operand)
        return nullptr;
      return body.memo[v] = operand;
    }
    SmallVector<Expr *> operands;
    for (Value operand : def->getOperands()) {
      Expr *e = scalar(body, operand);
      if (!e)
        return nullptr;
      operands.push_back(e);
    }
    // The innermost such conversion (its operands are built first).
    if (!conversion && isOtherConversion(def))
      conversion = def;
    // An index cast of a loop position is still that position.
    if (isa<arith::IndexCastOp>(def) &&
        operands[0]->kind == Expr::Kind::Constant)
      if (auto c = dyn_cast<IntegerAttr>(operands[0]->constant))
        return body.memo[v] =
                   constant(IntegerAttr::get(v.getType(), c.getInt()));
    result = make(Expr::Kind::Compute);
    result->op = def;
    result->operands = std::move(operands);
  } else {
    return nullptr;
  }
  return body.memo[v] = result;
}

/// `why`, naming the conversion `builder` met that is more than a rounding
/// between f32 and bf16 (the likely reason a layer did not match).
std::string explainConversion(const ExprBuilder &builder, StringRef why) {
  Operation *op = builder.otherConversion();
  if (!op)
    return why.str();
  std::string text;
  llvm::raw_string_ostream os(text);
  os << why << " (the layer converts " << op->getOperand(0).getType() << " to "
     << op->getResult(0).getType() << " with " << op->getName()
     << ": only roundings between f32 and bf16 are looked through)";
  return text;
}

//===----------------------------------------------------------------------===//
// Expression predicates
//===----------------------------------------------------------------------===//

template <typename... OpTys> bool isCompute(Expr *e) {
  return e && e->kind == Expr::Kind::Compute && isa<OpTys...>(e->op);
}

bool isConstant(Expr *e, double value) {
  if (!e || e->kind != Expr::Kind::Constant)
    return false;
  if (auto f = dyn_cast<FloatAttr>(e->constant))
    return f.getValueAsDouble() == value;
  if (auto i = dyn_cast<IntegerAttr>(e->constant))
    return static_cast<double>(i.getValue().getSExtValue()) == value;
  return false;
}

std::optional<int64_t> getInteger(Expr *e) {
  if (e && e->kind == Expr::Kind::Constant)
    if (auto i = dyn_cast<IntegerAttr>(e->constant))
      return i.getValue().getSExtValue();
  return std::nullopt;
}

/// -inf or the lowest finite float: the start of a max-reduction.
bool isLowest(Expr *e) {
  if (!e || e->kind != Expr::Kind::Constant)
    return false;
  auto f = dyn_cast<FloatAttr>(e->constant);
  if (!f || !f.getValue().isNegative())
    return false;
  return f.getValue().isInfinity() ||
         f.getValue() == APFloat::getLargest(f.getValue().getSemantics(),
                                             /*Negative=*/true);
}

/// The tensor `e` is a leaf element of at `indices`, or null.
Value leafAt(Expr *e, ArrayRef<AffineExpr> indices) {
  if (!e || e->kind != Expr::Kind::Element ||
      ArrayRef<AffineExpr>(e->indices) != indices)
    return Value();
  return e->value;
}

/// The tensor whose element at `indices` `e` is, or null.
Value readsAt(Expr *e, ArrayRef<AffineExpr> indices) {
  if (!e || ArrayRef<AffineExpr>(e->originIndices) != indices)
    return Value();
  return e->origin;
}

/// `type` with bf16 read as f32 (the roundings looked through).
Type unrounded(Type type) {
  return isa<BFloat16Type>(type) ? Float32Type::get(type.getContext()) : type;
}

/// Equal constants, a bf16 and an f32 one of the same value included.
bool sameConstant(Attribute a, Attribute b) {
  if (a == b)
    return true;
  auto fa = dyn_cast_or_null<FloatAttr>(a), fb = dyn_cast_or_null<FloatAttr>(b);
  return fa && fb && isRoundingType(fa.getType()) &&
         isRoundingType(fb.getType()) &&
         fa.getValueAsDouble() == fb.getValueAsDouble();
}

bool sameExpr(Expr *a, Expr *b) {
  if (a == b)
    return true;
  if (!a || !b || a->kind != b->kind || a->value != b->value ||
      a->indices != b->indices || !sameConstant(a->constant, b->constant) ||
      a->vars != b->vars || a->operands.size() != b->operands.size())
    return false;
  if ((a->op == nullptr) != (b->op == nullptr))
    return false;
  if (a->op &&
      (a->op->getName() != b->op->getName() ||
       a->op->getAttrDictionary() != b->op->getAttrDictionary() ||
       !llvm::equal(llvm::map_range(a->op->getResultTypes(), unrounded),
                    llvm::map_range(b->op->getResultTypes(), unrounded))))
    return false;
  for (auto [x, y] : llvm::zip(a->operands, b->operands))
    if (!sameExpr(x, y))
      return false;
  return true;
}

/// Whether `e` depends on the iteration variable `var`.
bool dependsOn(Expr *e, AffineExpr var, DenseSet<Expr *> &seen) {
  if (!e || !seen.insert(e).second)
    return false;
  auto dim = dyn_cast<AffineDimExpr>(var);
  if (!dim)
    return false;
  unsigned position = dim.getPosition();
  for (AffineExpr index : e->indices)
    if (index.isFunctionOfDim(position))
      return true;
  return llvm::any_of(e->operands,
                      [&](Expr *o) { return dependsOn(o, var, seen); });
}
bool dependsOn(Expr *e, AffineExpr var) {
  DenseSet<Expr *> seen;
  return dependsOn(e, var, seen);
}

/// The operands of a chain of `OpTy` nodes, e.g. the terms of a sum.
template <typename OpTy>
void flatten(Expr *e, SmallVectorImpl<Expr *> &operands) {
  if (isCompute<OpTy>(e)) {
    flatten<OpTy>(e->operands[0], operands);
    flatten<OpTy>(e->operands[1], operands);
    return;
  }
  operands.push_back(e);
}

/// A sum over one variable starting from zero; returns the summand.
Expr *matchSum(Expr *e, AffineExpr &var, int64_t &extent,
               const ExprBuilder &builder, MLIRContext *context) {
  var = AffineExpr();
  extent = ShapedType::kDynamic;
  if (!e || e->kind != Expr::Kind::Reduce || !isa<arith::AddFOp>(e->op) ||
      e->vars.size() != 1 || !isConstant(e->operands[0], 0.0))
    return nullptr;
  var = getAffineDimExpr(e->vars[0], context);
  extent = builder.extentOf(var);
  return e->operands[1];
}

/// `-z` as negf(z) or 0 - z.
Expr *matchNegation(Expr *e) {
  if (isCompute<arith::NegFOp>(e))
    return e->operands[0];
  if (isCompute<arith::SubFOp>(e) && isConstant(e->operands[0], 0.0))
    return e->operands[1];
  return nullptr;
}

/// `1 + exp(-z)`; returns z.
Expr *matchOnePlusExpNeg(Expr *e) {
  if (!isCompute<arith::AddFOp>(e))
    return nullptr;
  for (int one = 0; one < 2; ++one) {
    Expr *exp = e->operands[1 - one];
    if (isConstant(e->operands[one], 1.0) && isCompute<math::ExpOp>(exp))
      return matchNegation(exp->operands[0]);
  }
  return nullptr;
}

/// sigmoid(z) = 1 / (1 + exp(-z)); returns z.
Expr *matchSigmoid(Expr *e) {
  if (!isCompute<arith::DivFOp>(e) || !isConstant(e->operands[0], 1.0))
    return nullptr;
  return matchOnePlusExpNeg(e->operands[1]);
}

/// 1.0 where `cond` holds, else 0.0 (a one-hot mask entry); returns cond.
Expr *matchIndicator(Expr *e) {
  if (isCompute<arith::UIToFPOp>(e) &&
      e->operands[0]->kind == Expr::Kind::Compute &&
      e->operands[0]->op->getResult(0).getType().isInteger(1))
    return e->operands[0];
  if (isCompute<arith::SIToFPOp, arith::UIToFPOp>(e) &&
      isCompute<arith::ExtUIOp>(e->operands[0]))
    return e->operands[0]->operands[0];
  if (isCompute<arith::SelectOp>(e) && isConstant(e->operands[1], 1.0) &&
      isConstant(e->operands[2], 0.0))
    return e->operands[0];
  return nullptr;
}

/// Strips casts that keep a small non-negative integer's value.
Expr *stripIntegerCasts(Expr *e) {
  while (isCompute<arith::IndexCastOp, arith::IndexCastUIOp, arith::ExtSIOp,
                   arith::ExtUIOp, arith::TruncIOp>(e))
    e = e->operands[0];
  return e;
}

//===----------------------------------------------------------------------===//
// The layer matcher
//===----------------------------------------------------------------------===//

/// Where a projection reads its weight: `tensor[..., n + nOffset, ..., k]`,
/// with the expert in `expertDim` (fixed `expert`, or the routed id when
/// `expert` is -1) for stacked weights.
struct WeightRef {
  Value tensor;
  int expertDim = -1;
  int64_t expert = -1;
  int nDim = 0, kDim = 0;
  int64_t nOffset = 0;
};

/// One expert's MLP: down(silu(gate(x)) * up(x)).
struct ExpertParts {
  WeightRef gate, up, down;
};

/// The matched layer.
struct Layer {
  Value logits, tokens, weightSlice, idSlice;
  bool renormalize = false;
  int64_t numExperts = 0, topK = 0, intermediate = 0, hidden = 0;
  bool gathered = false;
  SmallVector<ExpertParts> experts; // one per expert (one if gathered)
};

class LayerMatcher {
public:
  LayerMatcher(Operation *sort, Value root)
      : sort(sort), root(root), builder(sort->getContext()),
        context(sort->getContext()) {}

  /// Matches the layer that `root` [T, H] computes from `sort`'s top-k.
  LogicalResult match(Layer &layer);
  std::string reason() const { return explainConversion(builder, why); }
  const llvm::SetVector<Operation *> &visitedOps() const {
    return builder.visitedOps();
  }

private:
  LogicalResult fail(const Twine &message) {
    if (why.empty())
      why = message.str();
    return failure();
  }

  /// The routed id `ids[t, j]`, possibly cast and wrapped for negative
  /// indices; returns the top-k id slice it reads.
  Value matchRoutedId(Expr *e);
  /// Top-k weights (optionally renormalised) read at (t, j).
  LogicalResult matchWeights(Expr *e, Layer &layer);
  LogicalResult matchWeightRef(Expr *e, AffineExpr n, AffineExpr k,
                               int64_t expert, WeightRef &ref);
  /// sum_k input(k) * weight(n, k) from zero; returns the input factor.
  Expr *matchProjection(Expr *e, AffineExpr n, int64_t expert, WeightRef &ref,
                        AffineExpr &k, int64_t &extent);
  LogicalResult matchExpert(Expr *e, int64_t expert, Layer &layer,
                            ExpertParts &parts);
  LogicalResult matchDense(Expr *y, Layer &layer);
  LogicalResult matchGathered(Expr *y, Layer &layer);
  LogicalResult matchTopK(Layer &layer);

  Operation *sort;
  Value root;
  ExprBuilder builder;
  MLIRContext *context;
  // Token, hidden column, top-k slot (simplified: a unit dim reads as 0).
  AffineExpr t, h, j;
  int64_t numSlots = 0;
  Value weightIdSlice; // the top-k ids that gathered weights are read at
  std::string why;
};

Value LayerMatcher::matchRoutedId(Expr *e) {
  e = stripIntegerCasts(e);
  // torch's indexing wraps negative ids: select(id < 0, id + E, id).
  if (isCompute<arith::SelectOp>(e) &&
      isCompute<arith::CmpIOp>(e->operands[0]) &&
      cast<arith::CmpIOp>(e->operands[0]->op).getPredicate() ==
          arith::CmpIPredicate::slt &&
      isConstant(e->operands[0]->operands[1], 0.0) &&
      isCompute<arith::AddIOp>(e->operands[1]) &&
      sameExpr(e->operands[0]->operands[0], e->operands[2]) &&
      (sameExpr(e->operands[1]->operands[0], e->operands[2]) ||
       sameExpr(e->operands[1]->operands[1], e->operands[2])))
    e = stripIntegerCasts(e->operands[2]);
  return leafAt(e, {t, j});
}

LogicalResult LayerMatcher::matchWeights(Expr *e, Layer &layer) {
  if (Value slice = leafAt(e, {t, j})) {
    layer.weightSlice = slice;
    layer.renormalize = false;
    return success();
  }
  // Renormalised: w[t, j] / sum_j' w[t, j'] over the same top-k slots.
  Value slice =
      isCompute<arith::DivFOp>(e) ? leafAt(e->operands[0], {t, j}) : Value();
  if (slice) {
    AffineExpr var;
    int64_t extent;
    Expr *summand = matchSum(e->operands[1], var, extent, builder, context);
    if (leafAt(summand, {t, builder.simplify(var)}) != slice)
      return fail("routing weights are divided by something other than "
                  "their sum over the token's top-k");
    if (extent != numSlots)
      return fail("renormalisation sums " + Twine(extent) +
                  " weights, the layer routes to " + Twine(numSlots));
    layer.weightSlice = slice;
    layer.renormalize = true;
    return success();
  }
  if (isCompute<arith::TruncFOp, arith::ExtFOp>(e))
    return fail("routing weights are converted to or from a float type other "
                "than f32 and bf16");
  return fail("routing weights are not the top-k scores (or those divided "
              "by their sum)");
}

LogicalResult LayerMatcher::matchWeightRef(Expr *e, AffineExpr n, AffineExpr k,
                                           int64_t expert, WeightRef &ref) {
  SmallVector<Expr *> indices;
  bool gathered = e->kind == Expr::Kind::Extract && expert < 0;
  Value tensor = gathered ? e->value : e->origin;
  if (gathered)
    indices.assign(e->operands.begin(), e->operands.end());
  else if (tensor)
    indices.assign(e->originIndices.size(), nullptr);
  else
    return fail("a projection's weight is neither a tensor element nor a "
                "weight gathered by the routed expert id");
  auto type = dyn_cast<RankedTensorType>(tensor.getType());
  if (!type)
    return fail("a projection's weight is not a ranked tensor");
  ref = WeightRef{tensor};
  ref.expert = expert;
  bool hasN = false, hasK = false;
  for (unsigned dim = 0; dim < indices.size(); ++dim) {
    std::optional<AffineExpr> at;
    if (!gathered)
      at = e->originIndices[dim];
    else if (indices[dim]->kind == Expr::Kind::Index)
      at = indices[dim]->indices[0];
    else if (auto c = getInteger(indices[dim]))
      at = getAffineConstantExpr(*c, context);
    if (at && *at == builder.simplify(k) && !hasK) {
      ref.kDim = dim;
      hasK = true;
      continue;
    }
    if (at && !hasN) {
      if (auto offset =
              dyn_cast<AffineConstantExpr>(builder.simplify(*at - n))) {
        ref.nDim = dim;
        ref.nOffset = offset.getValue();
        hasN = true;
        continue;
      }
    }
    if (ref.expertDim >= 0)
      return fail("a projection's weight is indexed by more than the "
                  "expert, its output and its input");
    if (expert >= 0 && at && *at == getAffineConstantExpr(expert, context)) {
      ref.expertDim = dim;
      continue;
    }
    if (expert < 0 && weightIdSlice &&
        matchRoutedId(indices[dim]) == weightIdSlice) {
      ref.expertDim = dim;
      continue;
    }
    return fail("a projection's weight is read at an index that is not the "
                "expert's");
  }
  if (!hasN || !hasK || (expert < 0 && ref.expertDim < 0) ||
      type.getRank() != static_cast<int64_t>(indices.size()))
    return fail("a projection's weight is not indexed by (expert,) output, "
                "input");
  return success();
}

Expr *LayerMatcher::matchProjection(Expr *e, AffineExpr n, int64_t expert,
                                    WeightRef &ref, AffineExpr &k,
                                    int64_t &extent) {
  Expr *product = matchSum(e, k, extent, builder, context);
  if (!isCompute<arith::MulFOp>(product)) {
    (void)fail("an expert projection is not a sum of products from zero (a "
               "bias or another reduction)");
    return nullptr;
  }
  // The weight is the factor read at (n, k); the other is the input. The
  // factor that is not the weight explains nothing when it fails.
  std::string before = why;
  for (int w = 1; w >= 0; --w) {
    Expr *weight = product->operands[w];
    if (succeeded(matchWeightRef(weight, n, k, expert, ref))) {
      why = before;
      return product->operands[1 - w];
    }
  }
  (void)fail("no factor of an expert projection is a weight element");
  return nullptr;
}

LogicalResult LayerMatcher::matchExpert(Expr *e, int64_t expert, Layer &layer,
                                        ExpertParts &parts) {
  AffineExpr i, r;
  int64_t intermediate, hidden;
  Expr *act = matchProjection(e, h, expert, parts.down, i, intermediate);
  if (!act)
    return failure();
  // silu(gate) * up as a product: gate * sigmoid(gate) * up in any order,
  // or gate / (1 + exp(-gate)) * up.
  SmallVector<Expr *> factors;
  flatten<arith::MulFOp>(act, factors);
  Expr *gate = nullptr, *up = nullptr;
  if (factors.size() == 3) {
    for (int s = 0; s < 3 && !gate; ++s) {
      Expr *z = matchSigmoid(factors[s]);
      for (int g = 0; g < 3 && z && !gate; ++g)
        if (g != s && sameExpr(factors[g], z)) {
          gate = z;
          up = factors[3 - s - g];
        }
    }
  } else if (factors.size() == 2) {
    for (int s = 0; s < 2 && !gate; ++s)
      if (isCompute<arith::DivFOp>(factors[s]) &&
          sameExpr(matchOnePlusExpNeg(factors[s]->operands[1]),
                   factors[s]->operands[0])) {
        gate = factors[s]->operands[0];
        up = factors[1 - s];
      }
  }
  if (!gate)
    return fail("the expert activation is not silu(gate) * up");

  Expr *gateInput = matchProjection(gate, i, expert, parts.gate, r, hidden);
  if (!gateInput)
    return failure();
  AffineExpr r2;
  int64_t hidden2;
  Expr *upInput = matchProjection(up, i, expert, parts.up, r2, hidden2);
  if (!upInput)
    return failure();
  Value tokens = readsAt(gateInput, {t, builder.simplify(r)});
  if (!tokens || readsAt(upInput, {t, builder.simplify(r2)}) != tokens)
    return fail("the gate and up projections do not both read the tokens");
  if (!layer.tokens)
    layer.tokens = tokens;
  if (layer.tokens != tokens)
    return fail("experts read different token tensors");
  if (layer.intermediate && layer.intermediate != intermediate)
    return fail("experts have different intermediate sizes");
  if (ShapedType::isDynamic(intermediate) || ShapedType::isDynamic(hidden) ||
      hidden != hidden2 || hidden != layer.hidden)
    return fail("an expert projection does not run over the whole hidden "
                "dimension");
  layer.intermediate = intermediate;
  return success();
}

LogicalResult LayerMatcher::matchDense(Expr *y, Layer &layer) {
  SmallVector<Expr *> terms;
  flatten<arith::AddFOp>(y, terms);
  DenseMap<int64_t, ExpertParts> byExpert;
  for (Expr *term : terms) {
    if (isConstant(term, 0.0))
      continue;
    if (!isCompute<arith::MulFOp>(term))
      return fail("a term of the combine is not an expert output times its "
                  "routing weight");
    bool matched = false;
    for (int m = 0; m < 2 && !matched; ++m) {
      // The token's weight does not vary along the hidden dimension.
      if (dependsOn(term->operands[1 - m], h))
        continue;
      // The token's weight for expert e: sum_j w[t, j] * (ids[t, j] == e).
      AffineExpr slot;
      int64_t slots;
      Expr *summand =
          matchSum(term->operands[1 - m], slot, slots, builder, context);
      if (!isCompute<arith::MulFOp>(summand))
        continue;
      j = builder.simplify(slot);
      numSlots = slots;
      for (int w = 0; w < 2 && !matched; ++w) {
        Expr *cond = matchIndicator(summand->operands[1 - w]);
        if (!isCompute<arith::CmpIOp>(cond) ||
            cast<arith::CmpIOp>(cond->op).getPredicate() !=
                arith::CmpIPredicate::eq)
          continue;
        for (int c = 0; c < 2 && !matched; ++c) {
          std::optional<int64_t> expert = getInteger(cond->operands[1 - c]);
          Value ids = matchRoutedId(cond->operands[c]);
          if (!expert || !ids)
            continue;
          Layer routing;
          if (failed(matchWeights(summand->operands[w], routing)))
            return failure();
          if (layer.weightSlice &&
              (layer.weightSlice != routing.weightSlice ||
               layer.idSlice != ids ||
               layer.renormalize != routing.renormalize || layer.topK != slots))
            return fail("experts are weighted by different routings");
          layer.weightSlice = routing.weightSlice;
          layer.renormalize = routing.renormalize;
          layer.idSlice = ids;
          layer.topK = slots;
          if (byExpert.count(*expert))
            return fail("expert " + Twine(*expert) + " is added twice");
          weightIdSlice = ids;
          ExpertParts parts;
          if (failed(matchExpert(term->operands[m], *expert, layer, parts)))
            return failure();
          byExpert[*expert] = parts;
          matched = true;
        }
      }
    }
    if (!matched)
      return fail("a term of the combine is not weighted by a one-hot mask "
                  "of the top-k ids");
  }
  if (byExpert.empty())
    return fail("no expert output is combined");
  layer.numExperts = byExpert.size();
  for (int64_t e = 0; e < layer.numExperts; ++e) {
    auto it = byExpert.find(e);
    if (it == byExpert.end())
      return fail("the combine has no term for expert " + Twine(e));
    layer.experts.push_back(it->second);
  }
  return success();
}

LogicalResult LayerMatcher::matchGathered(Expr *y, Layer &layer) {
  int64_t slots;
  Expr *product = matchSum(y, j, slots, builder, context);
  if (!isCompute<arith::MulFOp>(product))
    return fail("the combine is neither a sum over experts nor a sum over "
                "the top-k slots");
  j = builder.simplify(j);
  numSlots = slots;
  for (int w = 0; w < 2; ++w) {
    // The routing weight does not vary along the hidden dimension.
    if (dependsOn(product->operands[w], h))
      continue;
    Layer routing;
    if (failed(matchWeights(product->operands[w], routing)))
      return failure();
    layer.weightSlice = routing.weightSlice;
    layer.renormalize = routing.renormalize;
    layer.topK = slots;
    layer.gathered = true;
    // The ids the expert weights are gathered with must be the top-k ids.
    weightIdSlice = Value();
    ExpertParts parts;
    Expr *expertOut = product->operands[1 - w];
    // Find the id slice from the first gathered weight index.
    SmallVector<Expr *> worklist{expertOut};
    DenseSet<Expr *> seen;
    while (!worklist.empty() && !weightIdSlice) {
      Expr *e = worklist.pop_back_val();
      if (!seen.insert(e).second)
        continue;
      if (e->kind == Expr::Kind::Extract) {
        for (Expr *index : e->operands)
          if (Value ids = matchRoutedId(index)) {
            weightIdSlice = ids;
            break;
          }
        continue;
      }
      worklist.append(e->operands.begin(), e->operands.end());
    }
    if (!weightIdSlice)
      return fail("the expert weights are not gathered by the top-k ids");
    layer.idSlice = weightIdSlice;
    if (failed(matchExpert(expertOut, /*expert=*/-1, layer, parts)))
      return failure();
    layer.experts.push_back(parts);
    return success();
  }
  return fail("the combine's product has no routing weight factor");
}

/// `slice` is `sort`'s result `resultNo` or its first k columns for every
/// token; returns k.
std::optional<int64_t> getTopKColumns(Value slice, Operation *sort,
                                      unsigned resultNo) {
  if (slice == sort->getResult(resultNo))
    return cast<RankedTensorType>(slice.getType()).getDimSize(1);
  auto extract = slice.getDefiningOp<tensor::ExtractSliceOp>();
  if (!extract || extract.getSource() != sort->getResult(resultNo) ||
      extract.getType().getRank() != 2 || !extract.hasUnitStride() ||
      !llvm::all_of(extract.getMixedOffsets(),
                    [](OpFoldResult o) { return isZeroInteger(o); }))
    return std::nullopt;
  std::optional<int64_t> k = getConstantIntValue(extract.getMixedSizes()[1]);
  OpFoldResult rows = extract.getMixedSizes()[0];
  int64_t allRows = extract.getSourceType().getDimSize(0);
  if (std::optional<int64_t> n = getConstantIntValue(rows))
    return *n == allRows ? k : std::nullopt;
  // Dynamic: the rows of the sort's operands or results.
  auto dim = cast<Value>(rows).getDefiningOp<tensor::DimOp>();
  if (!dim || getConstantIntValue(dim.getIndex()) != 0 ||
      (!llvm::is_contained(sort->getResults(), dim.getSource()) &&
       !llvm::is_contained(sort->getOperands(), dim.getSource())))
    return std::nullopt;
  return k;
}

/// The structure of a `tm_tensor.sort` that makes top-k: along dim 1 of
/// [T, E] values and ids, descending and stable (`oge`).
LogicalResult checkSort(Operation *sort, std::string &why) {
  auto dimension = sort->getAttrOfType<IntegerAttr>("dimension");
  if (sort->getNumOperands() != 2 || sort->getNumResults() != 2 ||
      sort->getNumRegions() != 1 || !dimension) {
    why = "the sort is not a values-and-ids tm_tensor.sort";
    return failure();
  }
  auto valuesType = dyn_cast<RankedTensorType>(sort->getOperand(0).getType());
  auto idsType = dyn_cast<RankedTensorType>(sort->getOperand(1).getType());
  if (!valuesType || !idsType || valuesType.getRank() != 2 ||
      !isa<FloatType>(valuesType.getElementType()) ||
      !idsType.getElementType().isSignlessInteger() ||
      valuesType.getShape() != idsType.getShape() ||
      !llvm::equal(sort->getResultTypes(), sort->getOperandTypes()) ||
      ShapedType::isDynamic(valuesType.getDimSize(1))) {
    why = "the sort does not take [tokens, experts] scores and ids";
    return failure();
  }
  if (dimension.getInt() != 1) {
    why = "the sort does not run over the expert dimension";
    return failure();
  }
  Region &region = sort->getRegion(0);
  if (!region.hasOneBlock() || region.front().getNumArguments() != 4 ||
      region.front().getOperations().size() != 2) {
    why = "the sort's comparator is not a single compare";
    return failure();
  }
  Block &block = region.front();
  auto compare = dyn_cast<arith::CmpFOp>(&block.front());
  Operation *terminator = &block.back();
  // The sort keeps a pair in place while compare(a, b) holds: `oge` sorts
  // descending and keeps equal scores in expert order, as moe.route does.
  if (!compare || compare.getLhs() != block.getArgument(0) ||
      compare.getRhs() != block.getArgument(1) ||
      terminator->getNumOperands() != 1 ||
      terminator->getOperand(0) != compare.getResult() ||
      compare.getPredicate() != arith::CmpFPredicate::OGE) {
    why = "the sort's comparator is not `oge` on the scores (descending "
          "with ties in expert order)";
    return failure();
  }
  return success();
}

/// Matches the router: sort operand 0 is softmax(logits) over experts at
/// (t, e) and operand 1 is e.
LogicalResult matchRouter(Operation *sort, ExprBuilder &builder, AffineExpr t,
                          Value &logits, std::string &why) {
  if (failed(checkSort(sort, why)))
    return failure();
  MLIRContext *context = sort->getContext();
  int64_t numExperts =
      cast<RankedTensorType>(sort->getOperand(0).getType()).getDimSize(1);
  AffineExpr e = builder.simplify(builder.newVar(numExperts));
  Expr *id = stripIntegerCasts(builder.element(sort->getOperand(1), {t, e}));
  if (!id || id->kind != Expr::Kind::Index || id->indices[0] != e) {
    why = "the sorted ids are not the expert positions 0..E-1";
    return failure();
  }
  Expr *scores = builder.element(sort->getOperand(0), {t, e});
  why = "the sorted scores are not a softmax of logits over the expert "
        "dimension";
  if (!isCompute<arith::DivFOp>(scores) ||
      !isCompute<math::ExpOp>(scores->operands[0]))
    return failure();
  // exp(l[t, e] - max) or exp(l[t, e]).
  auto matchExponent = [&](Expr *exponent, AffineExpr at, Value &l,
                           Expr *&shift) {
    shift = nullptr;
    if (isCompute<arith::SubFOp>(exponent)) {
      shift = exponent->operands[1];
      exponent = exponent->operands[0];
    }
    l = readsAt(exponent, {t, at});
    return static_cast<bool>(l);
  };
  Expr *shift;
  if (!matchExponent(scores->operands[0]->operands[0], e, logits, shift))
    return failure();
  // Through roundings between f32 and bf16, the logits tensor the softmax
  // itself reads (a rounded copy holds other values than `logits`).
  Expr *read = scores->operands[0]->operands[0];
  if (isCompute<arith::SubFOp>(read))
    read = read->operands[0];
  Value softmaxInput = read->nearest;
  if (ArrayRef<AffineExpr>(read->nearestIndices) != ArrayRef<AffineExpr>{t, e})
    softmaxInput = logits;
  AffineExpr r;
  int64_t extent;
  Expr *summand = matchSum(scores->operands[1], r, extent, builder, context);
  Value summed;
  Expr *summedShift;
  if (!isCompute<math::ExpOp>(summand) ||
      !matchExponent(summand->operands[0], builder.simplify(r), summed,
                     summedShift) ||
      summed != logits || !sameExpr(shift, summedShift)) {
    why = "the softmax is not normalised by a sum over the expert dimension";
    return failure();
  }
  if (extent != numExperts) {
    why = "the softmax sums over " + std::to_string(extent) +
          " entries, not the " + std::to_string(numExperts) + " experts";
    return failure();
  }
  // The shift must be the row max (any per-row constant cancels, but only
  // the max keeps exp finite as moe.route does).
  if (shift) {
    if (shift->kind != Expr::Kind::Reduce ||
        !isa<arith::MaximumFOp, arith::MaxNumFOp>(shift->op) ||
        shift->vars.size() != 1 || !isLowest(shift->operands[0])) {
      why = "the softmax subtracts something other than the row max";
      return failure();
    }
    AffineExpr m = getAffineDimExpr(shift->vars[0], context);
    if (readsAt(shift->operands[1], {t, builder.simplify(m)}) != logits ||
        builder.extentOf(m) != numExperts) {
      why = "the softmax subtracts a max that is not over the token's "
            "logits";
      return failure();
    }
  }
  auto logitsType = dyn_cast<RankedTensorType>(softmaxInput.getType());
  if (!logitsType || logitsType.getRank() != 2 ||
      logitsType.getDimSize(1) != numExperts ||
      !isRoundingType(logitsType.getElementType())) {
    why = "the softmax input is not [tokens, experts] f32 or bf16";
    return failure();
  }
  logits = softmaxInput;
  why.clear();
  return success();
}

LogicalResult LayerMatcher::matchTopK(Layer &layer) {
  std::optional<int64_t> kWeights = getTopKColumns(layer.weightSlice, sort, 0);
  std::optional<int64_t> kIds = getTopKColumns(layer.idSlice, sort, 1);
  if (!kWeights || !kIds)
    return fail("the routing weights and ids are not the top-k columns of "
                "this sort");
  if (*kWeights != *kIds || *kWeights != layer.topK)
    return fail("top-k mismatch: " + Twine(*kWeights) + " weights, " +
                Twine(*kIds) + " ids, combined over " + Twine(layer.topK) +
                " slots");
  int64_t numExperts =
      cast<RankedTensorType>(sort->getOperand(0).getType()).getDimSize(1);
  if (layer.numExperts && layer.numExperts != numExperts)
    return fail("the combine covers " + Twine(layer.numExperts) +
                " of the router's " + Twine(numExperts) + " experts");
  layer.numExperts = numExperts;
  std::string routerWhy;
  if (failed(matchRouter(sort, builder, t, layer.logits, routerWhy)))
    return fail(routerWhy);
  return success();
}

LogicalResult LayerMatcher::match(Layer &layer) {
  auto type = cast<RankedTensorType>(root.getType());
  // The moe ops take f32 or bf16 tokens and weights; an f16 layer would be
  // rounded differently than by bf16 casts.
  if (!isRoundingType(type.getElementType()))
    return fail("the layer output is not f32 or bf16");
  layer.hidden = type.getDimSize(1);
  if (ShapedType::isDynamic(layer.hidden))
    return fail("the layer output's hidden size is dynamic");
  t = builder.simplify(builder.newVar(type.getDimSize(0)));
  h = builder.simplify(builder.newVar(layer.hidden));
  Expr *y = builder.element(root, {t, h});
  if (y->kind == Expr::Kind::Reduce) {
    if (failed(matchGathered(y, layer)))
      return failure();
  } else if (failed(matchDense(y, layer))) {
    return failure();
  }
  if (failed(matchTopK(layer)))
    return failure();
  auto tokensType = dyn_cast<RankedTensorType>(layer.tokens.getType());
  if (!tokensType || tokensType.getRank() != 2 ||
      tokensType.getDimSize(1) != layer.hidden ||
      tokensType.getElementType() != type.getElementType())
    return fail("the tokens are not [tokens, hidden] of the output's type");
  return success();
}

//===----------------------------------------------------------------------===//
// The rewrite
//===----------------------------------------------------------------------===//

/// A block of rows of a stacked weight: where it is read, its first row
/// in the stacked [N, K] matrix of an expert, its row count.
struct WeightPart {
  const WeightRef *ref;
  int64_t first, rows;
};

/// Builds the stacked [E, N, K] weights from each expert's parts.
Value stackWeights(OpBuilder &b, Location loc, const Layer &layer,
                   function_ref<SmallVector<WeightPart>(int64_t)> parts,
                   int64_t n, int64_t k, Type elementType,
                   SmallVectorImpl<Operation *> &created) {
  int64_t numExperts = layer.numExperts;
  // Stacked [E, N, K] weights already in this layout are used as they are.
  if (layer.gathered) {
    bool direct = true;
    int64_t row = 0;
    Value tensor;
    for (auto [ref, first, rows] : parts(0)) {
      tensor = tensor ? tensor : ref->tensor;
      direct &= ref->tensor == tensor && ref->expertDim == 0 &&
                ref->nDim == 1 && ref->kDim == 2 && ref->nOffset == first &&
                first == row;
      row += rows;
    }
    if (direct && row == n &&
        cast<RankedTensorType>(tensor.getType()).getShape() ==
            ArrayRef<int64_t>{numExperts, n, k})
      return tensor;
  }
  auto stackedType = RankedTensorType::get({numExperts, n, k}, elementType);
  Value stacked =
      tensor::EmptyOp::create(b, loc, stackedType.getShape(), elementType);
  created.push_back(stacked.getDefiningOp());
  for (int64_t e = 0; e < numExperts; ++e) {
    for (auto [ref, first, rows] : parts(e)) {
      auto sourceType = cast<RankedTensorType>(ref->tensor.getType());
      int64_t rank = sourceType.getRank();
      SmallVector<int64_t> offsets(rank, 0), sizes(rank, 1), strides(rank, 1);
      if (ref->expertDim >= 0)
        offsets[ref->expertDim] = layer.gathered ? e : ref->expert;
      offsets[ref->nDim] = ref->nOffset;
      sizes[ref->nDim] = rows;
      sizes[ref->kDim] = k;
      bool transposed = ref->kDim < ref->nDim;
      SmallVector<int64_t> pieceShape = transposed
                                            ? SmallVector<int64_t>{k, rows}
                                            : SmallVector<int64_t>{rows, k};
      Value piece = ref->tensor;
      if (sourceType.getShape() != ArrayRef<int64_t>(pieceShape)) {
        auto pieceType = RankedTensorType::get(pieceShape, elementType);
        piece = tensor::ExtractSliceOp::create(
            b, loc, pieceType, ref->tensor,
            getAsIndexOpFoldResult(b.getContext(), offsets),
            getAsIndexOpFoldResult(b.getContext(), sizes),
            getAsIndexOpFoldResult(b.getContext(), strides));
        created.push_back(piece.getDefiningOp());
      }
      if (transposed) {
        Value init = tensor::EmptyOp::create(b, loc, {rows, k}, elementType);
        created.push_back(init.getDefiningOp());
        auto transpose = linalg::TransposeOp::create(b, loc, piece, init,
                                                     ArrayRef<int64_t>{1, 0});
        created.push_back(transpose);
        piece = transpose->getResult(0);
      }
      auto insert = tensor::InsertSliceOp::create(
          b, loc, piece, stacked,
          getAsIndexOpFoldResult(b.getContext(), {e, first, 0}),
          getAsIndexOpFoldResult(b.getContext(), {1, rows, k}),
          getAsIndexOpFoldResult(b.getContext(), {1, 1, 1}));
      created.push_back(insert);
      stacked = insert.getResult();
    }
  }
  return stacked;
}

/// Whether `ref` reads inside its tensor for `rows` output rows, K inputs
/// and the layer's experts.
bool fitsWeight(const WeightRef &ref, const Layer &layer, int64_t rows,
                int64_t k, Type elementType) {
  auto type = cast<RankedTensorType>(ref.tensor.getType());
  if (type.getElementType() != elementType || !type.hasStaticShape() ||
      type.getRank() != (ref.expertDim >= 0 ? 3 : 2))
    return false;
  if (ref.expertDim >= 0) {
    int64_t lastExpert = layer.gathered ? layer.numExperts - 1 : ref.expert;
    if (lastExpert >= type.getDimSize(ref.expertDim))
      return false;
  }
  return ref.nOffset >= 0 && ref.nOffset + rows <= type.getDimSize(ref.nDim) &&
         type.getDimSize(ref.kDim) == k;
}

/// Rewrites `root` to the moe ops of `layer`; nothing changes on failure.
LogicalResult rewriteLayer(Operation *sort, Value root, const Layer &layer,
                           std::string &why) {
  auto rootType = cast<RankedTensorType>(root.getType());
  Type elementType = rootType.getElementType();
  int64_t numExperts = layer.numExperts, k = layer.topK;
  int64_t hidden = layer.hidden, intermediate = layer.intermediate;
  for (const ExpertParts &parts : layer.experts)
    if (!fitsWeight(parts.gate, layer, intermediate, hidden, elementType) ||
        !fitsWeight(parts.up, layer, intermediate, hidden, elementType) ||
        !fitsWeight(parts.down, layer, hidden, intermediate, elementType)) {
      why = "an expert weight is not a static tensor of the tokens' type "
            "covering the projection";
      return failure();
    }

  MLIRContext *context = sort->getContext();
  OpBuilder b(root.getDefiningOp());
  Location loc = FusedLoc::get(context, {sort->getLoc(), root.getLoc()});
  SmallVector<Operation *> created;
  int64_t numTokens =
      cast<RankedTensorType>(layer.logits.getType()).getDimSize(0);
  Type f32 = Float32Type::get(context), i64 = IntegerType::get(context, 64);
  auto route = RouteOp::create(
      b, loc, RankedTensorType::get({numTokens, k}, b.getI32Type()),
      RankedTensorType::get({numTokens, k}, f32), layer.logits, Value(),
      Value(), Value(), RoutingAttr::get(context, Routing::softmax_topk),
      b.getI64IntegerAttr(k), nullptr, nullptr,
      layer.renormalize ? b.getUnitAttr() : nullptr, nullptr, nullptr);
  created.push_back(route);
  int64_t numRows =
      ShapedType::isDynamic(numTokens) ? ShapedType::kDynamic : numTokens * k;
  auto rowsType = RankedTensorType::get({numRows, hidden}, elementType);
  auto permute = PermuteOp::create(b, loc, rowsType,
                                   RankedTensorType::get({numExperts + 1}, i64),
                                   RankedTensorType::get({numTokens, k}, i64),
                                   layer.tokens, route.getExpertIds(), nullptr);
  created.push_back(permute);

  // The gate-up weights hold gate rows [0, I) then up rows [I, 2I).
  auto gateUp = [&](int64_t e) -> SmallVector<WeightPart> {
    const ExpertParts &parts = layer.experts[layer.gathered ? 0 : e];
    return {{&parts.gate, 0, intermediate},
            {&parts.up, intermediate, intermediate}};
  };
  auto down = [&](int64_t e) -> SmallVector<WeightPart> {
    return {{&layer.experts[layer.gathered ? 0 : e].down, 0, hidden}};
  };
  Value w13 = stackWeights(b, loc, layer, gateUp, 2 * intermediate, hidden,
                           elementType, created);
  Value w2 = stackWeights(b, loc, layer, down, hidden, intermediate,
                          elementType, created);
  auto mlp = ExpertMLPOp::create(
      b, loc, rowsType, permute.getRows(), permute.getOffsets(), w13, w2,
      Value(), Value(), Value(),
      GatedActivationAttr::get(context, GatedActivation::silu), nullptr,
      nullptr, /*intermediate=*/nullptr);
  created.push_back(mlp);
  auto combine =
      UnpermuteOp::create(b, loc, rootType, mlp.getResult(), permute.getSlots(),
                          route.getWeights(), /*shared=*/Value());
  created.push_back(combine);

  LogicalResult verified = success();
  {
    // A refused raise is not an error: keep the verifiers quiet.
    ScopedDiagnosticHandler quiet(context,
                                  [](Diagnostic &) { return success(); });
    for (Operation *op : created)
      if (failed(verify(op, /*verifyRecursively=*/false)))
        verified = failure();
  }
  if (failed(verified)) {
    for (Operation *op : llvm::reverse(created))
      op->erase();
    why = "the moe ops for this layer would not verify";
    return failure();
  }
  root.replaceAllUsesWith(combine.getResult());
  return success();
}

/// Points `tensor.dim` users of `op`'s results at a value of the same shape
/// (a destination-style init, the sort's operand), so that they do not
/// keep a replaced computation alive.
void redirectDims(Operation *op, bool isSort) {
  for (OpResult result : op->getResults()) {
    Value sameShape;
    if (isSort)
      sameShape = op->getOperand(result.getResultNumber());
    else if (auto dps = dyn_cast<DestinationStyleOpInterface>(op))
      sameShape = dps.getTiedOpOperand(result)->get();
    if (!sameShape || sameShape.getType() != result.getType())
      continue;
    for (OpOperand &use : llvm::make_early_inc_range(result.getUses()))
      if (isa<tensor::DimOp>(use.getOwner()))
        use.set(sameShape);
  }
}

/// Erases the ops of a replaced layer, and what only they used, once nothing
/// uses them any more.
void eraseDeadComputation(Operation *sort,
                          const llvm::SetVector<Operation *> &layerOps) {
  SmallVector<Operation *> worklist(layerOps.begin(), layerOps.end());
  worklist.push_back(sort);
  DenseSet<Operation *> erased;
  while (!worklist.empty()) {
    Operation *op = worklist.pop_back_val();
    if (erased.contains(op))
      continue;
    if (op == sort || layerOps.contains(op))
      redirectDims(op, op == sort);
    // The sort is unregistered, so MLIR cannot tell it is pure; we know it.
    if (!op->use_empty() || (op != sort && !isOpTriviallyDead(op)))
      continue;
    for (Value operand : op->getOperands())
      if (Operation *def = operand.getDefiningOp())
        worklist.push_back(def);
    erased.insert(op);
    op->erase();
  }
}

/// Raises the layer around `sort`, or says why not.
void raiseAt(Operation *sort) {
  // The router alone first: its failure is the most useful remark.
  {
    std::string why;
    ExprBuilder builder(sort->getContext());
    Value logits;
    if (failed(checkSort(sort, why)) ||
        failed(matchRouter(
            sort, builder,
            builder.newVar(
                cast<ShapedType>(sort->getOperand(0).getType()).getDimSize(0)),
            logits, why))) {
      sort->emitRemark("moe-raise: not raised: ")
          << explainConversion(builder, why);
      return;
    }
  }

  // The combine is a [T, H] float value computed from the top-k: try the
  // latest such value first (a partial sum of the experts is no layer).
  llvm::SetVector<Operation *> slice;
  getForwardSlice(sort, &slice);
  constexpr int kMaxCandidates = 64;
  int tried = 0;
  std::string firstWhy;
  for (Operation *op : llvm::reverse(slice)) {
    if (!isa<linalg::LinalgOp>(op) || op->getNumResults() != 1)
      continue;
    auto type = dyn_cast<RankedTensorType>(op->getResult(0).getType());
    if (!type || type.getRank() != 2 ||
        !isa<Float32Type, BFloat16Type, Float16Type>(type.getElementType()))
      continue;
    if (++tried > kMaxCandidates)
      break;
    Value root = op->getResult(0);
    Layer layer;
    LayerMatcher matcher(sort, root);
    std::string why;
    if (succeeded(matcher.match(layer)) &&
        succeeded(rewriteLayer(sort, root, layer, why))) {
      eraseDeadComputation(sort, matcher.visitedOps());
      return;
    }
    if (firstWhy.empty())
      firstWhy = why.empty() ? matcher.reason() : why;
  }
  sort->emitRemark("moe-raise: not raised: ")
      << (firstWhy.empty() ? "no [tokens, hidden] value is computed from the "
                             "top-k"
                           : firstWhy);
}

struct MoERaisePass : moe::impl::MoERaiseBase<MoERaisePass> {
  void runOnOperation() override {
    SmallVector<Operation *> sorts;
    getOperation()->walk([&](Operation *op) {
      if (op->getName().getStringRef() == "tm_tensor.sort")
        sorts.push_back(op);
    });
    for (Operation *sort : sorts)
      raiseAt(sort);
  }
};

} // namespace
