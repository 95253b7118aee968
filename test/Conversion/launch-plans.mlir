// The launch plan (docs/launch-plans.md) --convert-moe-to-nvgpu writes into
// each moe.launch: the host program runtime/lib/Runtime.cpp runs for the
// entry today (contract version 6). Kernels written by hand, as in
// moe-to-nvgpu-config.mlir.
// RUN: moe-opt %s --convert-moe-to-nvgpu | FileCheck %s

// route.v1 (validateRoute): logits [T, E], the bias [E] only with bias=1,
// ids and weights [T, k]; one warp per token, 128 threads: ceildiv(T, 4)
// CTAs, at most 65535. A static T is the largest T (max_rows).
// CHECK-LABEL: func.func @route_bias(
// CHECK: plan = {args = [
// CHECK-SAME: {align = 4 : i64, dims = "T,256", dtype = "f32", name = "logits", role = "in"}
// CHECK-SAME: {align = 4 : i64, dims = "256", dtype = "f32", name = "bias", role = "in"}
// CHECK-SAME: {align = 4 : i64, dims = "T,8", dtype = "i32", name = "ids", role = "out"}
// CHECK-SAME: {align = 4 : i64, dims = "T,8", dtype = "f32", name = "weights", role = "out"}]
// CHECK-SAME: checks = []
// CHECK-SAME: sizes = [
// CHECK-SAME: {max = "2147483647", min = "0", name = "T"}]
// CHECK-SAME: steps = [
// CHECK-SAME: {grid = "min(ceildiv(T,4),65535)", kernel = 0 : i64, params = "mem:logits[T,256];mem:bias[256];mem:ids[T,8];mem:weights[T,8]", when = "1"}]
// CHECK-SAME: work = []}
// CHECK-LABEL: func.func @route_bf16(
// CHECK: plan = {args = [
// CHECK-SAME: {align = 2 : i64, dims = "T,64", dtype = "bf16", name = "logits", role = "in"}
// CHECK-SAME: {align = 4 : i64, dims = "T,4", dtype = "i32", name = "ids", role = "out"}
// CHECK-SAME: {align = 4 : i64, dims = "T,4", dtype = "f32", name = "weights", role = "out"}]
// CHECK-SAME: checks = []
// CHECK-SAME: sizes = [
// CHECK-SAME: {max = "16", min = "0", name = "T"}]
// CHECK-SAME: steps = [
// CHECK-SAME: {grid = "min(ceildiv(T,4),65535)", kernel = 0 : i64, params = "mem:logits[T,64];mem:ids[T,4];mem:weights[T,4]", when = "1"}]
// CHECK-SAME: work = []}

// unpermute.v2 (validateUnpermute): rows [M, H], slots [T, k], weights
// (weighted only), out [T, H]; T * ceildiv(H, 8 * 128) CTAs, at most 2^20.
// A dynamic H is a size, checked a multiple of 8.
// CHECK-LABEL: func.func @unpermute_weighted(
// CHECK: plan = {args = [
// CHECK-SAME: {align = 16 : i64, dims = "M,4096", dtype = "bf16", name = "rows", role = "in"}
// CHECK-SAME: {align = 8 : i64, dims = "T,2", dtype = "i64", name = "slots", role = "in"}
// CHECK-SAME: {align = 4 : i64, dims = "T,2", dtype = "f32", name = "weights", role = "in"}
// CHECK-SAME: {align = 16 : i64, dims = "T,4096", dtype = "bf16", name = "out", role = "out"}]
// CHECK-SAME: checks = []
// CHECK-SAME: sizes = [
// CHECK-SAME: {max = "9223372036854775807", min = "0", name = "M"}
// CHECK-SAME: {max = "2147483647", min = "0", name = "T"}]
// CHECK-SAME: steps = [
// CHECK-SAME: {grid = "min(T*4,1048576)", kernel = 0 : i64, params = "mem:rows[M,4096];mem:slots[T,2];mem:weights[T,2];mem:out[T,4096]", when = "1"}]
// CHECK-SAME: work = []}
// CHECK-LABEL: func.func @unpermute_dynamic_h(
// CHECK: plan = {args = [
// CHECK-SAME: {align = 16 : i64, dims = "M,H", dtype = "bf16", name = "rows", role = "in"}
// CHECK-SAME: {align = 4 : i64, dims = "T,8", dtype = "i32", name = "slots", role = "in"}
// CHECK-SAME: {align = 16 : i64, dims = "T,H", dtype = "bf16", name = "out", role = "out"}]
// CHECK-SAME: checks = [
// CHECK-SAME: {expr = "H==floordiv(H,8)*8", message = "H must be a multiple of 8 (rows are read in 16-byte vectors)"}]
// CHECK-SAME: sizes = [
// CHECK-SAME: {max = "9223372036854775807", min = "0", name = "M"}
// CHECK-SAME: {max = "2147483647", min = "0", name = "T"}
// CHECK-SAME: {max = "9223372036854775807", min = "8", name = "H"}]
// CHECK-SAME: steps = [
// CHECK-SAME: {grid = "min(T*ceildiv(H,1024),1048576)", kernel = 0 : i64, params = "mem:rows[M,H];mem:slots[T,8];mem:out[T,H]", when = "1"}]
// CHECK-SAME: work = []}

