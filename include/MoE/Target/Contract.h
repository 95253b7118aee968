//===- Contract.h - the compiler side of the runtime contract ---*- C++ -*-===//
//
// The names and version the kernel builders, --moe-extract-device-code and
// the bundle writer share (docs/runtime-contract.md).
//
//===----------------------------------------------------------------------===//

#ifndef MOE_TARGET_CONTRACT_H
#define MOE_TARGET_CONTRACT_H

#include "llvm/ADT/StringRef.h"

#include <cstdint>

namespace mlir::moe {

/// Dictionary that a kernel builder (convert-moe-to-nvgpu) puts on each op it
/// built kernels for: ABI, shapes and kernels with their row ranges; it becomes
/// an entry of the `moe.manifest` (docs/runtime-contract.md).
inline constexpr llvm::StringLiteral kLaunchAttr = "moe.launch";
/// Unit attribute convert-moe-to-nvgpu puts on a moe.dequantize whose every
/// user's kernels read the FP8 values and scales themselves: it needs no
/// kernel of its own.
inline constexpr llvm::StringLiteral kFusedIntoLaunchAttr =
    "moe.fused_into_launch";
/// Unit attribute on a function whose moe ops run as one runtime entry, a
/// program.v1 (docs/runtime-contract.md §3.13): --convert-moe-to-nvgpu gives
/// the function the moe.launch of its plan, --moe-extract-device-code names
/// its ops' entries `<function>.<i>` and its own entry after the function.
inline constexpr llvm::StringLiteral kProgramAttr = "moe.program";
/// Name of a program's argument or result (an argument or result attribute;
/// `arg<i>` and `result<i>` otherwise).
inline constexpr llvm::StringLiteral kNameAttr = "moe.name";
/// Unit argument attribute of a program: the caller gives the argument's
/// buffer to the call, which may write values of its own there once the
/// argument is read (its role is then `donated`; the backward's saved
/// values that the train forward made).
inline constexpr llvm::StringLiteral kDonatedAttr = "moe.donated";
/// Version of docs/runtime-contract.md that `moe.manifest` and the
/// `.moebundle` written from it follow.
inline constexpr int64_t kRuntimeContractVersion = 7;

} // namespace mlir::moe

#endif // MOE_TARGET_CONTRACT_H
