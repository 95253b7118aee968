// A layer's launch plan (docs/launch-plans.md): its parts' steps, each
// naming its part, in moeLayer's order, on the layer's arguments and on
// workspace slices laid out as runtime/lib/Runtime.cpp's layerWorkspace
// lays them out (each from a multiple of 256 bytes: ids, weights, offsets,
// slots, the permute's sources and counts, rows, inter; layer_fp8.v1 also
// rows_q, rows_scale, inter_q, inter_scale). Each part's own checks on the
// layer's sizes (those not decided by them) come with the part's name; a
// GEMM kernel runs only when an expert can have rows_min rows: M and T at
// least rows_min. --moe-extract-device-code carries every plan into the
// manifest unchanged.
// RUN: moe-opt %s --moe-fuse-experts --moe-fuse-layer --moe-select-kernels --convert-moe-to-nvgpu | FileCheck %s --check-prefix=BF16
// RUN: moe-opt %s --moe-quantize="scope=weights+activations" --moe-fuse-experts --moe-fuse-layer --moe-select-kernels --convert-moe-to-nvgpu | FileCheck %s --check-prefix=FP8
// RUN: moe-opt %s --moe-quantize="scope=weights+activations" --moe-fuse-experts --moe-fuse-layer --moe-select-kernels --convert-moe-to-nvgpu --moe-extract-device-code | FileCheck %s --check-prefix=MANIFEST

// layer.v1: the gathered rows are the down GEMM's output too.
// BF16-LABEL: func.func @small(
// BF16: plan = {args = [
// BF16-SAME: {align = 16 : i64, dims = "T,256", dtype = "bf16", name = "tokens", role = "in"}
// BF16-SAME: {align = 4 : i64, dims = "T,4", dtype = "f32", name = "logits", role = "in"}
// BF16-SAME: {align = 16 : i64, dims = "4,768,256", dtype = "bf16", name = "gate_up_weights", role = "in"}
// BF16-SAME: {align = 16 : i64, dims = "4,256,384", dtype = "bf16", name = "down_weights", role = "in"}
// BF16-SAME: {align = 16 : i64, dims = "T,256", dtype = "bf16", name = "out", role = "out"}]
// BF16-SAME: checks = [
// BF16-SAME: {expr = "T*2<=2147483647", message = "T*k rows must be at most 2147483647"}
// BF16-SAME: {expr = "T*2<=2147483647", message = "permute step: T*k rows must be at most 2147483647"}
// BF16-SAME: {expr = "T*2<=2147483647", message = "gate_up step: M must be at most 2147483647"}
// BF16-SAME: {expr = "T*2<=2147483647", message = "down step: M must be at most 2147483647"}]
// BF16-SAME: sizes = [
// BF16-SAME: {max = "2147483647", min = "0", name = "T"}]
// BF16-SAME: steps = [
// BF16-SAME: {grid = "min(ceildiv(T,4),65535)", kernel = 0 : i64, params = "mem:logits[T,4];mem:@ids[T,2];mem:@weights[T,2]", part = "route", when = "1"}
// BF16-SAME: {grid = "ceildiv(T*2,4096)", kernel = 0 : i64, params = "mem:@ids[T,2];mem:@counts[ceildiv(T*2,4096)*4]", part = "permute", when = "ceildiv(T*2,4096)>1"}
// BF16-SAME: {grid = "ceildiv(T*2,4096)", kernel = 1 : i64, params = "mem:@ids[T,2];mem:@counts[ceildiv(T*2,4096)*4];mem:@offsets[5];mem:@slots[T,2];mem:@sources[T*2]", part = "permute", when = "1"}
// BF16-SAME: {grid = "min(ceildiv(T*2,4),65535)", kernel = 2 : i64, params = "mem:tokens[T,256];mem:@sources[T*2];mem:@offsets[5];mem:@rows[T*2,256]", part = "permute", when = "1"}
// BF16-SAME: {grid = "min(min(ceildiv(T*2,16)+min(T*2,4),4)*12,resident)", kernel = 0 : i64, params = "tmap:@rows:bf16:[256,T*2]:[512]:[64,16];tmap:gate_up_weights:bf16:[256,768,4]:[512,393216]:[64,32,1];mem:@offsets[5];mem:@inter[T*2,384];i32:256;i32:1;i32:16", part = "gate_up", when = "T*2>=1&&T>=1"}
// BF16-SAME: {grid = "min(min(ceildiv(T*2,64)+min(floordiv(T*2,17),4),4)*3,resident)", kernel = 1 : i64, params = "tmap:@rows:bf16:[256,T*2]:[512]:[64,64];tmap:gate_up_weights:bf16:[256,768,4]:[512,393216]:[64,128,1];mem:@offsets[5];mem:@inter[T*2,384];i32:256;i32:17;i32:64", part = "gate_up", when = "T*2>=17&&T>=17"}
// BF16-SAME: {grid = "min(min(ceildiv(T*2,128)+min(floordiv(T*2,65),4),67108864)*3,resident)", kernel = 2 : i64, params = "tmap:@rows:bf16:[256,T*2]:[512]:[64,128];tmap:gate_up_weights:bf16:[256,768,4]:[512,393216]:[64,128,1];mem:@offsets[5];mem:@inter[T*2,384];i32:256;i32:65;i32:2147483647", part = "gate_up", when = "T*2>=65&&T>=65"}
// BF16-SAME: {grid = "min(min(ceildiv(T*2,16)+min(T*2,4),4)*4,resident)", kernel = 0 : i64, params = "tmap:@inter:bf16:[384,T*2]:[768]:[64,16];tmap:down_weights:bf16:[384,256,4]:[768,196608]:[64,64,1];mem:@offsets[5];mem:@rows[T*2,256];i32:384;i32:1;i32:16", part = "down", when = "T*2>=1&&T>=1"}
// BF16-SAME: {grid = "min(min(ceildiv(T*2,64)+min(floordiv(T*2,17),4),4),resident)", kernel = 1 : i64, params = "tmap:@inter:bf16:[384,T*2]:[768]:[64,64];tmap:down_weights:bf16:[384,256,4]:[768,196608]:[64,256,1];mem:@offsets[5];mem:@rows[T*2,256];i32:384;i32:17;i32:64", part = "down", when = "T*2>=17&&T>=17"}
// BF16-SAME: {grid = "min(min(ceildiv(T*2,128)+min(floordiv(T*2,65),4),67108864),resident)", kernel = 2 : i64, params = "tmap:@inter:bf16:[384,T*2]:[768]:[64,128];tmap:down_weights:bf16:[384,256,4]:[768,196608]:[64,256,1];mem:@offsets[5];mem:@rows[T*2,256];i32:384;i32:65;i32:2147483647", part = "down", when = "T*2>=65&&T>=65"}
// BF16-SAME: {grid = "min(T,1048576)", kernel = 0 : i64, params = "mem:@rows[T*2,256];mem:@slots[T,2];mem:@weights[T,2];mem:out[T,256]", part = "unpermute", when = "1"}]
// BF16-SAME: work = [
// BF16-SAME: {align = 256 : i64, bytes = "T*2*4", name = "ids"}
// BF16-SAME: {align = 256 : i64, bytes = "T*2*4", name = "weights"}
// BF16-SAME: {align = 256 : i64, bytes = "40", name = "offsets"}
// BF16-SAME: {align = 256 : i64, bytes = "T*2*8", name = "slots"}
// BF16-SAME: {align = 256 : i64, bytes = "T*2*4", name = "sources"}
// BF16-SAME: {align = 256 : i64, bytes = "ceildiv(T*2,4096)*4*4", name = "counts"}
// BF16-SAME: {align = 256 : i64, bytes = "T*2*256*2", name = "rows"}
// BF16-SAME: {align = 256 : i64, bytes = "T*2*384*2", name = "inter"}]}