// permute.v2 (validatePermute, permuteWorkspace): the workspace is sources
// i32 [T*k], then counts i32 [chunks * E] from the next multiple of 256
// bytes; the count kernel runs only for more than one chunk of 4096 ids
// (index_counts); the gather takes 4 rows and 1024 columns per CTA.
// CHECK-LABEL: func.func @permute(
// CHECK: plan = {args = [
// CHECK-SAME: {align = 16 : i64, dims = "T,2048", dtype = "bf16", name = "tokens", role = "in"}
// CHECK-SAME: {align = 4 : i64, dims = "T,8", dtype = "i32", name = "ids", role = "in"}
// CHECK-SAME: {align = 16 : i64, dims = "T*8,2048", dtype = "bf16", name = "rows", role = "out"}
// CHECK-SAME: {align = 8 : i64, dims = "129", dtype = "i64", name = "offsets", role = "out"}
// CHECK-SAME: {align = 8 : i64, dims = "T,8", dtype = "i64", name = "slots", role = "out"}]
// CHECK-SAME: checks = [
// CHECK-SAME: {expr = "T*8<=2147483647", message = "T*k rows must be at most 2147483647"}]
// CHECK-SAME: sizes = [
// CHECK-SAME: {max = "2147483647", min = "0", name = "T"}]
// CHECK-SAME: steps = [
// CHECK-SAME: {grid = "ceildiv(T*8,4096)", kernel = 0 : i64, params = "mem:ids[T,8];mem:@counts[ceildiv(T*8,4096)*128]", when = "ceildiv(T*8,4096)>1"}
// CHECK-SAME: {grid = "ceildiv(T*8,4096)", kernel = 1 : i64, params = "mem:ids[T,8];mem:@counts[ceildiv(T*8,4096)*128];mem:offsets[129];mem:slots[T,8];mem:@sources[T*8]", when = "1"}
// CHECK-SAME: {grid = "min(ceildiv(T*8,4)*2,65535)", kernel = 2 : i64, params = "mem:tokens[T,2048];mem:@sources[T*8];mem:offsets[129];mem:rows[T*8,2048]", when = "1"}]
// CHECK-SAME: work = [
// CHECK-SAME: {align = 256 : i64, bytes = "T*8*4", name = "sources"}
// CHECK-SAME: {align = 256 : i64, bytes = "ceildiv(T*8,4096)*128*4", name = "counts"}]}
// CHECK-LABEL: func.func @permute_dynamic_h(
// CHECK: plan = {args = [
// CHECK-SAME: {align = 16 : i64, dims = "T,H", dtype = "bf16", name = "tokens", role = "in"}
// CHECK-SAME: {align = 4 : i64, dims = "T,2", dtype = "i32", name = "ids", role = "in"}
// CHECK-SAME: {align = 16 : i64, dims = "T*2,H", dtype = "bf16", name = "rows", role = "out"}
// CHECK-SAME: {align = 4 : i64, dims = "9", dtype = "i32", name = "offsets", role = "out"}
// CHECK-SAME: {align = 4 : i64, dims = "T,2", dtype = "i32", name = "slots", role = "out"}]
// CHECK-SAME: checks = [
// CHECK-SAME: {expr = "T*2<=2147483647", message = "T*k rows must be at most 2147483647"}
// CHECK-SAME: {expr = "H==floordiv(H,8)*8", message = "H must be a multiple of 8 (rows are copied in 16-byte vectors)"}]
// CHECK-SAME: sizes = [
// CHECK-SAME: {max = "2147483647", min = "0", name = "T"}
// CHECK-SAME: {max = "9223372036854775807", min = "8", name = "H"}]
// CHECK-SAME: steps = [
// CHECK-SAME: {grid = "ceildiv(T*2,4096)", kernel = 0 : i64, params = "mem:ids[T,2];mem:@counts[ceildiv(T*2,4096)*8]", when = "ceildiv(T*2,4096)>1"}
// CHECK-SAME: {grid = "ceildiv(T*2,4096)", kernel = 1 : i64, params = "mem:ids[T,2];mem:@counts[ceildiv(T*2,4096)*8];mem:offsets[9];mem:slots[T,2];mem:@sources[T*2]", when = "1"}
// CHECK-SAME: {grid = "min(ceildiv(T*2,4)*ceildiv(H,1024),65535)", kernel = 2 : i64, params = "mem:tokens[T,H];mem:@sources[T*2];mem:offsets[9];mem:rows[T*2,H]", when = "1"}]
// CHECK-SAME: work = [
// CHECK-SAME: {align = 256 : i64, bytes = "T*2*4", name = "sources"}
// CHECK-SAME: {align = 256 : i64, bytes = "ceildiv(T*2,4096)*8*4", name = "counts"}]}

