// A bf16 grouped GEMM quantized by --moe-quantize compiles whole for sm_90a:
// the prepack function's weight quantize and the per-call row quantize become
// quantize.v1 entries, the GEMM a block-FP8 entry that reads both (its
// dequantizes are part of its launch). test/device/fp8_grouped_matmul.py runs
// this chain on the H200 (test/device/fp8_chain.mlir).
// RUN: moe-opt %s --moe-quantize="scope=weights+activations" --moe-gpu-pipeline -o %t.mlir
// RUN: FileCheck %s --input-file %t.mlir
// RUN: not moe-opt %s --moe-quantize --moe-gpu-pipeline 2>&1 | FileCheck %s --check-prefix=WEIGHTS-ONLY

// CHECK: moe.manifest = {entries = [
// CHECK-SAME: {abi = "quantize.v1", batch = 1 : i64, block_cols = 128 : i64, block_rows = 1 : i64, cols = 1024 : i64, element = "f8E4M3FN", input = bf16,
// CHECK-SAME: name = "gate_up", op = "moe.quantize", plan = {{.*}}, rank = 2 : i64, rows = -1 : i64, scale = "f32"}
// CHECK-SAME: {abi = "grouped_matmul_fp8.v1", {{.*}}format = "fp8_block", k = 1024 : i64, {{.*}}n = 512 : i64, name = "gate_up_0", offsets = i32, op = "moe.grouped_matmul", plan = {{.*}}}, {abi = "quantize.v1", batch = 8 : i64, block_cols = 128 : i64, block_rows = 128 : i64, cols = 1024 : i64, {{.*}}name = "gate_up_prepack", op = "moe.quantize", plan = {{.*}}, rank = 3 : i64, rows = 512 : i64, scale = "f32"}]
// CHECK: gpu.binary @moe_kernels

// Weights only (bf16 rows): no sm_90a kernel reads bf16 rows with FP8
// weights yet, so the GEMM is refused by name.
// WEIGHTS-ONLY: error: 'moe.grouped_matmul' op cannot be lowered to sm_90a yet: quantized operands are implemented as block FP8 or MXFP8
func.func @gate_up(%rows: tensor<?x1024xbf16>, %w: tensor<8x512x1024xbf16>, %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  %y = moe.grouped_matmul %rows, %w, %off
      : (tensor<?x1024xbf16>, tensor<8x512x1024xbf16>, tensor<9xi32>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}