// layer_fp8.v1 (the defaults): the permute's gather, or from T = 128 on its
// scatter, writes rows_q and rows_scale; a quantize step makes the gate-up
// output the down GEMM's e4m3 rows. Then the parts' own plans, and those of
// the weights' prepack quantizes.
// FP8-LABEL: func.func @small(
// FP8: plan = {args = [
// FP8-SAME: {align = 16 : i64, dims = "T,256", dtype = "bf16", name = "tokens", role = "in"}
// FP8-SAME: {align = 4 : i64, dims = "T,4", dtype = "f32", name = "logits", role = "in"}
// FP8-SAME: {align = 16 : i64, dims = "4,768,256", dtype = "e4m3", name = "gate_up_weights", role = "in"}
// FP8-SAME: {align = 16 : i64, dims = "4,256,384", dtype = "e4m3", name = "down_weights", role = "in"}
// FP8-SAME: {align = 16 : i64, dims = "T,256", dtype = "bf16", name = "out", role = "out"}
// FP8-SAME: {align = 4 : i64, dims = "4,6,2", dtype = "f32", name = "gate_up_weights_scale", role = "in"}
// FP8-SAME: {align = 4 : i64, dims = "4,2,3", dtype = "f32", name = "down_weights_scale", role = "in"}]
// FP8-SAME: checks = [
// FP8-SAME: {expr = "T*2<=2147483647", message = "T*k rows must be at most 2147483647"}
// FP8-SAME: {expr = "T*2<=2147483647", message = "permute step: T*k rows must be at most 2147483647"}
// FP8-SAME: {expr = "T*2<=2147483647", message = "gate_up step: M must be at most 2147483647"}
// FP8-SAME: {expr = "T*2<=2147483647", message = "intermediate step: R must be at most 2147483647"}
// FP8-SAME: {expr = "T*2<=2147483647", message = "down step: M must be at most 2147483647"}]
// FP8-SAME: sizes = [
// FP8-SAME: {max = "2147483647", min = "0", name = "T"}]
// FP8-SAME: steps = [
// FP8-SAME: {grid = "min(ceildiv(T,4),65535)", kernel = 0 : i64, params = "mem:logits[T,4];mem:@ids[T,2];mem:@weights[T,2]", part = "route", when = "1"}
// FP8-SAME: {grid = "ceildiv(T*2,4096)", kernel = 0 : i64, params = "mem:@ids[T,2];mem:@counts[ceildiv(T*2,4096)*4]", part = "permute", when = "ceildiv(T*2,4096)>1"}
// FP8-SAME: {grid = "ceildiv(T*2,4096)", kernel = 1 : i64, params = "mem:@ids[T,2];mem:@counts[ceildiv(T*2,4096)*4];mem:@offsets[5];mem:@slots[T,2];mem:@sources[T*2]", part = "permute", when = "1"}
// FP8-SAME: {grid = "min(ceildiv(T*2,4),65535)", kernel = 2 : i64, params = "mem:tokens[T,256];mem:@sources[T*2];mem:@offsets[5];mem:@rows_q[T*2,256];mem:@rows_scale[T*2,2]", part = "permute", when = "T<128"}
// FP8-SAME: {grid = "min(ceildiv(T,4),65535)", kernel = 3 : i64, params = "mem:tokens[T,256];mem:@slots[T,2];mem:@offsets[5];mem:@rows_q[T*2,256];mem:@rows_scale[T*2,2]", part = "permute", when = "T>=128"}
// FP8-SAME: {grid = "min(min(ceildiv(T*2,16)+min(T*2,4),4)*12,resident)", kernel = 0 : i64, params = "tmap:@rows_q:e4m3:[256,T*2]:[256]:[128,16];tmap:gate_up_weights:e4m3:[256,768,4]:[256,196608]:[128,32,1];mem:@offsets[5];mem:@inter[T*2,384];i32:256;i32:1;i32:16;mem:@rows_scale[T*2,2];mem:gate_up_weights_scale[4,6,2]", part = "gate_up", when = "T*2>=1&&T>=1"}
// FP8-SAME: {grid = "min(min(ceildiv(T*2,64)+min(floordiv(T*2,17),4),4)*6,resident)", kernel = 1 : i64, params = "tmap:@rows_q:e4m3:[256,T*2]:[256]:[128,64];tmap:gate_up_weights:e4m3:[256,768,4]:[256,196608]:[128,64,1];mem:@offsets[5];mem:@inter[T*2,384];i32:256;i32:17;i32:64;mem:@rows_scale[T*2,2];mem:gate_up_weights_scale[4,6,2]", part = "gate_up", when = "T*2>=17&&T>=17"}
// FP8-SAME: {grid = "min(min(ceildiv(T*2,128)+min(floordiv(T*2,65),4),67108864)*4,resident)", kernel = 2 : i64, params = "tmap:@rows_q:e4m3:[256,T*2]:[256]:[128,128];tmap:gate_up_weights:e4m3:[256,768,4]:[256,196608]:[128,96,1];mem:@offsets[5];mem:@inter[T*2,384];i32:256;i32:65;i32:2147483647;mem:@rows_scale[T*2,2];mem:gate_up_weights_scale[4,6,2]", part = "gate_up", when = "T*2>=65&&T>=65"}
// FP8-SAME: {grid = "min(ceildiv(T*2*384,8192),65535)", kernel = 0 : i64, params = "mem:@inter[T*2,384];mem:@inter_q[T*2,384];mem:@inter_scale[T*2,3]", part = "intermediate", when = "1"}
// FP8-SAME: {grid = "min(min(ceildiv(T*2,16)+min(T*2,4),4)*4,resident)", kernel = 0 : i64, params = "tmap:@inter_q:e4m3:[384,T*2]:[384]:[128,16];tmap:down_weights:e4m3:[384,256,4]:[384,98304]:[128,64,1];mem:@offsets[5];mem:@rows[T*2,256];i32:384;i32:1;i32:16;mem:@inter_scale[T*2,3];mem:down_weights_scale[4,2,3]", part = "down", when = "T*2>=1&&T>=1"}
// FP8-SAME: {grid = "min(min(ceildiv(T*2,64)+min(floordiv(T*2,17),4),4)*2,resident)", kernel = 1 : i64, params = "tmap:@inter_q:e4m3:[384,T*2]:[384]:[128,64];tmap:down_weights:e4m3:[384,256,4]:[384,98304]:[128,128,1];mem:@offsets[5];mem:@rows[T*2,256];i32:384;i32:17;i32:64;mem:@inter_scale[T*2,3];mem:down_weights_scale[4,2,3]", part = "down", when = "T*2>=17&&T>=17"}
// FP8-SAME: {grid = "min(min(ceildiv(T*2,128)+min(floordiv(T*2,65),4),67108864)*2,resident)", kernel = 2 : i64, params = "tmap:@inter_q:e4m3:[384,T*2]:[384]:[128,128];tmap:down_weights:e4m3:[384,256,4]:[384,98304]:[128,192,1];mem:@offsets[5];mem:@rows[T*2,256];i32:384;i32:65;i32:2147483647;mem:@inter_scale[T*2,3];mem:down_weights_scale[4,2,3]", part = "down", when = "T*2>=65&&T>=65"}
// FP8-SAME: {grid = "min(T,1048576)", kernel = 0 : i64, params = "mem:@rows[T*2,256];mem:@slots[T,2];mem:@weights[T,2];mem:out[T,256]", part = "unpermute", when = "1"}]
// FP8-SAME: work = [
// FP8-SAME: {align = 256 : i64, bytes = "T*2*4", name = "ids"}
// FP8-SAME: {align = 256 : i64, bytes = "T*2*4", name = "weights"}
// FP8-SAME: {align = 256 : i64, bytes = "40", name = "offsets"}
// FP8-SAME: {align = 256 : i64, bytes = "T*2*8", name = "slots"}
// FP8-SAME: {align = 256 : i64, bytes = "T*2*4", name = "sources"}
// FP8-SAME: {align = 256 : i64, bytes = "ceildiv(T*2,4096)*4*4", name = "counts"}
// FP8-SAME: {align = 256 : i64, bytes = "T*2*256*2", name = "rows"}
// FP8-SAME: {align = 256 : i64, bytes = "T*2*384*2", name = "inter"}
// FP8-SAME: {align = 256 : i64, bytes = "T*2*256", name = "rows_q"}
// FP8-SAME: {align = 256 : i64, bytes = "T*2*2*4", name = "rows_scale"}
// FP8-SAME: {align = 256 : i64, bytes = "T*2*384", name = "inter_q"}
// FP8-SAME: {align = 256 : i64, bytes = "T*2*3*4", name = "inter_scale"}]}
// FP8: plan = {args = [
// FP8-SAME: {align = 4 : i64, dims = "T,4", dtype = "f32", name = "logits", role = "in"}
// FP8-SAME: {align = 4 : i64, dims = "T,2", dtype = "i32", name = "ids", role = "out"}
// FP8-SAME: {align = 4 : i64, dims = "T,2", dtype = "f32", name = "weights", role = "out"}]
// FP8-SAME: checks = []
// FP8-SAME: sizes = [
// FP8-SAME: {max = "2147483647", min = "0", name = "T"}]
// FP8-SAME: steps = [
// FP8-SAME: {grid = "min(ceildiv(T,4),65535)", kernel = 0 : i64, params = "mem:logits[T,4];mem:ids[T,2];mem:weights[T,2]", when = "1"}]
// FP8-SAME: work = []}
// FP8: plan = {args = [
// FP8-SAME: {align = 16 : i64, dims = "T,256", dtype = "bf16", name = "tokens", role = "in"}
// FP8-SAME: {align = 4 : i64, dims = "T,2", dtype = "i32", name = "ids", role = "in"}
// FP8-SAME: {align = 16 : i64, dims = "T*2,256", dtype = "e4m3", name = "rows", role = "out"}
// FP8-SAME: {align = 8 : i64, dims = "5", dtype = "i64", name = "offsets", role = "out"}
// FP8-SAME: {align = 8 : i64, dims = "T,2", dtype = "i64", name = "slots", role = "out"}
// FP8-SAME: {align = 4 : i64, dims = "T*2,2", dtype = "f32", name = "rows_scale", role = "out"}]
// FP8-SAME: checks = [
// FP8-SAME: {expr = "T*2<=2147483647", message = "T*k rows must be at most 2147483647"}]
// FP8-SAME: sizes = [
// FP8-SAME: {max = "2147483647", min = "0", name = "T"}]
// FP8-SAME: steps = [
// FP8-SAME: {grid = "ceildiv(T*2,4096)", kernel = 0 : i64, params = "mem:ids[T,2];mem:@counts[ceildiv(T*2,4096)*4]", when = "ceildiv(T*2,4096)>1"}
// FP8-SAME: {grid = "ceildiv(T*2,4096)", kernel = 1 : i64, params = "mem:ids[T,2];mem:@counts[ceildiv(T*2,4096)*4];mem:offsets[5];mem:slots[T,2];mem:@sources[T*2]", when = "1"}
// FP8-SAME: {grid = "min(ceildiv(T*2,4),65535)", kernel = 2 : i64, params = "mem:tokens[T,256];mem:@sources[T*2];mem:offsets[5];mem:rows[T*2,256];mem:rows_scale[T*2,2]", when = "T<128"}
// FP8-SAME: {grid = "min(ceildiv(T,4),65535)", kernel = 3 : i64, params = "mem:tokens[T,256];mem:slots[T,2];mem:offsets[5];mem:rows[T*2,256];mem:rows_scale[T*2,2]", when = "T>=128"}]
// FP8-SAME: work = [
// FP8-SAME: {align = 256 : i64, bytes = "T*2*4", name = "sources"}
// FP8-SAME: {align = 256 : i64, bytes = "ceildiv(T*2,4096)*4*4", name = "counts"}]}
// FP8: plan = {args = [
// FP8-SAME: {align = 16 : i64, dims = "M,256", dtype = "e4m3", name = "rows", role = "in"}
// FP8-SAME: {align = 16 : i64, dims = "4,768,256", dtype = "e4m3", name = "weights", role = "in"}
// FP8-SAME: {align = 8 : i64, dims = "5", dtype = "i64", name = "offsets", role = "in"}
// FP8-SAME: {align = 16 : i64, dims = "M,384", dtype = "bf16", name = "out", role = "out"}
// FP8-SAME: {align = 4 : i64, dims = "M,2", dtype = "f32", name = "rows_scale", role = "in"}
// FP8-SAME: {align = 4 : i64, dims = "4,6,2", dtype = "f32", name = "weights_scale", role = "in"}]
// FP8-SAME: checks = []
// FP8-SAME: sizes = [
// FP8-SAME: {max = "2147483647", min = "0", name = "M"}]
// FP8-SAME: steps = [
// FP8-SAME: {grid = "min(min(ceildiv(M,16)+min(M,4),4)*12,resident)", kernel = 0 : i64, params = "tmap:rows:e4m3:[256,M]:[256]:[128,16];tmap:weights:e4m3:[256,768,4]:[256,196608]:[128,32,1];mem:offsets[5];mem:out[M,384];i32:256;i32:1;i32:16;mem:rows_scale[M,2];mem:weights_scale[4,6,2]", when = "M>=1"}
// FP8-SAME: {grid = "min(min(ceildiv(M,64)+min(floordiv(M,17),4),4)*6,resident)", kernel = 1 : i64, params = "tmap:rows:e4m3:[256,M]:[256]:[128,64];tmap:weights:e4m3:[256,768,4]:[256,196608]:[128,64,1];mem:offsets[5];mem:out[M,384];i32:256;i32:17;i32:64;mem:rows_scale[M,2];mem:weights_scale[4,6,2]", when = "M>=17"}
// FP8-SAME: {grid = "min(min(ceildiv(M,128)+min(floordiv(M,65),4),67108864)*4,resident)", kernel = 2 : i64, params = "tmap:rows:e4m3:[256,M]:[256]:[128,128];tmap:weights:e4m3:[256,768,4]:[256,196608]:[128,96,1];mem:offsets[5];mem:out[M,384];i32:256;i32:65;i32:2147483647;mem:rows_scale[M,2];mem:weights_scale[4,6,2]", when = "M>=65"}]
// FP8-SAME: work = []}
// FP8-SAME: plan = {args = [
// FP8-SAME: {align = 16 : i64, dims = "R,384", dtype = "bf16", name = "input", role = "in"}
// FP8-SAME: {align = 16 : i64, dims = "R,384", dtype = "e4m3", name = "values", role = "out"}
// FP8-SAME: {align = 4 : i64, dims = "R,3", dtype = "f32", name = "scales", role = "out"}]
// FP8-SAME: checks = []
// FP8-SAME: sizes = [
// FP8-SAME: {max = "2147483647", min = "0", name = "R"}]
// FP8-SAME: steps = [
// FP8-SAME: {grid = "min(ceildiv(R*384,8192),65535)", kernel = 0 : i64, params = "mem:input[R,384];mem:values[R,384];mem:scales[R,3]", when = "1"}]
// FP8-SAME: work = []}
// FP8-SAME: plan = {args = [
// FP8-SAME: {align = 16 : i64, dims = "M,384", dtype = "e4m3", name = "rows", role = "in"}
// FP8-SAME: {align = 16 : i64, dims = "4,256,384", dtype = "e4m3", name = "weights", role = "in"}
// FP8-SAME: {align = 8 : i64, dims = "5", dtype = "i64", name = "offsets", role = "in"}
// FP8-SAME: {align = 16 : i64, dims = "M,256", dtype = "bf16", name = "out", role = "out"}
// FP8-SAME: {align = 4 : i64, dims = "M,3", dtype = "f32", name = "rows_scale", role = "in"}
// FP8-SAME: {align = 4 : i64, dims = "4,2,3", dtype = "f32", name = "weights_scale", role = "in"}]
// FP8-SAME: checks = []
// FP8-SAME: sizes = [
// FP8-SAME: {max = "2147483647", min = "0", name = "M"}]
// FP8-SAME: steps = [
// FP8-SAME: {grid = "min(min(ceildiv(M,16)+min(M,4),4)*4,resident)", kernel = 0 : i64, params = "tmap:rows:e4m3:[384,M]:[384]:[128,16];tmap:weights:e4m3:[384,256,4]:[384,98304]:[128,64,1];mem:offsets[5];mem:out[M,256];i32:384;i32:1;i32:16;mem:rows_scale[M,3];mem:weights_scale[4,2,3]", when = "M>=1"}
// FP8-SAME: {grid = "min(min(ceildiv(M,64)+min(floordiv(M,17),4),4)*2,resident)", kernel = 1 : i64, params = "tmap:rows:e4m3:[384,M]:[384]:[128,64];tmap:weights:e4m3:[384,256,4]:[384,98304]:[128,128,1];mem:offsets[5];mem:out[M,256];i32:384;i32:17;i32:64;mem:rows_scale[M,3];mem:weights_scale[4,2,3]", when = "M>=17"}
// FP8-SAME: {grid = "min(min(ceildiv(M,128)+min(floordiv(M,65),4),67108864)*2,resident)", kernel = 2 : i64, params = "tmap:rows:e4m3:[384,M]:[384]:[128,128];tmap:weights:e4m3:[384,256,4]:[384,98304]:[128,192,1];mem:offsets[5];mem:out[M,256];i32:384;i32:65;i32:2147483647;mem:rows_scale[M,3];mem:weights_scale[4,2,3]", when = "M>=65"}]
// FP8-SAME: work = []}
// FP8: plan = {args = [
// FP8-SAME: {align = 16 : i64, dims = "M,256", dtype = "bf16", name = "rows", role = "in"}
// FP8-SAME: {align = 8 : i64, dims = "T,2", dtype = "i64", name = "slots", role = "in"}
// FP8-SAME: {align = 4 : i64, dims = "T,2", dtype = "f32", name = "weights", role = "in"}
// FP8-SAME: {align = 16 : i64, dims = "T,256", dtype = "bf16", name = "out", role = "out"}]
// FP8-SAME: checks = []
// FP8-SAME: sizes = [
// FP8-SAME: {max = "9223372036854775807", min = "0", name = "M"}
// FP8-SAME: {max = "2147483647", min = "0", name = "T"}]
// FP8-SAME: steps = [
// FP8-SAME: {grid = "min(T,1048576)", kernel = 0 : i64, params = "mem:rows[M,256];mem:slots[T,2];mem:weights[T,2];mem:out[T,256]", when = "1"}]
// FP8-SAME: work = []}
// FP8-LABEL: func.func @small_prepack(
// FP8: plan = {args = [
// FP8-SAME: {align = 16 : i64, dims = "4,768,256", dtype = "bf16", name = "input", role = "in"}
// FP8-SAME: {align = 16 : i64, dims = "4,768,256", dtype = "e4m3", name = "values", role = "out"}
// FP8-SAME: {align = 4 : i64, dims = "4,6,2", dtype = "f32", name = "scales", role = "out"}]
// FP8-SAME: checks = []
// FP8-SAME: sizes = []
// FP8-SAME: steps = [
// FP8-SAME: {grid = "48", kernel = 0 : i64, params = "mem:input[3072,256];mem:values[3072,256];mem:scales[24,2]", when = "1"}]
// FP8-SAME: work = []}
// FP8: plan = {args = [
// FP8-SAME: {align = 16 : i64, dims = "4,256,384", dtype = "bf16", name = "input", role = "in"}
// FP8-SAME: {align = 16 : i64, dims = "4,256,384", dtype = "e4m3", name = "values", role = "out"}
// FP8-SAME: {align = 4 : i64, dims = "4,2,3", dtype = "f32", name = "scales", role = "out"}]
// FP8-SAME: checks = []
// FP8-SAME: sizes = []
// FP8-SAME: steps = [
// FP8-SAME: {grid = "24", kernel = 0 : i64, params = "mem:input[1024,384];mem:values[1024,384];mem:scales[8,3]", when = "1"}]
// FP8-SAME: work = []}

