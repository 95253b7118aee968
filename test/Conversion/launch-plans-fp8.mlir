// The launch plans of grouped_matmul_fp8.v1 entries (docs/launch-plans.md,
// runtime/lib/Runtime.cpp's validateGroupedMatmul and launchGroupedMatmul):
// e4m3 rows and weights (1-byte tensor maps, tile_k 128), then the block
// scales' memrefs after the 17 parameters of grouped_matmul.v3, then
// out_scale (out=f8E4M3FN), row_scale, bias.
// RUN: moe-opt %s --moe-select-kernels="fp8-epilogue-quantize=1" --convert-moe-to-nvgpu | FileCheck %s

// fp8_block with row_scale: rows_scale f32 [M, ceil(K/128)], weights_scale
// f32 [E, ceil(N/128), ceil(K/128)], then row_scale [M].
// CHECK-LABEL: func.func @block_fp8(
// CHECK: plan = {args = [
// CHECK-SAME: {align = 16 : i64, dims = "M,512", dtype = "e4m3", name = "rows", role = "in"}
// CHECK-SAME: {align = 16 : i64, dims = "8,256,512", dtype = "e4m3", name = "weights", role = "in"}
// CHECK-SAME: {align = 4 : i64, dims = "9", dtype = "i32", name = "offsets", role = "in"}
// CHECK-SAME: {align = 16 : i64, dims = "M,256", dtype = "bf16", name = "out", role = "out"}
// CHECK-SAME: {align = 4 : i64, dims = "M", dtype = "f32", name = "row_scale", role = "in"}
// CHECK-SAME: {align = 4 : i64, dims = "M,4", dtype = "f32", name = "rows_scale", role = "in"}
// CHECK-SAME: {align = 4 : i64, dims = "8,2,4", dtype = "f32", name = "weights_scale", role = "in"}]
// CHECK-SAME: checks = []
// CHECK-SAME: sizes = [
// CHECK-SAME: {max = "2147483647", min = "0", name = "M"}]
// CHECK-SAME: steps = [
// CHECK-SAME: {grid = "min(min(ceildiv(M,16)+min(M,8),8)*4,resident)", kernel = 0 : i64, params = "tmap:rows:e4m3:[512,M]:[512]:[128,16];tmap:weights:e4m3:[512,256,8]:[512,131072]:[128,64,1];mem:offsets[9];mem:out[M,256];i32:512;i32:1;i32:16;mem:rows_scale[M,4];mem:weights_scale[8,2,4];mem:row_scale[M]", when = "M>=1"}
// CHECK-SAME: {grid = "min(min(ceildiv(M,64)+min(floordiv(M,17),8),8)*2,resident)", kernel = 1 : i64, params = "tmap:rows:e4m3:[512,M]:[512]:[128,64];tmap:weights:e4m3:[512,256,8]:[512,131072]:[128,128,1];mem:offsets[9];mem:out[M,256];i32:512;i32:17;i32:64;mem:rows_scale[M,4];mem:weights_scale[8,2,4];mem:row_scale[M]", when = "M>=17"}
// CHECK-SAME: {grid = "min(min(ceildiv(M,128)+min(floordiv(M,65),8),134217728)*2,resident)", kernel = 2 : i64, params = "tmap:rows:e4m3:[512,M]:[512]:[128,128];tmap:weights:e4m3:[512,256,8]:[512,131072]:[128,192,1];mem:offsets[9];mem:out[M,256];i32:512;i32:65;i32:2147483647;mem:rows_scale[M,4];mem:weights_scale[8,2,4];mem:row_scale[M]", when = "M>=65"}]
// CHECK-SAME: work = []}

