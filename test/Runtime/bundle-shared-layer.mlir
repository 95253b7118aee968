// A layer with a gated shared expert from the compiler to the runtime's
// reader: --moe-gpu-pipeline runs the shared expert (Is = 320, I = 128: three
// slices, the last half zeros) as experts 8 .. 10 that every token takes
// after its 2, so the route entry writes k + 3 slots (shared=3, gated by the
// tokens: shared_gate=1 hidden=256), the permute, GEMMs and combine run over
// 11 experts and 5 slots, and the layer takes the arranged weights and the
// gate. The reader checks the parts against the route with its shared slots.
// RUN: env CUDA_ROOT=%cuda_toolkit moe-opt %s --moe-gpu-pipeline -o %t.mlir
// RUN: moe-translate --moe-to-bundle %t.mlir -o %t.moebundle
// RUN: moe-bundle-info %t.moebundle | FileCheck %s
// RUN: grep -a -E '^(entry|arg) qwen(_route)? ' %t.moebundle | FileCheck %s --check-prefix=MANIFEST
// A permute over the routed experts alone no longer matches the route.
// RUN: sed -e 's/^entry qwen_permute \(.*\) experts=11 /entry qwen_permute \1 experts=8 /' %t.moebundle > %t.experts.moebundle
// RUN: not moe-bundle-info %t.experts.moebundle 2>&1 | FileCheck %s --check-prefix=EXPERTS
// RUN: sed -e 's/^entry qwen_unpermute \(.*\) top_k=5 /entry qwen_unpermute \1 top_k=2 /' %t.moebundle > %t.slots.moebundle
// RUN: not moe-bundle-info %t.slots.moebundle 2>&1 | FileCheck %s --check-prefix=SLOTS
// RUN: sed -e 's/ shared=3 shared_gate=1 hidden=256$/ shared_gate=1 hidden=256/' %t.moebundle > %t.gate.moebundle
// RUN: not moe-bundle-info %t.gate.moebundle 2>&1 | FileCheck %s --check-prefix=GATE

// CHECK: entry qwen_route op=moe.route abi=route.v1 {{.*}} experts=8 top_k=2 logits=bf16 bias=0
// CHECK-NEXT: kernel moe_route_softmax_topk_e8_k2_bf16_shared3g
// CHECK: entry qwen_permute op=moe.permute abi=permute.v2 {{.*}} experts=11 top_k=5 hidden=256
// CHECK: entry qwen_gate_up {{.*}} experts=11 n=256 k=256
// CHECK: entry qwen_down {{.*}} experts=11 n=256 k=128
// CHECK: entry qwen_unpermute {{.*}} top_k=5
// CHECK: entry qwen op=moe.layer abi=layer.v1

// MANIFEST: entry qwen_route {{.*}} logits=bf16 bias=0 shared=3 shared_gate=1 hidden=256
// MANIFEST: entry qwen op=moe.layer
// MANIFEST-NEXT: arg qwen tokens bf16 in align=16 dims=T,256
// MANIFEST-NEXT: arg qwen logits bf16 in align=2 dims=T,8
// MANIFEST-NEXT: arg qwen gate_up_weights bf16 in align=16 dims=11,256,256
// MANIFEST-NEXT: arg qwen down_weights bf16 in align=16 dims=11,256,128
// MANIFEST-NEXT: arg qwen shared_gate bf16 in align=2 dims=1,256
// MANIFEST-NEXT: arg qwen out bf16 out align=16 dims=T,256

// EXPERTS: moe-bundle-info: error: {{.*}}permute=qwen_permute has experts=8, but route=qwen_route has experts+shared=11
// SLOTS: moe-bundle-info: error: {{.*}}unpermute=qwen_unpermute has top_k=2, but route=qwen_route has top_k+shared=5
// GATE: moe-bundle-info: error: {{.*}}entry 'qwen_route': shared_gate or hidden without shared
func.func @qwen(%x: tensor<?x256xbf16>, %logits: tensor<?x8xbf16>,
    %w13: tensor<8x256x256xbf16>, %w2: tensor<8x256x128xbf16>,
    %s13: tensor<640x256xbf16>, %s2: tensor<256x320xbf16>, %g: tensor<1x256xbf16>) -> tensor<?x256xbf16> {
  %ids, %w = moe.route softmax_topk %logits top 2
      : (tensor<?x8xbf16>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids
      : (tensor<?x256xbf16>, tensor<?x2xi32>) -> (tensor<?x256xbf16>, tensor<9xi64>, tensor<?x2xi64>)
  %y = moe.expert_mlp silu %rows, %offsets, %w13, %w2
      : (tensor<?x256xbf16>, tensor<9xi64>, tensor<8x256x256xbf16>, tensor<8x256x128xbf16>) -> tensor<?x256xbf16>
  %s = moe.shared_mlp silu %x, %s13, %s2 gate %g
      : (tensor<?x256xbf16>, tensor<640x256xbf16>, tensor<256x320xbf16>, tensor<1x256xbf16>) -> tensor<?x256xbf16>
  %out = moe.unpermute %y, %slots weights %w shared %s
      : (tensor<?x256xbf16>, tensor<?x2xi64>, tensor<?x2xf32>, tensor<?x256xbf16>) -> tensor<?x256xbf16>
  return %out : tensor<?x256xbf16>
}