// MANIFEST: moe.manifest = {entries = [
// MANIFEST-SAME: name = "small_permute", offsets = i64, op = "moe.permute", out = "f8E4M3FN", plan = {args = [
// MANIFEST-SAME: {align = 16 : i64, dims = "T,256", dtype = "bf16", name = "tokens", role = "in"}
// MANIFEST-SAME: {align = 4 : i64, dims = "T,2", dtype = "i32", name = "ids", role = "in"}
// MANIFEST-SAME: {align = 16 : i64, dims = "T*2,256", dtype = "e4m3", name = "rows", role = "out"}
// MANIFEST-SAME: {align = 8 : i64, dims = "5", dtype = "i64", name = "offsets", role = "out"}
// MANIFEST-SAME: {align = 8 : i64, dims = "T,2", dtype = "i64", name = "slots", role = "out"}
// MANIFEST-SAME: {align = 4 : i64, dims = "T*2,2", dtype = "f32", name = "rows_scale", role = "out"}]
// MANIFEST-SAME: checks = [
// MANIFEST-SAME: {expr = "T*2<=2147483647", message = "T*k rows must be at most 2147483647"}]
// MANIFEST-SAME: sizes = [
// MANIFEST-SAME: {max = "2147483647", min = "0", name = "T"}]
// MANIFEST-SAME: steps = [
// MANIFEST-SAME: {grid = "ceildiv(T*2,4096)", kernel = 0 : i64, params = "mem:ids[T,2];mem:@counts[ceildiv(T*2,4096)*4]", when = "ceildiv(T*2,4096)>1"}
// MANIFEST-SAME: {grid = "ceildiv(T*2,4096)", kernel = 1 : i64, params = "mem:ids[T,2];mem:@counts[ceildiv(T*2,4096)*4];mem:offsets[5];mem:slots[T,2];mem:@sources[T*2]", when = "1"}
// MANIFEST-SAME: {grid = "min(ceildiv(T*2,4),65535)", kernel = 2 : i64, params = "mem:tokens[T,256];mem:@sources[T*2];mem:offsets[5];mem:rows[T*2,256];mem:rows_scale[T*2,2]", when = "T<128"}
// MANIFEST-SAME: {grid = "min(ceildiv(T,4),65535)", kernel = 3 : i64, params = "mem:tokens[T,256];mem:slots[T,2];mem:offsets[5];mem:rows[T*2,256];mem:rows_scale[T*2,2]", when = "T>=128"}]
// MANIFEST-SAME: work = [
// MANIFEST-SAME: {align = 256 : i64, bytes = "T*2*4", name = "sources"}
// MANIFEST-SAME: {align = 256 : i64, bytes = "ceildiv(T*2,4096)*4*4", name = "counts"}]}
// MANIFEST-SAME: name = "small", op = "moe.layer", permute = "small_permute", plan = {args = [
// MANIFEST-SAME: {align = 16 : i64, dims = "T,256", dtype = "bf16", name = "tokens", role = "in"}
// MANIFEST-SAME: {align = 4 : i64, dims = "T,4", dtype = "f32", name = "logits", role = "in"}
// MANIFEST-SAME: {align = 16 : i64, dims = "4,768,256", dtype = "e4m3", name = "gate_up_weights", role = "in"}
// MANIFEST-SAME: {align = 16 : i64, dims = "4,256,384", dtype = "e4m3", name = "down_weights", role = "in"}
// MANIFEST-SAME: {align = 16 : i64, dims = "T,256", dtype = "bf16", name = "out", role = "out"}
// MANIFEST-SAME: {align = 4 : i64, dims = "4,6,2", dtype = "f32", name = "gate_up_weights_scale", role = "in"}
// MANIFEST-SAME: {align = 4 : i64, dims = "4,2,3", dtype = "f32", name = "down_weights_scale", role = "in"}]
// MANIFEST-SAME: checks = [
// MANIFEST-SAME: {expr = "T*2<=2147483647", message = "T*k rows must be at most 2147483647"}
// MANIFEST-SAME: {expr = "T*2<=2147483647", message = "permute step: T*k rows must be at most 2147483647"}
// MANIFEST-SAME: {expr = "T*2<=2147483647", message = "gate_up step: M must be at most 2147483647"}
// MANIFEST-SAME: {expr = "T*2<=2147483647", message = "intermediate step: R must be at most 2147483647"}
// MANIFEST-SAME: {expr = "T*2<=2147483647", message = "down step: M must be at most 2147483647"}]
// MANIFEST-SAME: sizes = [
// MANIFEST-SAME: {max = "2147483647", min = "0", name = "T"}]
// MANIFEST-SAME: steps = [
// MANIFEST-SAME: {grid = "min(ceildiv(T,4),65535)", kernel = 0 : i64, params = "mem:logits[T,4];mem:@ids[T,2];mem:@weights[T,2]", part = "route", when = "1"}
// MANIFEST-SAME: {grid = "ceildiv(T*2,4096)", kernel = 0 : i64, params = "mem:@ids[T,2];mem:@counts[ceildiv(T*2,4096)*4]", part = "permute", when = "ceildiv(T*2,4096)>1"}
// MANIFEST-SAME: {grid = "ceildiv(T*2,4096)", kernel = 1 : i64, params = "mem:@ids[T,2];mem:@counts[ceildiv(T*2,4096)*4];mem:@offsets[5];mem:@slots[T,2];mem:@sources[T*2]", part = "permute", when = "1"}
// MANIFEST-SAME: {grid = "min(ceildiv(T*2,4),65535)", kernel = 2 : i64, params = "mem:tokens[T,256];mem:@sources[T*2];mem:@offsets[5];mem:@rows_q[T*2,256];mem:@rows_scale[T*2,2]", part = "permute", when = "T<128"}
// MANIFEST-SAME: {grid = "min(ceildiv(T,4),65535)", kernel = 3 : i64, params = "mem:tokens[T,256];mem:@slots[T,2];mem:@offsets[5];mem:@rows_q[T*2,256];mem:@rows_scale[T*2,2]", part = "permute", when = "T>=128"}
// MANIFEST-SAME: {grid = "min(min(ceildiv(T*2,16)+min(T*2,4),4)*12,resident)", kernel = 0 : i64, params = "tmap:@rows_q:e4m3:[256,T*2]:[256]:[128,16];tmap:gate_up_weights:e4m3:[256,768,4]:[256,196608]:[128,32,1];mem:@offsets[5];mem:@inter[T*2,384];i32:256;i32:1;i32:16;mem:@rows_scale[T*2,2];mem:gate_up_weights_scale[4,6,2]", part = "gate_up", when = "T*2>=1&&T>=1"}
// MANIFEST-SAME: {grid = "min(min(ceildiv(T*2,64)+min(floordiv(T*2,17),4),4)*6,resident)", kernel = 1 : i64, params = "tmap:@rows_q:e4m3:[256,T*2]:[256]:[128,64];tmap:gate_up_weights:e4m3:[256,768,4]:[256,196608]:[128,64,1];mem:@offsets[5];mem:@inter[T*2,384];i32:256;i32:17;i32:64;mem:@rows_scale[T*2,2];mem:gate_up_weights_scale[4,6,2]", part = "gate_up", when = "T*2>=17&&T>=17"}
// MANIFEST-SAME: {grid = "min(min(ceildiv(T*2,128)+min(floordiv(T*2,65),4),67108864)*4,resident)", kernel = 2 : i64, params = "tmap:@rows_q:e4m3:[256,T*2]:[256]:[128,128];tmap:gate_up_weights:e4m3:[256,768,4]:[256,196608]:[128,96,1];mem:@offsets[5];mem:@inter[T*2,384];i32:256;i32:65;i32:2147483647;mem:@rows_scale[T*2,2];mem:gate_up_weights_scale[4,6,2]", part = "gate_up", when = "T*2>=65&&T>=65"}
// MANIFEST-SAME: {grid = "min(ceildiv(T*2*384,8192),65535)", kernel = 0 : i64, params = "mem:@inter[T*2,384];mem:@inter_q[T*2,384];mem:@inter_scale[T*2,3]", part = "intermediate", when = "1"}
// MANIFEST-SAME: {grid = "min(min(ceildiv(T*2,16)+min(T*2,4),4)*4,resident)", kernel = 0 : i64, params = "tmap:@inter_q:e4m3:[384,T*2]:[384]:[128,16];tmap:down_weights:e4m3:[384,256,4]:[384,98304]:[128,64,1];mem:@offsets[5];mem:@rows[T*2,256];i32:384;i32:1;i32:16;mem:@inter_scale[T*2,3];mem:down_weights_scale[4,2,3]", part = "down", when = "T*2>=1&&T>=1"}
// MANIFEST-SAME: {grid = "min(min(ceildiv(T*2,64)+min(floordiv(T*2,17),4),4)*2,resident)", kernel = 1 : i64, params = "tmap:@inter_q:e4m3:[384,T*2]:[384]:[128,64];tmap:down_weights:e4m3:[384,256,4]:[384,98304]:[128,128,1];mem:@offsets[5];mem:@rows[T*2,256];i32:384;i32:17;i32:64;mem:@inter_scale[T*2,3];mem:down_weights_scale[4,2,3]", part = "down", when = "T*2>=17&&T>=17"}
// MANIFEST-SAME: {grid = "min(min(ceildiv(T*2,128)+min(floordiv(T*2,65),4),67108864)*2,resident)", kernel = 2 : i64, params = "tmap:@inter_q:e4m3:[384,T*2]:[384]:[128,128];tmap:down_weights:e4m3:[384,256,4]:[384,98304]:[128,192,1];mem:@offsets[5];mem:@rows[T*2,256];i32:384;i32:65;i32:2147483647;mem:@inter_scale[T*2,3];mem:down_weights_scale[4,2,3]", part = "down", when = "T*2>=65&&T>=65"}
// MANIFEST-SAME: {grid = "min(T,1048576)", kernel = 0 : i64, params = "mem:@rows[T*2,256];mem:@slots[T,2];mem:@weights[T,2];mem:out[T,256]", part = "unpermute", when = "1"}]
// MANIFEST-SAME: work = [
// MANIFEST-SAME: {align = 256 : i64, bytes = "T*2*4", name = "ids"}
// MANIFEST-SAME: {align = 256 : i64, bytes = "T*2*4", name = "weights"}
// MANIFEST-SAME: {align = 256 : i64, bytes = "40", name = "offsets"}
// MANIFEST-SAME: {align = 256 : i64, bytes = "T*2*8", name = "slots"}
// MANIFEST-SAME: {align = 256 : i64, bytes = "T*2*4", name = "sources"}
// MANIFEST-SAME: {align = 256 : i64, bytes = "ceildiv(T*2,4096)*4*4", name = "counts"}
// MANIFEST-SAME: {align = 256 : i64, bytes = "T*2*256*2", name = "rows"}
// MANIFEST-SAME: {align = 256 : i64, bytes = "T*2*384*2", name = "inter"}
// MANIFEST-SAME: {align = 256 : i64, bytes = "T*2*256", name = "rows_q"}
// MANIFEST-SAME: {align = 256 : i64, bytes = "T*2*2*4", name = "rows_scale"}
// MANIFEST-SAME: {align = 256 : i64, bytes = "T*2*384", name = "inter_q"}
// MANIFEST-SAME: {align = 256 : i64, bytes = "T*2*3*4", name = "inter_scale"}]}

