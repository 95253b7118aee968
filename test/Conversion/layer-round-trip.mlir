// MXFP8 computed as bf16 GEMMs of exact values (docs/quantization-design.md):
// a bf16 layer whose gathered rows make a round trip (moe.fake_quantize) and
// whose expert MLP has an MXFP8 `intermediate` is a layer.v1 entry with a
// `quantize` part, the quantize kernel's round trip on the gathered rows
// (@rows, in place) after the permute; the gate-up GEMM's epilogue makes the
// activation's round trip (round-trip-epilogue, the default), or, with
// round-trip-epilogue=0, an `intermediate` part does it in place on @inter
// between the GEMMs. The workspace is the bf16 layer's; the decode kernel,
// which keeps the activation in registers, is not built for it.
// RUN: moe-opt %s --moe-fuse-experts --moe-fuse-layer --moe-select-kernels="decode-max-tokens=16" --convert-moe-to-nvgpu | FileCheck %s --check-prefix=PLAN
// RUN: moe-opt %s --moe-fuse-experts --moe-fuse-layer --moe-select-kernels="decode-max-tokens=16 round-trip-epilogue=0" --convert-moe-to-nvgpu | FileCheck %s --check-prefix=SEPARATE
// RUN: moe-opt %s --moe-gpu-pipeline="decode-max-tokens=16" | moe-translate --moe-to-bundle | FileCheck %s --check-prefix=BUNDLE

// PLAN-LABEL: func.func @small(
// PLAN: moe.layer {moe.launch = {abi = "layer.v1"
// PLAN-SAME: part = "permute"
// PLAN-SAME: {grid = "min(ceildiv(T*2*256,8192),65535)", kernel = 0 : i64, params = "mem:@rows[T*2,256];mem:@rows[T*2,256]", part = "quantize", when = "1"}
// PLAN-SAME: part = "gate_up"
// PLAN-NOT: part = "intermediate"
// PLAN-SAME: part = "down"
// PLAN-SAME: part = "unpermute"
// PLAN-SAME: work = [{align = 256 : i64, bytes = "T*2*4", name = "ids"}, {align = 256 : i64, bytes = "T*2*4", name = "weights"}, {align = 256 : i64, bytes = "40", name = "offsets"}, {align = 256 : i64, bytes = "T*2*8", name = "slots"}, {align = 256 : i64, bytes = "T*2*4", name = "sources"}, {align = 256 : i64, bytes = "ceildiv(T*2,4096)*4*4", name = "counts"}, {align = 256 : i64, bytes = "T*2*256*2", name = "rows"}, {align = 256 : i64, bytes = "T*2*384*2", name = "inter"}]
// PLAN-NOT: decode
// PLAN: moe.fake_quantize {{.*}}moe.launch = {abi = "planned.v1"{{.*}}kernels = [{kernel = @moe_kernels::@moe_fake_quantize_bf16_e4m3_e8m0_1x32}]
// PLAN: moe.expert_mlp {{.*}}intermediate <f8E4M3FN, [1, 32], f8E8M0FNU>
// PLAN-NOT: decode =
// PLAN-SAME: part = "gate_up"{{.*}}round_trip = "mxfp8_e4m3"
// PLAN-SAME: part = "down"

// SEPARATE: moe.layer {moe.launch = {abi = "layer.v1"
// SEPARATE-SAME: part = "gate_up"
// SEPARATE-SAME: {grid = "min(ceildiv(T*2*384,8192),65535)", kernel = 0 : i64, params = "mem:@inter[T*2,384];mem:@inter[T*2,384]", part = "intermediate", when = "1"}
// SEPARATE-SAME: part = "down"
// SEPARATE-NOT: decode
// SEPARATE: moe.expert_mlp
// SEPARATE-NOT: round_trip
// SEPARATE-SAME: op = "moe.fake_quantize", part = "intermediate"

// The parts are entries of their own; the layer's plan names them.
// BUNDLE: entry small_permute op=moe.permute abi=permute.v2
// BUNDLE: entry small_quantize op=moe.fake_quantize abi=planned.v1
// BUNDLE: entry small_gate_up op=moe.expert_mlp abi=grouped_matmul.v3 {{.*}}epilogue=swiglu bias=none activation=silu round_trip=mxfp8_e4m3
// BUNDLE-NOT: small_intermediate
// BUNDLE: entry small_down op=moe.expert_mlp abi=grouped_matmul.v3
// BUNDLE: entry small op=moe.layer abi=layer.v1 max_rows=2147483647 route=small_route permute=small_permute gate_up=small_gate_up down=small_down unpermute=small_unpermute
// BUNDLE: launch small 0 part=small_quantize grid=min(ceildiv(T*2*256,8192),65535) when=1 params=mem:@rows[T*2,256];mem:@rows[T*2,256]
// BUNDLE-NOT: decode
func.func @small(%x: tensor<?x256xbf16>, %logits: tensor<?x4xf32>,
    %w13: tensor<4x768x256xbf16>, %w2: tensor<4x256x384xbf16>) -> tensor<?x256xbf16> {
  %ids, %w = moe.route softmax_topk %logits top 2 renormalize
      : (tensor<?x4xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids
      : (tensor<?x256xbf16>, tensor<?x2xi32>) -> (tensor<?x256xbf16>, tensor<5xi64>, tensor<?x2xi64>)
  %rq = moe.fake_quantize %rows to <f8E4M3FN, [1, 32], f8E8M0FNU> : tensor<?x256xbf16>
  %y = moe.expert_mlp silu %rq, %offsets, %w13, %w2 intermediate <f8E4M3FN, [1, 32], f8E8M0FNU>
      : (tensor<?x256xbf16>, tensor<5xi64>, tensor<4x768x256xbf16>, tensor<4x256x384xbf16>) -> tensor<?x256xbf16>
  %out = moe.unpermute %y, %slots weights %w
      : (tensor<?x256xbf16>, tensor<?x2xi64>, tensor<?x2xf32>) -> tensor<?x256xbf16>
  return %out : tensor<?x256xbf16>
}
