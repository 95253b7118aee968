// --moe-gpu-pipeline="swap-ab-split-k=...": the swap-AB (decode) forms of
// the bf16 and block-FP8 GEMMs with two consumer warpgroups sharing each
// work item's K steps (warpgroup w takes steps 2i + w, the epilogue adds the
// two partial sums). Chosen per GEMM by default: from K = 8192 (Mixtral's
// down projection), one warpgroup below; MXFP8 always keeps one.
// RUN: moe-opt %s --moe-gpu-pipeline -o - | FileCheck %s --check-prefix=AUTO
// RUN: moe-opt %s --moe-quantize="scope=weights+activations" --moe-gpu-pipeline="format=isa" -o %t.isa.mlir
// RUN: FileCheck %s --check-prefix=FP8 --input-file %t.isa.mlir
// RUN: %python %S/../../prototypes/sm90_grouped_gemm/extract_gpu_object.py %t.isa.mlir %t.ptx
// RUN: awk '/[.]entry /{f = /grouped_matmul_fp8block_16x64x128_s8_swapab_rowscale_k2_off64[(]/} f' %t.ptx | FileCheck %s --check-prefix=PTX
// RUN: %ptxas -arch=sm_90a %t.ptx -o %t.cubin
// RUN: %cuobjdump --dump-resource-usage %t.cubin | sed -e '/_128x192x128_.*_ws_off64:/,+1d' | FileCheck %s --check-prefix=REGS
// RUN: %cuobjdump --dump-resource-usage %t.cubin | grep -A1 -e '_128x192x128_.*_ws_off64:' | FileCheck %s --check-prefix=WIDE-REGS
// RUN: moe-opt %s --moe-gpu-pipeline="swap-ab-split-k=1" -o - | FileCheck %s --check-prefix=ONE
// RUN: moe-opt %s --moe-gpu-pipeline="swap-ab-split-k=2" -o - | FileCheck %s --check-prefix=TWO
// RUN: moe-opt %s --moe-quantize="format=mxfp8 scope=weights+activations" --moe-gpu-pipeline="swap-ab-split-k=2" -o - | FileCheck %s --check-prefix=MX
// RUN: not moe-opt %s --moe-gpu-pipeline="swap-ab-split-k=3" 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not moe-opt %s --moe-gpu-pipeline="swap-ab-split-k=-1" 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// RUN: not moe-opt %s --moe-gpu-pipeline="swap-ab-split-k=2 swap-ab-stages=3" 2>&1 | FileCheck %s --check-prefix=STAGES

// Two warpgroups (256 threads) for the K = 14336 down projection only.
// AUTO: name = "grouped_matmul_bf16_16x64x64_s4_swapab_swiglu_off64", {{[^}]*}}swap_ab = true, tensor_map_args = array<i64: 0, 1>, threads = 128
// AUTO: name = "grouped_matmul_bf16_16x64x64_s8_swapab_rowscale_k2_off64", {{[^}]*}}swap_ab = true, tensor_map_args = array<i64: 0, 1>, threads = 256
// FP8: name = "grouped_matmul_fp8block_16x64x128_s4_swapab_swiglu_off64", {{[^}]*}}threads = 128
// FP8: name = "grouped_matmul_fp8block_16x64x128_s8_swapab_rowscale_k2_off64", {{[^}]*}}threads = 256

// Each warpgroup waits for its own step's stage and promotes it; after a
// barrier of its own (named barrier 1 + w, 128 threads) its first thread
// refills the stage of its previous step; the epilogue stores both
// warpgroups' f32 tiles and adds them.
// PTX: .visible .entry grouped_matmul_fp8block_16x64x128_s8_swapab_rowscale_k2_off64(
// PTX: .maxntid 256, 1, 1
// PTX: mbarrier.try_wait.parity
// PTX: wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3
// PTX: bar.sync {{%r[0-9]+}}, 128;
// PTX: bar.sync 0;
// PTX-NEXT: st.shared.v2.b32
// PTX: bar.sync 0;
// PTX: ld.shared.b32 [[A:%r[0-9]+]], [[[TILE:%rd[0-9]+]]+-4096];
// PTX: ld.shared.b32 [[B:%r[0-9]+]], [[[TILE]]];
// PTX: add.rn.f32 {{%r[0-9]+}}, [[A]], [[B]];
// PTX: ret;

// No kernel spills, but for the 192-column 128-row FP8 forms: ptxas keeps
// a few set-up words of theirs (at most 24 bytes) on the stack, reloaded
// once per work item, never in the K loop (no LDL/STL between its QGMMAs).
// REGS-NOT: LOCAL:{{[1-9]}}
// REGS-NOT: STACK:{{[1-9]}}
// WIDE-REGS-COUNT-2: STACK:{{([0-9]|1[0-9]|2[0-4])}} SHARED:{{[0-9]+}} LOCAL:0

// ONE-NOT: _k2_
// ONE: gpu.binary
// TWO: name = "grouped_matmul_bf16_16x64x64_s4_swapab_swiglu_k2_off64"
// TWO: name = "grouped_matmul_bf16_16x64x64_s8_swapab_rowscale_k2_off64"
// MXFP8's scale staging is per CTA: one warpgroup whatever the option.
// MX-NOT: _k2_
// MX: name = "grouped_matmul_mxfp8_16x64x128_s8_swapab_rowscale_off64"
// BAD: error: moe-select-kernels: 'swap-ab-split-k' must be 0 (chosen per GEMM), 1 or 2, got 3
// NEGATIVE: error: moe-select-kernels: 'swap-ab-split-k' must be 0 (chosen per GEMM), 1 or 2, got -1
// Each warpgroup owns every other stage and refills its previous step's:
// with fewer than two of its own, a step would wait on loads issued after it.
// STAGES: error: moe-select-kernels: swap-AB forms splitting K between 2 warpgroups need 'swap-ab-stages' to be a multiple of 2 of at least 4, got 3

func.func @mixtral_mlp(%rows: tensor<?x4096xbf16>, %off: tensor<9xi64>,
    %w13: tensor<8x28672x4096xbf16>, %w2: tensor<8x4096x14336xbf16>,
    %s: tensor<?xf32>) -> tensor<?x4096xbf16> {
  %y = moe.expert_mlp silu %rows, %off, %w13, %w2 scale %s
      : (tensor<?x4096xbf16>, tensor<9xi64>, tensor<8x28672x4096xbf16>, tensor<8x4096x14336xbf16>, tensor<?xf32>) -> tensor<?x4096xbf16>
  return %y : tensor<?x4096xbf16>
}
