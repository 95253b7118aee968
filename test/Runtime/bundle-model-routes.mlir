// A layer whose routing stays in the model (what the transformers experts
// backend compiles): --moe-build-layer routing=none takes the top-k ids and
// weights, --moe-fuse-layer makes the layer the chain from the permute on,
// and its layer.v1 entry has no route part: it takes `ids` (i32) and
// `weights` (f32) where a routed layer takes the logits, and its permute
// and combine read them. The block-FP8 layer (--moe-quantize) has the same
// arguments before its weights' scales. Unlike a route's, the ids of a
// token may repeat. The reader takes an entry without
// route=, and checks E and k against the permute.
// RUN: env CUDA_ROOT=%cuda_toolkit moe-opt %s --moe-build-layer="name=experts hidden=256 intermediate=128 experts=8 top-k=2 routing=none" --moe-gpu-pipeline -o %t.mlir
// RUN: moe-translate --moe-to-bundle %t.mlir -o %t.moebundle
// RUN: moe-bundle-info %t.moebundle | FileCheck %s
// RUN: grep -a -E '^(entry|arg|launch) experts ' %t.moebundle | FileCheck %s --check-prefix=MANIFEST
// Ids from outside may repeat within a token, so an expert may have up to
// M = T*k rows (a route's bound is T): each GEMM form runs when M reaches
// its rows_min.
// RUN: grep -a -E '^launch experts .*part=experts_(gate_up|down)' %t.moebundle | FileCheck %s --check-prefix=FORMS
// RUN: env CUDA_ROOT=%cuda_toolkit moe-opt %s --moe-build-layer="name=experts hidden=256 intermediate=128 experts=8 top-k=2 routing=none" --moe-quantize="scope=weights+activations" --moe-gpu-pipeline -o %t.fp8.mlir
// RUN: moe-translate --moe-to-bundle %t.fp8.mlir -o %t.fp8.moebundle
// RUN: grep -a -E '^(entry|arg) experts ' %t.fp8.moebundle | FileCheck %s --check-prefix=FP8
// The permute's and combine's k must still agree, now with each other.
// RUN: sed -e 's/^entry experts_unpermute \(.*\) top_k=2 /entry experts_unpermute \1 top_k=3 /' %t.moebundle > %t.slots.moebundle
// RUN: not moe-bundle-info %t.slots.moebundle 2>&1 | FileCheck %s --check-prefix=SLOTS

// CHECK-NOT: op=moe.route
// CHECK: entry experts_permute op=moe.permute abi=permute.v2 {{.*}} experts=8 top_k=2 hidden=256
// CHECK: entry experts_unpermute {{.*}} top_k=2
// CHECK: entry experts op=moe.layer abi=layer.v1 max_rows={{[0-9]+}} permute=experts_permute gate_up=

// MANIFEST: entry experts op=moe.layer abi=layer.v1 max_rows={{[0-9]+}} permute=experts_permute gate_up=experts_gate_up down=experts_down unpermute=experts_unpermute
// MANIFEST-NEXT: arg experts tokens bf16 in align=16 dims=T,256
// MANIFEST-NEXT: arg experts ids i32 in align=4 dims=T,2
// MANIFEST-NEXT: arg experts weights f32 in align=4 dims=T,2
// MANIFEST-NEXT: arg experts gate_up_weights bf16 in align=16 dims=8,256,256
// MANIFEST-NEXT: arg experts down_weights bf16 in align=16 dims=8,256,128
// MANIFEST-NEXT: arg experts out bf16 out align=16 dims=T,256
// MANIFEST-NOT: experts_route

// FORMS: part=experts_gate_up {{.*}} when=T*2>=1 params=
// FORMS: part=experts_gate_up {{.*}} when=T*2>=17 params=
// FORMS: part=experts_gate_up {{.*}} when=T*2>=65 params=
// FORMS: part=experts_down {{.*}} when=T*2>=1 params=

// FP8: entry experts op=moe.layer abi=layer_fp8.v1 max_rows={{[0-9]+}} permute=experts_permute
// FP8-NEXT: arg experts tokens bf16 in align=16 dims=T,256
// FP8-NEXT: arg experts ids i32 in align=4 dims=T,2
// FP8-NEXT: arg experts weights f32 in align=4 dims=T,2
// FP8-NEXT: arg experts gate_up_weights e4m3 in

// SLOTS: moe-bundle-info: error: {{.*}}unpermute=experts_unpermute has top_k=3, but permute=experts_permute has top_k=2
module {
}