// mxfp8: UE8M0 scale bytes (any alignment), rows_scale [M, K/32] and
// weights_scale [E, N, K/32].
// CHECK-LABEL: func.func @mxfp8(
// CHECK: plan = {args = [
// CHECK-SAME: {align = 16 : i64, dims = "M,512", dtype = "e4m3", name = "rows", role = "in"}
// CHECK-SAME: {align = 16 : i64, dims = "8,256,512", dtype = "e4m3", name = "weights", role = "in"}
// CHECK-SAME: {align = 4 : i64, dims = "9", dtype = "i32", name = "offsets", role = "in"}
// CHECK-SAME: {align = 16 : i64, dims = "M,256", dtype = "bf16", name = "out", role = "out"}
// CHECK-SAME: {align = 1 : i64, dims = "M,16", dtype = "e8m0", name = "rows_scale", role = "in"}
// CHECK-SAME: {align = 1 : i64, dims = "8,256,16", dtype = "e8m0", name = "weights_scale", role = "in"}]
// CHECK-SAME: checks = []
// CHECK-SAME: sizes = [
// CHECK-SAME: {max = "2147483647", min = "0", name = "M"}]
// CHECK-SAME: steps = [
// CHECK-SAME: {grid = "min(min(ceildiv(M,16)+min(M,8),8)*4,resident)", kernel = 0 : i64, params = "tmap:rows:e4m3:[512,M]:[512]:[128,16];tmap:weights:e4m3:[512,256,8]:[512,131072]:[128,64,1];mem:offsets[9];mem:out[M,256];i32:512;i32:1;i32:16;mem:rows_scale[M,16];mem:weights_scale[8,256,16]", when = "M>=1"}
// CHECK-SAME: {grid = "min(min(ceildiv(M,64)+min(floordiv(M,17),8),8)*2,resident)", kernel = 1 : i64, params = "tmap:rows:e4m3:[512,M]:[512]:[128,64];tmap:weights:e4m3:[512,256,8]:[512,131072]:[128,128,1];mem:offsets[9];mem:out[M,256];i32:512;i32:17;i32:64;mem:rows_scale[M,16];mem:weights_scale[8,256,16]", when = "M>=17"}
// CHECK-SAME: {grid = "min(min(ceildiv(M,128)+min(floordiv(M,65),8),134217728)*2,resident)", kernel = 2 : i64, params = "tmap:rows:e4m3:[512,M]:[512]:[128,128];tmap:weights:e4m3:[512,256,8]:[512,131072]:[128,128,1];mem:offsets[9];mem:out[M,256];i32:512;i32:65;i32:2147483647;mem:rows_scale[M,16];mem:weights_scale[8,256,16]", when = "M>=65"}]
// CHECK-SAME: work = []}