// quantize.v1 (validateQuantize): the input as [batch * R, C]; [1, B]
// blocks: 32 elements per thread (256 threads), [128, 128]: a CTA per
// block; at most 65535 CTAs. Static sizes are numbers (the runtime wants
// them exact), a rank-3 input's dynamic batch a size E; e5m2 values and
// e8m0 scales (1-byte aligned).
// CHECK-LABEL: func.func @quantize_groups(
// CHECK: plan = {args = [
// CHECK-SAME: {align = 16 : i64, dims = "R,7168", dtype = "bf16", name = "input", role = "in"}
// CHECK-SAME: {align = 16 : i64, dims = "R,7168", dtype = "e4m3", name = "values", role = "out"}
// CHECK-SAME: {align = 4 : i64, dims = "R,56", dtype = "f32", name = "scales", role = "out"}]
// CHECK-SAME: checks = []
// CHECK-SAME: sizes = [
// CHECK-SAME: {max = "2147483647", min = "0", name = "R"}]
// CHECK-SAME: steps = [
// CHECK-SAME: {grid = "min(ceildiv(R*7168,8192),65535)", kernel = 0 : i64, params = "mem:input[R,7168];mem:values[R,7168];mem:scales[R,56]", when = "1"}]
// CHECK-SAME: work = []}
// CHECK-LABEL: func.func @quantize_blocks(
// CHECK: plan = {args = [
// CHECK-SAME: {align = 16 : i64, dims = "8,512,256", dtype = "bf16", name = "input", role = "in"}
// CHECK-SAME: {align = 16 : i64, dims = "8,512,256", dtype = "e4m3", name = "values", role = "out"}
// CHECK-SAME: {align = 4 : i64, dims = "8,4,2", dtype = "f32", name = "scales", role = "out"}]
// CHECK-SAME: checks = []
// CHECK-SAME: sizes = []
// CHECK-SAME: steps = [
// CHECK-SAME: {grid = "64", kernel = 0 : i64, params = "mem:input[4096,256];mem:values[4096,256];mem:scales[32,2]", when = "1"}]
// CHECK-SAME: work = []}
// CHECK-LABEL: func.func @quantize_mx(
// CHECK: plan = {args = [
// CHECK-SAME: {align = 16 : i64, dims = "E,64,256", dtype = "f32", name = "input", role = "in"}
// CHECK-SAME: {align = 16 : i64, dims = "E,64,256", dtype = "e5m2", name = "values", role = "out"}
// CHECK-SAME: {align = 1 : i64, dims = "E,64,8", dtype = "e8m0", name = "scales", role = "out"}]
// CHECK-SAME: checks = []
// CHECK-SAME: sizes = [
// CHECK-SAME: {max = "9223372036854775807", min = "1", name = "E"}]
// CHECK-SAME: steps = [
// CHECK-SAME: {grid = "min(ceildiv(E*64*256,8192),65535)", kernel = 0 : i64, params = "mem:input[E*64,256];mem:values[E*64,256];mem:scales[E*64,8]", when = "1"}]
// CHECK-SAME: work = []}

