//===- Passes.td - moe to other dialects -------------------*- tablegen -*-===//

#ifndef MOE_CONVERSION_PASSES_TD
#define MOE_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertMoEToLinalg : Pass<"convert-moe-to-linalg"> {
  let summary = "Lower moe ops to linalg, tensor, scf, arith and math on "
                "tensors: the executable reference semantics";
  let description = [{
    Gives every moe op its meaning in upstream dialects, on tensors, so that
    one-shot bufferization and the LLVM lowering make it runnable on the CPU
    (`--moe-cpu-reference-pipeline`). Written for clarity, not speed:
    routing is an iterative arg-max per token, permutation a counting sort
    in `scf.for` loops, each expert's matmul a `linalg.generic` on its
    dynamic row range, FP8 encoding and decoding bit manipulation on i32.
    Fused ops are expanded first. Any moe op left afterwards is an error.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect",
  ];
}

#endif // MOE_CONVERSION_PASSES_TD