// A block-FP8 expert MLP whose gate-up quantizes its activation
// (out=f8E4M3FN): out is e4m3 [M, N/2] and out_scale f32 [M, N/256]; its
// work items are [1, 128] groups of the output columns, whatever tile_n.
// The down part has row_scale.
// CHECK-LABEL: func.func @fused_mlp_fp8(
// CHECK: plan = {args = [
// CHECK-SAME: {align = 16 : i64, dims = "M,512", dtype = "e4m3", name = "rows", role = "in"}
// CHECK-SAME: {align = 16 : i64, dims = "8,512,512", dtype = "e4m3", name = "weights", role = "in"}
// CHECK-SAME: {align = 4 : i64, dims = "9", dtype = "i32", name = "offsets", role = "in"}
// CHECK-SAME: {align = 16 : i64, dims = "M,256", dtype = "e4m3", name = "out", role = "out"}
// CHECK-SAME: {align = 4 : i64, dims = "M,4", dtype = "f32", name = "rows_scale", role = "in"}
// CHECK-SAME: {align = 4 : i64, dims = "8,4,4", dtype = "f32", name = "weights_scale", role = "in"}
// CHECK-SAME: {align = 4 : i64, dims = "M,2", dtype = "f32", name = "out_scale", role = "out"}]
// CHECK-SAME: checks = []
// CHECK-SAME: sizes = [
// CHECK-SAME: {max = "2147483647", min = "0", name = "M"}]
// CHECK-SAME: steps = [
// CHECK-SAME: {grid = "min(min(ceildiv(M,16)+min(M,8),8)*2,resident)", kernel = 0 : i64, params = "tmap:rows:e4m3:[512,M]:[512]:[128,16];tmap:weights:e4m3:[512,512,8]:[512,262144]:[128,32,1];mem:offsets[9];mem:out[M,256];i32:512;i32:1;i32:16;mem:rows_scale[M,4];mem:weights_scale[8,4,4];mem:out_scale[M,2]", when = "M>=1"}
// CHECK-SAME: {grid = "min(min(ceildiv(M,64)+min(floordiv(M,17),8),8)*2,resident)", kernel = 1 : i64, params = "tmap:rows:e4m3:[512,M]:[512]:[128,64];tmap:weights:e4m3:[512,512,8]:[512,262144]:[128,64,1];mem:offsets[9];mem:out[M,256];i32:512;i32:17;i32:64;mem:rows_scale[M,4];mem:weights_scale[8,4,4];mem:out_scale[M,2]", when = "M>=17"}
// CHECK-SAME: {grid = "min(min(ceildiv(M,128)+min(floordiv(M,65),8),134217728)*2,resident)", kernel = 2 : i64, params = "tmap:rows:e4m3:[512,M]:[512]:[128,128];tmap:weights:e4m3:[512,512,8]:[512,262144]:[128,64,1];mem:offsets[9];mem:out[M,256];i32:512;i32:65;i32:2147483647;mem:rows_scale[M,4];mem:weights_scale[8,4,4];mem:out_scale[M,2]", when = "M>=65"}]
// CHECK-SAME: work = []}
// CHECK-SAME: plan = {args = [
// CHECK-SAME: {align = 16 : i64, dims = "M,256", dtype = "e4m3", name = "rows", role = "in"}
// CHECK-SAME: {align = 16 : i64, dims = "8,512,256", dtype = "e4m3", name = "weights", role = "in"}
// CHECK-SAME: {align = 4 : i64, dims = "9", dtype = "i32", name = "offsets", role = "in"}
// CHECK-SAME: {align = 16 : i64, dims = "M,512", dtype = "bf16", name = "out", role = "out"}
// CHECK-SAME: {align = 4 : i64, dims = "M", dtype = "f32", name = "row_scale", role = "in"}
// CHECK-SAME: {align = 4 : i64, dims = "M,2", dtype = "f32", name = "rows_scale", role = "in"}
// CHECK-SAME: {align = 4 : i64, dims = "8,4,2", dtype = "f32", name = "weights_scale", role = "in"}]
// CHECK-SAME: checks = []
// CHECK-SAME: sizes = [
// CHECK-SAME: {max = "2147483647", min = "0", name = "M"}]
// CHECK-SAME: steps = [
// CHECK-SAME: {grid = "min(min(ceildiv(M,16)+min(M,8),8)*8,resident)", kernel = 0 : i64, params = "tmap:rows:e4m3:[256,M]:[256]:[128,16];tmap:weights:e4m3:[256,512,8]:[256,131072]:[128,64,1];mem:offsets[9];mem:out[M,512];i32:256;i32:1;i32:16;mem:rows_scale[M,2];mem:weights_scale[8,4,2];mem:row_scale[M]", when = "M>=1"}
// CHECK-SAME: {grid = "min(min(ceildiv(M,64)+min(floordiv(M,17),8),8)*4,resident)", kernel = 1 : i64, params = "tmap:rows:e4m3:[256,M]:[256]:[128,64];tmap:weights:e4m3:[256,512,8]:[256,131072]:[128,128,1];mem:offsets[9];mem:out[M,512];i32:256;i32:17;i32:64;mem:rows_scale[M,2];mem:weights_scale[8,4,2];mem:row_scale[M]", when = "M>=17"}
// CHECK-SAME: {grid = "min(min(ceildiv(M,128)+min(floordiv(M,65),8),134217728)*3,resident)", kernel = 2 : i64, params = "tmap:rows:e4m3:[256,M]:[256]:[128,128];tmap:weights:e4m3:[256,512,8]:[256,131072]:[128,192,1];mem:offsets[9];mem:out[M,512];i32:256;i32:65;i32:2147483647;mem:rows_scale[M,2];mem:weights_scale[8,4,2];mem:row_scale[M]", when = "M>=65"}]
// CHECK-SAME: work = []}

