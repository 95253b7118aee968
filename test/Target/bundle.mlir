// moe-translate --moe-to-bundle writes what --moe-gpu-pipeline compiled as
// the .moebundle of docs/runtime-contract.md: header, chip, the cubin,
// then one entry per op with its kernels and their row ranges.
// RUN: env CUDA_ROOT=%cuda_toolkit moe-opt %s --moe-gpu-pipeline -o %t.mlir
// RUN: moe-translate --moe-to-bundle %t.mlir -o %t.moebundle
// RUN: %python %testlib/show_bundle.py %t.moebundle | FileCheck %s
// Anything the runtime could not load is an error, not a file.
// RUN: not moe-translate --moe-to-bundle %s 2>&1 | FileCheck %s --check-prefix=NO-MANIFEST
// RUN: moe-opt %s --moe-gpu-pipeline=format=isa -o %t.isa.mlir
// RUN: not moe-translate --moe-to-bundle %t.isa.mlir 2>&1 | FileCheck %s --check-prefix=ISA
// RUN: sed -e 's/version = 7 : i64/version = 8 : i64/' %t.mlir > %t.v7.mlir
// RUN: not moe-translate --moe-to-bundle %t.v7.mlir 2>&1 | FileCheck %s --check-prefix=VERSION
// A kernel record's optional `cluster` (a kernel compiled for 2-CTA
// clusters) ends its kernel line; without it the line has none, so bundles
// without cluster kernels are unchanged.
// RUN: %python %testlib/show_bundle.py %t.moebundle | FileCheck %s --check-prefix=NO-CLUSTER
// RUN: sed -e 's/name = "grouped_matmul_bf16_64x256x64_s4_off32"/cluster = 2, &/' -e 's/name = "grouped_matmul_bf16_128x256x64_s4_off32"/cluster = 1 : i32, &/' %t.mlir > %t.cluster.mlir
// RUN: moe-translate --moe-to-bundle %t.cluster.mlir -o %t.cluster.moebundle
// RUN: %python %testlib/show_bundle.py %t.cluster.moebundle | FileCheck %s --check-prefix=CLUSTER
// Only the integers 1 and 2, 2 only on a normal-form grouped matmul kernel.
// RUN: sed -e 's/name = "grouped_matmul_bf16_64x256x64_s4_off32"/cluster = 3, &/' %t.mlir > %t.cluster3.mlir
// RUN: not moe-translate --moe-to-bundle %t.cluster3.mlir 2>&1 | FileCheck %s --check-prefix=CLUSTER3
// RUN: sed -e 's/name = "grouped_matmul_bf16_64x256x64_s4_off32"/cluster = "2", &/' %t.mlir > %t.cluster-text.mlir
// RUN: not moe-translate --moe-to-bundle %t.cluster-text.mlir 2>&1 | FileCheck %s --check-prefix=CLUSTER-TEXT
// RUN: sed -e 's/name = "grouped_matmul_bf16_16x64x64_s4_swapab_off32"/cluster = 2, &/' %t.mlir > %t.cluster-swap.mlir
// RUN: not moe-translate --moe-to-bundle %t.cluster-swap.mlir 2>&1 | FileCheck %s --check-prefix=CLUSTER-SWAP
// RUN: sed -e 's/name = "moe_route_softmax_topk_e64_k6_bf16"/cluster = 1, &/' %t.mlir > %t.cluster-route.mlir
// RUN: not moe-translate --moe-to-bundle %t.cluster-route.mlir 2>&1 | FileCheck %s --check-prefix=CLUSTER-ROUTE