// grouped_matmul.v3 (validateGroupedMatmul, prepareGroupedMatmul,
// launchGroupedMatmul): per kernel, the rows and weights tensor maps (dims
// innermost first, byte strides, box {tile_k, tile_m} and {tile_k, tile_n,
// 1}), offsets [E + 1], out [M, C], K, rows_min, rows_max; the grid
// min(work, resident), work = slots * column tiles; a kernel runs when
// M >= rows_min. The cluster form's work items are pairs of column tiles
// and its grid 2 * min(work, resident clusters).
// CHECK-LABEL: func.func @gemm_cluster(
// CHECK: plan = {args = [
// CHECK-SAME: {align = 16 : i64, dims = "M,256", dtype = "bf16", name = "rows", role = "in"}
// CHECK-SAME: {align = 16 : i64, dims = "8,512,256", dtype = "bf16", name = "weights", role = "in"}
// CHECK-SAME: {align = 4 : i64, dims = "9", dtype = "i32", name = "offsets", role = "in"}
// CHECK-SAME: {align = 16 : i64, dims = "M,512", dtype = "bf16", name = "out", role = "out"}]
// CHECK-SAME: checks = []
// CHECK-SAME: sizes = [
// CHECK-SAME: {max = "2147483647", min = "0", name = "M"}]
// CHECK-SAME: steps = [
// CHECK-SAME: {grid = "min(min(ceildiv(M,16)+min(M,8),8)*8,resident)", kernel = 0 : i64, params = "tmap:rows:bf16:[256,M]:[512]:[64,16];tmap:weights:bf16:[256,512,8]:[512,262144]:[64,64,1];mem:offsets[9];mem:out[M,512];i32:256;i32:1;i32:16", when = "M>=1"}
// CHECK-SAME: {grid = "2*min(min(ceildiv(M,128)+min(floordiv(M,17),8),134217728)*2,resident)", kernel = 1 : i64, params = "tmap:rows:bf16:[256,M]:[512]:[64,128];tmap:weights:bf16:[256,512,8]:[512,262144]:[64,128,1];mem:offsets[9];mem:out[M,512];i32:256;i32:17;i32:2147483647", when = "M>=17"}]
// CHECK-SAME: work = []}
// Dynamic N and K are sizes (K at least 8, a multiple of 8), with the TMA
// stride limit on one expert's weights.
// CHECK-LABEL: func.func @gemm_dynamic(
// CHECK: plan = {args = [
// CHECK-SAME: {align = 16 : i64, dims = "M,K", dtype = "bf16", name = "rows", role = "in"}
// CHECK-SAME: {align = 16 : i64, dims = "8,N,K", dtype = "bf16", name = "weights", role = "in"}
// CHECK-SAME: {align = 8 : i64, dims = "9", dtype = "i64", name = "offsets", role = "in"}
// CHECK-SAME: {align = 16 : i64, dims = "M,N", dtype = "bf16", name = "out", role = "out"}]
// CHECK-SAME: checks = [
// CHECK-SAME: {expr = "K==floordiv(K,8)*8", message = "K must be a multiple of 8 (TMA row pitch must be a multiple of 16 bytes)"}
// CHECK-SAME: {expr = "N*K*2<1099511627776", message = "N*K bytes per expert must stay below the TMA stride limit of 2^40"}]
// CHECK-SAME: sizes = [
// CHECK-SAME: {max = "2147483647", min = "0", name = "M"}
// CHECK-SAME: {max = "2147483647", min = "1", name = "N"}
// CHECK-SAME: {max = "2147483647", min = "8", name = "K"}]
// CHECK-SAME: steps = [
// CHECK-SAME: {grid = "min(min(ceildiv(M,64)+min(M,8),268435456)*ceildiv(N,128),resident)", kernel = 0 : i64, params = "tmap:rows:bf16:[K,M]:[K*2]:[64,64];tmap:weights:bf16:[K,N,8]:[K*2,N*K*2]:[64,128,1];mem:offsets[9];mem:out[M,N];i32:K;i32:1;i32:2147483647", when = "M>=1"}]
// CHECK-SAME: work = []}
// An expert MLP's parts: the swiglu gate_up (out [M, N/2], the weights box
// tile_n/2 rows, bf16 bias [E, N]), then the down GEMM with row_scale [M]
// and an f32 bias, in that parameter order.
// CHECK-LABEL: func.func @gptoss_mlp(
// CHECK: plan = {args = [
// CHECK-SAME: {align = 16 : i64, dims = "M,256", dtype = "bf16", name = "rows", role = "in"}
// CHECK-SAME: {align = 16 : i64, dims = "8,1024,256", dtype = "bf16", name = "weights", role = "in"}
// CHECK-SAME: {align = 8 : i64, dims = "9", dtype = "i64", name = "offsets", role = "in"}
// CHECK-SAME: {align = 16 : i64, dims = "M,512", dtype = "bf16", name = "out", role = "out"}
// CHECK-SAME: {align = 2 : i64, dims = "8,1024", dtype = "bf16", name = "bias", role = "in"}]
// CHECK-SAME: checks = []
// CHECK-SAME: sizes = [
// CHECK-SAME: {max = "2147483647", min = "0", name = "M"}]
// CHECK-SAME: steps = [
// CHECK-SAME: {grid = "min(min(ceildiv(M,64)+min(M,8),268435456)*8,resident)", kernel = 0 : i64, params = "tmap:rows:bf16:[256,M]:[512]:[64,64];tmap:weights:bf16:[256,1024,8]:[512,524288]:[64,64,1];mem:offsets[9];mem:out[M,512];i32:256;i32:1;i32:2147483647;mem:bias[8,1024]", when = "M>=1"}]
// CHECK-SAME: work = []}
// CHECK-SAME: plan = {args = [
// CHECK-SAME: {align = 16 : i64, dims = "M,512", dtype = "bf16", name = "rows", role = "in"}
// CHECK-SAME: {align = 16 : i64, dims = "8,256,512", dtype = "bf16", name = "weights", role = "in"}
// CHECK-SAME: {align = 8 : i64, dims = "9", dtype = "i64", name = "offsets", role = "in"}
// CHECK-SAME: {align = 16 : i64, dims = "M,256", dtype = "bf16", name = "out", role = "out"}
// CHECK-SAME: {align = 4 : i64, dims = "M", dtype = "f32", name = "row_scale", role = "in"}
// CHECK-SAME: {align = 4 : i64, dims = "8,256", dtype = "f32", name = "bias", role = "in"}]
// CHECK-SAME: checks = []
// CHECK-SAME: sizes = [
// CHECK-SAME: {max = "2147483647", min = "0", name = "M"}]
// CHECK-SAME: steps = [
// CHECK-SAME: {grid = "min(min(ceildiv(M,64)+min(M,8),268435456)*2,resident)", kernel = 0 : i64, params = "tmap:rows:bf16:[512,M]:[1024]:[64,64];tmap:weights:bf16:[512,256,8]:[1024,262144]:[64,128,1];mem:offsets[9];mem:out[M,256];i32:512;i32:1;i32:2147483647;mem:row_scale[M];mem:bias[8,256]", when = "M>=1"}]
// CHECK-SAME: work = []}