func.func @block_fp8(%xq: tensor<?x512xf8E4M3FN>, %xs: tensor<?x4xf32>,
                     %wq: tensor<8x256x512xf8E4M3FN>, %ws: tensor<8x2x4xf32>,
                     %off: tensor<9xi32>, %weight: tensor<?xf32>) -> tensor<?x256xbf16> {
  %x = moe.dequantize %xq, %xs from <f8E4M3FN, [1, 128], f32>
      : tensor<?x512xf8E4M3FN>, tensor<?x4xf32> -> tensor<?x512xbf16>
  %w = moe.dequantize %wq, %ws from <f8E4M3FN, [128, 128], f32>
      : tensor<8x256x512xf8E4M3FN>, tensor<8x2x4xf32> -> tensor<8x256x512xbf16>
  %y = moe.grouped_matmul %x, %w, %off scale %weight
      : (tensor<?x512xbf16>, tensor<8x256x512xbf16>, tensor<9xi32>, tensor<?xf32>) -> tensor<?x256xbf16>
  return %y : tensor<?x256xbf16>
}
func.func @mxfp8(%xq: tensor<?x512xf8E4M3FN>, %xs: tensor<?x16xf8E8M0FNU>,
                 %wq: tensor<8x256x512xf8E4M3FN>, %ws: tensor<8x256x16xf8E8M0FNU>,
                 %off: tensor<9xi32>) -> tensor<?x256xbf16> {
  %x = moe.dequantize %xq, %xs from <f8E4M3FN, [1, 32], f8E8M0FNU>
      : tensor<?x512xf8E4M3FN>, tensor<?x16xf8E8M0FNU> -> tensor<?x512xbf16>
  %w = moe.dequantize %wq, %ws from <f8E4M3FN, [1, 32], f8E8M0FNU>
      : tensor<8x256x512xf8E4M3FN>, tensor<8x256x16xf8E8M0FNU> -> tensor<8x256x512xbf16>
  %y = moe.grouped_matmul %x, %w, %off
      : (tensor<?x512xbf16>, tensor<8x256x512xbf16>, tensor<9xi32>) -> tensor<?x256xbf16>
  return %y : tensor<?x256xbf16>
}
func.func @fused_mlp_fp8(
    %xq: tensor<?x512xf8E4M3FN>, %xs: tensor<?x4xf32>,
    %w13q: tensor<8x512x512xf8E4M3FN>, %w13s: tensor<8x4x4xf32>,
    %w2q: tensor<8x512x256xf8E4M3FN>, %w2s: tensor<8x4x2xf32>,
    %off: tensor<9xi32>, %scale: tensor<?xf32>) -> tensor<?x512xbf16> {
  %x = moe.dequantize %xq, %xs from <f8E4M3FN, [1, 128], f32>
      : tensor<?x512xf8E4M3FN>, tensor<?x4xf32> -> tensor<?x512xbf16>
  %w13 = moe.dequantize %w13q, %w13s from <f8E4M3FN, [1, 128, 128], f32>
      : tensor<8x512x512xf8E4M3FN>, tensor<8x4x4xf32> -> tensor<8x512x512xbf16>
  %w2 = moe.dequantize %w2q, %w2s from <f8E4M3FN, [1, 128, 128], f32>
      : tensor<8x512x256xf8E4M3FN>, tensor<8x4x2xf32> -> tensor<8x512x256xbf16>
  %y = moe.expert_mlp silu %x, %off, %w13, %w2 scale %scale intermediate <f8E4M3FN, [1, 128], f32>
      : (tensor<?x512xbf16>, tensor<9xi32>, tensor<8x512x512xbf16>, tensor<8x512x256xbf16>, tensor<?xf32>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}