func.func @small(%x: tensor<?x256xbf16>, %logits: tensor<?x4xf32>,
                 %w13: tensor<4x768x256xbf16>, %w2: tensor<4x256x384xbf16>) -> tensor<?x256xbf16> {
  %ids, %w = moe.route softmax_topk %logits top 2 renormalize
      : (tensor<?x4xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids
      : (tensor<?x256xbf16>, tensor<?x2xi32>) -> (tensor<?x256xbf16>, tensor<5xi64>, tensor<?x2xi64>)
  %gu = moe.grouped_matmul %rows, %w13, %offsets
      : (tensor<?x256xbf16>, tensor<4x768x256xbf16>, tensor<5xi64>) -> tensor<?x768xbf16>
  %h = moe.swiglu silu %gu : (tensor<?x768xbf16>) -> tensor<?x384xbf16>
  %y = moe.grouped_matmul %h, %w2, %offsets
      : (tensor<?x384xbf16>, tensor<4x256x384xbf16>, tensor<5xi64>) -> tensor<?x256xbf16>
  %out = moe.unpermute %y, %slots weights %w
      : (tensor<?x256xbf16>, tensor<?x2xi64>, tensor<?x2xf32>) -> tensor<?x256xbf16>
  return %out : tensor<?x256xbf16>
}