func.func @route_bias(%logits: tensor<?x256xf32>, %b: tensor<256xf32>) -> (tensor<?x8xi32>, tensor<?x8xf32>) {
  %ids, %w = moe.route sigmoid_topk %logits bias %b top 8 groups 8 select 4 renormalize scale 2.5
      {moe.kernels = #moe.kernel<chip = "sm_90a">}
      : (tensor<?x256xf32>, tensor<256xf32>) -> (tensor<?x8xi32>, tensor<?x8xf32>)
  return %ids, %w : tensor<?x8xi32>, tensor<?x8xf32>
}
func.func @route_bf16(%logits: tensor<16x64xbf16>) -> (tensor<16x4xi32>, tensor<16x4xf32>) {
  %ids, %w = moe.route softmax_topk %logits top 4 {moe.kernels = #moe.kernel<chip = "sm_90a">}
      : (tensor<16x64xbf16>) -> (tensor<16x4xi32>, tensor<16x4xf32>)
  return %ids, %w : tensor<16x4xi32>, tensor<16x4xf32>
}
func.func @unpermute_weighted(%rows: tensor<?x4096xbf16>, %slots: tensor<?x2xi64>, %w: tensor<?x2xf32>) -> tensor<?x4096xbf16> {
  %y = moe.unpermute %rows, %slots weights %w {moe.kernels = #moe.kernel<chip = "sm_90a">}
      : (tensor<?x4096xbf16>, tensor<?x2xi64>, tensor<?x2xf32>) -> tensor<?x4096xbf16>
  return %y : tensor<?x4096xbf16>
}
func.func @unpermute_dynamic_h(%rows: tensor<?x?xbf16>, %slots: tensor<?x8xi32>) -> tensor<?x?xbf16> {
  %y = moe.unpermute %rows, %slots {moe.kernels = #moe.kernel<chip = "sm_90a">}
      : (tensor<?x?xbf16>, tensor<?x8xi32>) -> tensor<?x?xbf16>
  return %y : tensor<?x?xbf16>
}
func.func @permute(%x: tensor<?x2048xbf16>, %ids: tensor<?x8xi32>) -> (tensor<?x2048xbf16>, tensor<129xi64>, tensor<?x8xi64>) {
  %rows, %offsets, %slots = moe.permute %x, %ids {moe.kernels = #moe.permute_kernels<chip = "sm_90a">}
      : (tensor<?x2048xbf16>, tensor<?x8xi32>) -> (tensor<?x2048xbf16>, tensor<129xi64>, tensor<?x8xi64>)
  return %rows, %offsets, %slots : tensor<?x2048xbf16>, tensor<129xi64>, tensor<?x8xi64>
}
func.func @permute_dynamic_h(%x: tensor<?x?xbf16>, %ids: tensor<?x2xi32>) -> (tensor<?x?xbf16>, tensor<9xi32>, tensor<?x2xi32>) {
  %rows, %offsets, %slots = moe.permute %x, %ids {moe.kernels = #moe.permute_kernels<chip = "sm_90a">}
      : (tensor<?x?xbf16>, tensor<?x2xi32>) -> (tensor<?x?xbf16>, tensor<9xi32>, tensor<?x2xi32>)
  return %rows, %offsets, %slots : tensor<?x?xbf16>, tensor<9xi32>, tensor<?x2xi32>
}
func.func @quantize_groups(%x: tensor<?x7168xbf16>) -> (tensor<?x7168xf8E4M3FN>, tensor<?x56xf32>) {
  %q, %s = moe.quantize %x to <f8E4M3FN, [1, 128], f32> {moe.kernels = #moe.kernel<chip = "sm_90a">}
      : tensor<?x7168xbf16> -> tensor<?x7168xf8E4M3FN>, tensor<?x56xf32>
  return %q, %s : tensor<?x7168xf8E4M3FN>, tensor<?x56xf32>
}
func.func @quantize_blocks(%w: tensor<8x512x256xbf16>) -> (tensor<8x512x256xf8E4M3FN>, tensor<8x4x2xf32>) {
  %q, %s = moe.quantize %w to <f8E4M3FN, [128, 128], f32> {moe.kernels = #moe.kernel<chip = "sm_90a">}
      : tensor<8x512x256xbf16> -> tensor<8x512x256xf8E4M3FN>, tensor<8x4x2xf32>
  return %q, %s : tensor<8x512x256xf8E4M3FN>, tensor<8x4x2xf32>
}
func.func @quantize_mx(%x: tensor<?x64x256xf32>) -> (tensor<?x64x256xf8E5M2>, tensor<?x64x8xf8E8M0FNU>) {
  %q, %s = moe.quantize %x to <f8E5M2, [1, 1, 32], f8E8M0FNU> {moe.kernels = #moe.kernel<chip = "sm_90a">}
      : tensor<?x64x256xf32> -> tensor<?x64x256xf8E5M2>, tensor<?x64x8xf8E8M0FNU>
  return %q, %s : tensor<?x64x256xf8E5M2>, tensor<?x64x8xf8E8M0FNU>
}
#gemm = #moe.gemm_kernels<chip = "sm_90a", forms = [
    #moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 64, tile_n = 128, tile_k = 64, stages = 4>]>
func.func @gemm_cluster(%rows: tensor<?x256xbf16>, %w: tensor<8x512x256xbf16>, %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  %y = moe.grouped_matmul %rows, %w, %off {moe.kernels = #moe.gemm_kernels<chip = "sm_90a", forms = [
      #moe.gemm_form<rows_min = 1, rows_max = 16, tile_m = 16, tile_n = 64, tile_k = 64, stages = 4, swap_ab = true>,
      #moe.gemm_form<rows_min = 17, rows_max = 2147483647, tile_m = 128, tile_n = 128, tile_k = 64, stages = 4, cluster = 2>]>}
      : (tensor<?x256xbf16>, tensor<8x512x256xbf16>, tensor<9xi32>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}
func.func @gemm_dynamic(%rows: tensor<?x?xbf16>, %w: tensor<8x?x?xbf16>, %off: tensor<9xi64>) -> tensor<?x?xbf16> {
  %y = moe.grouped_matmul %rows, %w, %off {moe.kernels = #moe.gemm_kernels<chip = "sm_90a", forms = [
      #moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 64, tile_n = 128, tile_k = 64, stages = 4>]>}
      : (tensor<?x?xbf16>, tensor<8x?x?xbf16>, tensor<9xi64>) -> tensor<?x?xbf16>
  return %y : tensor<?x?xbf16>
}
func.func @gptoss_mlp(%rows: tensor<?x256xbf16>, %off: tensor<9xi64>, %w13: tensor<8x1024x256xbf16>,
                      %w2: tensor<8x256x512xbf16>, %b13: tensor<8x1024xbf16>, %b2: tensor<8x256xf32>,
                      %s: tensor<?xf32>) -> tensor<?x256xbf16> {
  %y = moe.expert_mlp gptoss %rows, %off, %w13, %w2 gate_up_bias %b13 down_bias %b2 scale %s
      {moe.kernels = #moe.expert_mlp_kernels<gate_up = #gemm, down = #gemm>}
      : (tensor<?x256xbf16>, tensor<9xi64>, tensor<8x1024x256xbf16>, tensor<8x256x512xbf16>, tensor<8x1024xbf16>, tensor<8x256xf32>, tensor<?xf32>)
      -> tensor<?x256xbf16>
  return %y : tensor<?x256xbf16>
}