// CHECK: MOEBUNDLE 7
// CHECK-NEXT: chip sm_90a
// CHECK-NEXT: image moe_kernels <{{[0-9]+}} bytes, ELF, fnv1a64 ok>
// CHECK-NEXT: entry gate_up op=moe.grouped_matmul abi=grouped_matmul.v3 experts=8 n=1024 k=512 max_rows=2147483647 offsets=i32 epilogue=store bias=none activation=none
// CHECK-NEXT: kernel gate_up grouped_matmul_bf16_16x64x64_s4_swapab_off32 image=moe_kernels rows_min=1 rows_max=16 threads=128 smem=40960 tile_m=16 tile_n=64 tile_k=64 stages=4 swap_ab=1
// CHECK-NEXT: kernel gate_up grouped_matmul_bf16_64x256x64_s4_off32 image=moe_kernels rows_min=17 rows_max=64 threads=128 smem=172032 tile_m=64 tile_n=256 tile_k=64 stages=4 swap_ab=0
// CHECK-NEXT: kernel gate_up grouped_matmul_bf16_128x256x64_s4_off32 image=moe_kernels rows_min=65 rows_max=2147483647 threads=256 smem=212992 tile_m=128 tile_n=256 tile_k=64 stages=4 swap_ab=0
// Then the entry's launch plan (docs/launch-plans.md): M rows, the four
// arguments, one launch per form, each form launched only when an expert
// can have rows_min rows.
// CHECK-NEXT: size gate_up M min=0 max=2147483647
// CHECK-NEXT: arg gate_up rows bf16 in align=16 dims=M,512
// CHECK-NEXT: arg gate_up weights bf16 in align=16 dims=8,1024,512
// CHECK-NEXT: arg gate_up offsets i32 in align=4 dims=9
// CHECK-NEXT: arg gate_up out bf16 out align=16 dims=M,1024
// CHECK-NEXT: launch gate_up 0 grid=min(min(ceildiv(M,16)+min(M,8),8)*16,resident) when=M>=1 params=tmap:rows:bf16:[512,M]:[1024]:[64,16];tmap:weights:bf16:[512,1024,8]:[1024,1048576]:[64,64,1];mem:offsets[9];mem:out[M,1024];i32:512;i32:1;i32:16
// CHECK-NEXT: launch gate_up 1 grid={{.*}} when=M>=17 params=
// CHECK-NEXT: launch gate_up 2 grid={{.*}} when=M>=65 params=
// CHECK-NEXT: entry decode op=moe.grouped_matmul abi=grouped_matmul.v3 experts=8 n=512 k=1024 max_rows=8 offsets=i64 epilogue=store bias=none activation=none
// CHECK-NEXT: kernel decode grouped_matmul_bf16_16x64x64_s4_swapab_off64 image=moe_kernels rows_min=1 rows_max=2147483647
// CHECK: launch decode 0
// Routing and combine entries carry their own ABI's keys; their one kernel
// has no row range or tile.
// CHECK-NEXT: entry router op=moe.route abi=route.v1 max_rows=2147483647 experts=64 top_k=6 logits=bf16 bias=0
// CHECK-NEXT: kernel router moe_route_softmax_topk_e64_k6_bf16 image=moe_kernels threads=128 smem=0
// CHECK-NEXT: size router T min=0 max=2147483647
// CHECK: launch router 0 grid=min(ceildiv(T,4),65535) when=1 params=mem:logits[T,64];mem:ids[T,6];mem:weights[T,6]
// CHECK-NEXT: entry combine op=moe.unpermute abi=unpermute.v2 max_rows=100 hidden=-1 top_k=6 slots=i32 weighted=0
// CHECK-NEXT: kernel combine moe_unpermute_k6_slots32 image=moe_kernels threads=128 smem=0
// A dynamic hidden size is a size, with the kernel's condition on it as a
// check.
// CHECK-NEXT: size combine M min=0 max=9223372036854775807
// CHECK-NEXT: size combine T min=0 max=100
// CHECK-NEXT: size combine H min=8 max=9223372036854775807
// CHECK: check combine H==floordiv(H,8)*8 H must be a multiple of 8 (rows are read in 16-byte vectors)
// CHECK-NEXT: launch combine 0
// A layer (--moe-fuse-layer) is its parts' entries, then its own, which
// names them and has no kernels. GPT-OSS's expert biases and activation
// are keys of the grouped GEMM entries.
// CHECK: entry gptoss_route op=moe.route abi=route.v1 {{.*}}top_k=2
// CHECK-NEXT: kernel gptoss_route moe_route_topk_softmax_e8_k2_f32
// CHECK: entry gptoss_permute op=moe.permute abi=permute.v2 {{.*}} chunk=4096 index_counts=1{{$}}
// CHECK-NEXT: kernel gptoss_permute moe_permute_count
// CHECK-NEXT: kernel gptoss_permute moe_permute_index
// CHECK-NEXT: kernel gptoss_permute moe_permute_gather
// CHECK: entry gptoss_gate_up op=moe.expert_mlp abi=grouped_matmul.v3 experts=8 n=256 k=256 max_rows=2147483647 offsets=i64 epilogue=swiglu bias=f32 activation=gptoss
// CHECK: entry gptoss_down op=moe.expert_mlp abi=grouped_matmul.v3 experts=8 n=256 k=128 max_rows=2147483647 offsets=i64 epilogue=store bias=f32 activation=none
// CHECK: entry gptoss_unpermute op=moe.unpermute abi=unpermute.v2 {{.*}}weighted=1
// CHECK-NEXT: kernel gptoss_unpermute
// CHECK: entry gptoss op=moe.layer abi=layer.v1 max_rows=2147483647 route=gptoss_route permute=gptoss_permute gate_up=gptoss_gate_up down=gptoss_down unpermute=gptoss_unpermute
// The layer's steps run its parts' kernels (part=) on its arguments and
// workspace slices.
// CHECK-NEXT: size gptoss T
// CHECK: work gptoss ids bytes=
// CHECK: launch gptoss 0 part=gptoss_route grid=min(ceildiv(T,4),65535) when=1 params=mem:logits[T,8];mem:@ids[T,2];mem:@weights[T,2]
// CHECK: launch gptoss 0 part=gptoss_unpermute
// CHECK-NEXT: end
// CHECK-EMPTY:

