// moe.grouped_dgrad on sm_90a: the grouped GEMM kernels with N-major
// weights, as a grouped_matmul.v3 entry with weights=kn, and what the
// pipeline refuses.
// RUN: moe-opt %s --split-input-file --moe-select-kernels --convert-moe-to-nvgpu | FileCheck %s

// The entry's GEMM is out [M, K] = grad [M, N] . weights[e] [N, K]: n = 512
// (out's columns), k = 256 (the reduction); the weights argument keeps the
// forward's [E, N, K] = [8, 256, 512], read through boxes of 64 columns x
// 64 rows of one expert; both forms' kernels are the _wkn ones.
// CHECK-LABEL: func.func @dgrad(
// CHECK: moe.grouped_dgrad
// CHECK-SAME: abi = "grouped_matmul.v3"
// CHECK-SAME: k = 256 : i64
// CHECK-SAME: kernels = [{kernel = @moe_kernels::@grouped_matmul_bf16_64x256x64_s4_wkn_off32, rows_max = 64 : i64, rows_min = 1 : i64}, {kernel = @moe_kernels::@grouped_matmul_bf16_128x256x64_s4_wkn_off32,
// CHECK-SAME: n = 512 : i64
// CHECK-SAME: {align = 16 : i64, dims = "8,256,512", dtype = "bf16", name = "weights", role = "in"}
// CHECK-SAME: tmap:weights:bf16:[512,256,8]:[1024,262144]:[64,64,1]
// CHECK-SAME: weights = "kn"
// CHECK: gpu.func @grouped_matmul_bf16_64x256x64_s4_wkn_off32(
// CHECK: gpu.func @grouped_matmul_bf16_128x256x64_s4_wkn_off32(
func.func @dgrad(%g: tensor<?x256xbf16>, %w: tensor<8x256x512xbf16>, %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  %dx = moe.grouped_dgrad %g, %w, %off : (tensor<?x256xbf16>, tensor<8x256x512xbf16>, tensor<9xi32>) -> tensor<?x512xbf16>
  return %dx : tensor<?x512xbf16>
}

// -----

// moe.grouped_matmul with kn_weights (GPT-OSS's experts as they lie) is the
// same GEMM with a bias epilogue: the dgrad's forms, the bias f32 per
// output column.
// CHECK-LABEL: func.func @kn_weights(
// CHECK: moe.grouped_matmul
// CHECK-SAME: abi = "grouped_matmul.v3"
// CHECK-SAME: bias = "f32"
// CHECK-SAME: kernels = [{kernel = @moe_kernels::@grouped_matmul_bf16_64x256x64_s4_biasf32_wkn_off32, rows_max = 64 : i64, rows_min = 1 : i64}, {kernel = @moe_kernels::@grouped_matmul_bf16_128x256x64_s4_biasf32_wkn_off32,
// CHECK-SAME: {align = 16 : i64, dims = "8,256,512", dtype = "bf16", name = "weights", role = "in"}
// CHECK-SAME: {align = 4 : i64, dims = "8,512", dtype = "f32", name = "bias", role = "in"}
// CHECK-SAME: tmap:weights:bf16:[512,256,8]:[1024,262144]:[64,64,1]
// CHECK-SAME: weights = "kn"
// CHECK: gpu.func @grouped_matmul_bf16_64x256x64_s4_biasf32_wkn_off32(
func.func @kn_weights(%x: tensor<?x256xbf16>, %w: tensor<8x256x512xbf16>, %off: tensor<9xi32>, %b: tensor<8x512xf32>) -> tensor<?x512xbf16> {
  %y = moe.grouped_matmul %x, %w, %off bias %b kn_weights : (tensor<?x256xbf16>, tensor<8x256x512xbf16>, tensor<9xi32>, tensor<8x512xf32>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}

// -----

// A dynamic reduction and output width: the plan checks N (out's columns,
// the weights' row pitch) and K at run time.
// CHECK-LABEL: func.func @dynamic(
// CHECK: message = "N must be a multiple of 8 (weights=kn: the TMA row pitch of the weights, N elements, must be a multiple of 16 bytes)"
func.func @dynamic(%g: tensor<?x?xbf16>, %w: tensor<8x?x?xbf16>, %off: tensor<9xi64>) -> tensor<?x?xbf16> {
  %dx = moe.grouped_dgrad %g, %w, %off : (tensor<?x?xbf16>, tensor<8x?x?xbf16>, tensor<9xi64>) -> tensor<?x?xbf16>
  return %dx : tensor<?x?xbf16>
}
