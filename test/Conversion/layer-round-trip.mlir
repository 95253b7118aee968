// MXFP8 computed as bf16 GEMMs of exact values (docs/quantization-design.md):
// a bf16 layer whose gathered rows make a round trip (moe.fake_quantize) and
// whose expert MLP has an MXFP8 `intermediate` is a layer.v1 entry. With
// fuse-round-trips (the default) the permute's gather stores the rows'
// round trip (`round_trip`, quantize_rows; the fake_quantize is fused, no
// kernel of its own) and the gate-up GEMM's epilogue the activation's: the
// bf16 layer's steps exactly. With fuse-round-trips=0 two more parts run the
// quantize kernel's round trip in place: `quantize` on the gathered rows
// (@rows) after the permute, `intermediate` on the activation (@inter)
// between the GEMMs. The workspace is the bf16 layer's; the decode kernel,
// which keeps the activation in registers, is not built for it.
// RUN: moe-opt %s --moe-fuse-experts --moe-fuse-layer --moe-select-kernels="decode-max-tokens=16" --convert-moe-to-nvgpu | FileCheck %s --check-prefix=PLAN
// RUN: moe-opt %s --moe-fuse-experts --moe-fuse-layer --moe-select-kernels="decode-max-tokens=16 fuse-round-trips=0" --convert-moe-to-nvgpu | FileCheck %s --check-prefix=SEPARATE
// RUN: moe-opt %s --moe-gpu-pipeline="decode-max-tokens=16" | moe-translate --moe-to-bundle | FileCheck %s --check-prefix=BUNDLE

// PLAN-LABEL: func.func @small(
// PLAN: moe.layer {moe.launch = {abi = "layer.v1"
// PLAN-SAME: part = "permute"
// PLAN-NOT: part = "quantize"
// PLAN-SAME: part = "gate_up"
// PLAN-NOT: part = "intermediate"
// PLAN-SAME: part = "down"
// PLAN-SAME: part = "unpermute"
// PLAN-SAME: work = [{align = 256 : i64, bytes = "T*2*4", name = "ids"}, {align = 256 : i64, bytes = "T*2*4", name = "weights"}, {align = 256 : i64, bytes = "40", name = "offsets"}, {align = 256 : i64, bytes = "T*2*8", name = "slots"}, {align = 256 : i64, bytes = "T*2*4", name = "sources"}, {align = 256 : i64, bytes = "ceildiv(T*2,4096)*4*4", name = "counts"}, {align = 256 : i64, bytes = "T*2*256*2", name = "rows"}, {align = 256 : i64, bytes = "T*2*384*2", name = "inter"}]
// PLAN-NOT: decode
// PLAN: moe.permute {{.*}}#moe.permute_kernels<chip = "sm_90a", quantize_rows = true>{{.*}}kernel = @moe_kernels::@moe_permute_gather_off64_mxe4m3rt{{.*}}round_trip = "mxfp8_e4m3"
// PLAN: moe.fake_quantize {{.*}}{moe.fused_into_launch, moe.kernels = #moe.kernel<chip = "sm_90a", fused = true>}
// PLAN: moe.expert_mlp {{.*}}intermediate <f8E4M3FN, [1, 32], f8E8M0FNU>
// PLAN-NOT: decode =
// PLAN-SAME: part = "gate_up"{{.*}}round_trip = "mxfp8_e4m3"
// PLAN-SAME: part = "down"
// The gather: each thread's 8 columns, four lanes a [1, 32] block (two
// shuffles), encoded, decoded, times the scale, stored in bf16.
// PLAN-LABEL: gpu.func @moe_permute_gather_off64_mxe4m3rt(
// PLAN-SAME: memref<?x?xbf16>, %{{.*}}: memref<?xi32>, %{{.*}}: memref<?xi64>, %{{.*}}: memref<?x?xbf16>)
// PLAN: gpu.shuffle xor %{{.*}}, %c2_i32
// PLAN: gpu.shuffle xor %{{.*}}, %c1_i32
// PLAN-COUNT-4: nvvm.convert.f32x2.to.f8x2
// PLAN-COUNT-4: nvvm.convert.f8x2.to.f16x2
// PLAN: vector.store %{{.*}} {alignment = 16 : i64} : memref<?x?xbf16>, vector<8xbf16>
// PLAN: gpu.return

// SEPARATE: moe.layer {moe.launch = {abi = "layer.v1"
// SEPARATE-SAME: part = "permute"
// SEPARATE-SAME: {grid = "min(ceildiv(T*2*256,8192),65535)", kernel = 0 : i64, params = "mem:@rows[T*2,256];mem:@rows[T*2,256]", part = "quantize", when = "1"}
// SEPARATE-SAME: part = "gate_up"
// SEPARATE-SAME: {grid = "min(ceildiv(T*2*384,8192),65535)", kernel = 0 : i64, params = "mem:@inter[T*2,384];mem:@inter[T*2,384]", part = "intermediate", when = "1"}
// SEPARATE-SAME: part = "down"
// SEPARATE-NOT: decode
// SEPARATE: moe.permute
// SEPARATE-NOT: round_trip
// SEPARATE: moe.fake_quantize {{.*}}moe.launch = {abi = "planned.v1"{{.*}}kernels = [{kernel = @moe_kernels::@moe_fake_quantize_bf16_e4m3_e8m0_1x32}]
// SEPARATE: moe.expert_mlp
// SEPARATE-NOT: round_trip
// SEPARATE-SAME: op = "moe.fake_quantize", part = "intermediate"

// The bf16 layer's entries and steps, two of them making the round trips.
// BUNDLE: entry small_permute op=moe.permute abi=permute.v2 {{.*}} round_trip=mxfp8_e4m3
// BUNDLE-NOT: small_quantize
// BUNDLE: entry small_gate_up op=moe.expert_mlp abi=grouped_matmul.v3 {{.*}}epilogue=swiglu bias=none activation=silu round_trip=mxfp8_e4m3
// BUNDLE-NOT: small_intermediate
// BUNDLE: entry small_down op=moe.expert_mlp abi=grouped_matmul.v3
// BUNDLE: entry small op=moe.layer abi=layer.v1 max_rows=2147483647 route=small_route permute=small_permute gate_up=small_gate_up down=small_down unpermute=small_unpermute
// BUNDLE-NOT: small_quantize
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