// NO-MANIFEST: error: moe-to-bundle: the module has no moe.manifest; run --moe-gpu-pipeline first
// ISA: error: moe-to-bundle: the object is not a cubin; compile with --moe-gpu-pipeline="format=bin"
// VERSION: error: moe-to-bundle: manifest version 8 : i64 is not 7

// NO-CLUSTER-NOT: cluster=
// CLUSTER: entry gate_up op=moe.grouped_matmul
// CLUSTER-NEXT: kernel gate_up grouped_matmul_bf16_16x64x64_s4_swapab_off32 {{.*}} swap_ab=1{{$}}
// CLUSTER-NEXT: kernel gate_up grouped_matmul_bf16_64x256x64_s4_off32 image=moe_kernels rows_min=17 rows_max=64 threads=128 smem=172032 tile_m=64 tile_n=256 tile_k=64 stages=4 swap_ab=0 cluster=2{{$}}
// CLUSTER-NEXT: kernel gate_up grouped_matmul_bf16_128x256x64_s4_off32 {{.*}} swap_ab=0 cluster=1{{$}}
// CLUSTER: entry decode
// CLUSTER-NOT: cluster=
// CLUSTER3: error: moe-to-bundle: kernel grouped_matmul_bf16_64x256x64_s4_off32 has cluster 3 : i64, not the integer 1 or 2
// CLUSTER-TEXT: error: moe-to-bundle: kernel grouped_matmul_bf16_64x256x64_s4_off32 has cluster "2", not the integer 1 or 2
// CLUSTER-SWAP: error: moe-to-bundle: kernel grouped_matmul_bf16_16x64x64_s4_swapab_off32 has cluster 2 and swap_ab: only the normal form runs as a cluster of 2 CTAs
// CLUSTER-ROUTE: error: moe-to-bundle: kernel moe_route_softmax_topk_e64_k6_bf16 has a 'cluster', but only grouped matmul kernels run as thread-block clusters
func.func @gate_up(%rows: tensor<?x512xbf16>, %w: tensor<8x1024x512xbf16>, %off: tensor<9xi32>) -> tensor<?x1024xbf16> {
  %y = moe.grouped_matmul %rows, %w, %off
      : (tensor<?x512xbf16>, tensor<8x1024x512xbf16>, tensor<9xi32>) -> tensor<?x1024xbf16>
  return %y : tensor<?x1024xbf16>
}
func.func @decode(%rows: tensor<8x1024xbf16>, %w: tensor<8x512x1024xbf16>, %off: tensor<9xi64>) -> tensor<8x512xbf16> {
  %y = moe.grouped_matmul %rows, %w, %off
      : (tensor<8x1024xbf16>, tensor<8x512x1024xbf16>, tensor<9xi64>) -> tensor<8x512xbf16>
  return %y : tensor<8x512xbf16>
}
func.func @router(%logits: tensor<?x64xbf16>) -> (tensor<?x6xi32>, tensor<?x6xf32>) {
  %ids, %w = moe.route softmax_topk %logits top 6
      : (tensor<?x64xbf16>) -> (tensor<?x6xi32>, tensor<?x6xf32>)
  return %ids, %w : tensor<?x6xi32>, tensor<?x6xf32>
}
func.func @combine(%rows: tensor<?x?xbf16>, %slots: tensor<100x6xi32>) -> tensor<100x?xbf16> {
  %y = moe.unpermute %rows, %slots : (tensor<?x?xbf16>, tensor<100x6xi32>) -> tensor<100x?xbf16>
  return %y : tensor<100x?xbf16>
}
func.func @gptoss(%x: tensor<?x256xbf16>, %logits: tensor<?x8xf32>,
    %w13: tensor<8x256x256xbf16>, %b13: tensor<8x256xf32>,
    %w2: tensor<8x256x128xbf16>, %b2: tensor<8x256xf32>) -> tensor<?x256xbf16> {
  %ids, %w = moe.route topk_softmax %logits top 2
      : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids
      : (tensor<?x256xbf16>, tensor<?x2xi32>) -> (tensor<?x256xbf16>, tensor<9xi64>, tensor<?x2xi64>)
  %h = moe.expert_mlp gptoss %rows, %offsets, %w13, %w2 gate_up_bias %b13 down_bias %b2
      : (tensor<?x256xbf16>, tensor<9xi64>, tensor<8x256x256xbf16>, tensor<8x256x128xbf16>, tensor<8x256xf32>, tensor<8x256xf32>) -> tensor<?x256xbf16>
  %y = moe.unpermute %h, %slots weights %w
      : (tensor<?x256xbf16>, tensor<?x2xi64>, tensor<?x2xf32>) -> tensor<?x256xbf16>
  return %y : tensor<?x256xbf16>
}
