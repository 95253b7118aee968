// --moe-gpu-pipeline turns a grouped_matmul into a gpu.binary whose PTX has
// TMA loads, mbarriers and 4 K-major wgmma per K step, which ptxas
// assembles for sm_90a; with format=bin the binary is a cubin (ELF).
// RUN: not moe-opt %s --moe-gpu-pipeline="chip=sm_80" 2>&1 | FileCheck %s --check-prefix=CHIP
// RUN: not moe-opt %s --moe-gpu-pipeline="chip=sm_100a" 2>&1 | FileCheck %s --check-prefix=SM100
// RUN: not moe-opt %s --moe-gpu-pipeline="swap-ab-max-rows=100" 2>&1 | FileCheck %s --check-prefix=ROWS
// RUN: not moe-opt %s --moe-gpu-pipeline="bogus=1" 2>&1 | FileCheck %s --check-prefix=BOGUS
// RUN: moe-opt %s --moe-gpu-pipeline="chip=sm_90a format=isa" -o %t.isa.mlir
// RUN: FileCheck %s --check-prefix=MANIFEST --input-file %t.isa.mlir
// RUN: %python %S/../../prototypes/sm90_grouped_gemm/extract_gpu_object.py %t.isa.mlir %t.ptx
// RUN: FileCheck %s --check-prefix=PTX --input-file %t.ptx
// RUN: %ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS --implicit-check-not=C7515
// RUN: env CUDA_ROOT=%cuda_toolkit moe-opt %s --moe-gpu-pipeline -o %t.bin.mlir
// RUN: %python %S/../../prototypes/sm90_grouped_gemm/extract_gpu_object.py %t.bin.mlir %t.bin.cubin
// RUN: %python -c "import sys; d = open(sys.argv[1], 'rb').read(); sys.exit(0 if d[:4] == b'\x7fELF' else 'not an ELF cubin')" %t.bin.cubin
// RUN: %cuobjdump -sass -fun grouped_matmul_bf16_64x256x64_s4_off64 %t.bin.cubin | FileCheck %s --check-prefix=SASS
// RUN: %cuobjdump -sass -fun grouped_matmul_bf16_16x64x64_s4_swapab_off64 %t.bin.cubin | FileCheck %s --check-prefix=SWAP-SASS
// RUN: %cuobjdump -sass -fun grouped_matmul_bf16_128x256x64_s4_off64 %t.bin.cubin | FileCheck %s --check-prefix=WIDE-SASS

// The tensor cores and the copy engine do the work: 4 HGMMA per K step
// (twice: the loop is peeled by ptxas or not, so at least 4), TMA loads.
// SASS: Function : grouped_matmul_bf16_64x256x64_s4_off64
// SASS-COUNT-4: HGMMA.64x256x16.F32.BF16
// SASS: UTMALDG.3D
// SWAP-SASS: Function : grouped_matmul_bf16_16x64x64_s4_swapab_off64
// SWAP-SASS-COUNT-4: HGMMA.64x16x16.F32.BF16
// SWAP-SASS: UTMALDG.2D
// WIDE-SASS: Function : grouped_matmul_bf16_128x256x64_s4_off64
// WIDE-SASS-COUNT-4: HGMMA.64x256x16.F32.BF16
// WIDE-SASS: UTMALDG.3D
// ptxas keeps the wgmma of every form in flight across K steps: no
// "wgmma.mma_async instructions are serialized" (C7515, e.g. from a branch
// whose join defines accumulators of wgmma still in flight).
// PTXAS: Compiling entry function 'grouped_matmul_bf16_128x256x64_s4_off64'

// Three forms by default, each for the experts whose row count lies in its
// range: swap-AB up to 16 rows (--moe-select-kernels' swap-ab-max-rows), a 64-row tile
// up to 64, the 128-row tile (two warpgroups) above.
// CHIP: error: moe-select-kernels: no kernels for chip 'sm_80' yet (sm_90a, and sm_100a for the MXFP8 grouped_matmul)
// SM100: error: 'moe.grouped_matmul' op cannot be lowered to sm_100a yet: only MXFP8 operands are implemented
// ROWS: error: moe-select-kernels: 'swap-ab-max-rows' must be in [0, 64] (WGMMA's N holds at most 64 tokens), got 100
// BOGUS: no such option bogus
// MANIFEST: moe.manifest = {entries = [{abi = "grouped_matmul.v3",
// MANIFEST-SAME: name = "grouped_matmul_bf16_16x64x64_s4_swapab_off64", rows_max = 16 : i64, rows_min = 1 : i64, swap_ab = true
// MANIFEST-SAME: dynamic_shared_bytes = 172032 : i64, {{.*}}name = "grouped_matmul_bf16_64x256x64_s4_off64", {{.*}}rows_max = 64 : i64, rows_min = 17
// MANIFEST-SAME: dynamic_shared_bytes = 212992 : i64, {{.*}}name = "grouped_matmul_bf16_128x256x64_s4_off64", {{.*}}rows_max = 2147483647 : i64, rows_min = 65 : i64, {{.*}}threads = 256
// MANIFEST-SAME: name = "gate_up"
// MANIFEST-SAME: version = 7
// MANIFEST: gpu.binary @moe_kernels
// MANIFEST-NOT: func.func

// PTX: .target sm_90a
// PTX: .extern .shared .align 1024 .b8 moe_dynamic_smem[];
// PTX: .visible .entry grouped_matmul_bf16_16x64x64_s4_swapab_off64(
// PTX: .visible .entry grouped_matmul_bf16_64x256x64_s4_off64(
// PTX: .visible .entry grouped_matmul_bf16_128x256x64_s4_off64(
// PTX: .maxntid 256, 1, 1

// The PTX of one kernel. The tensor maps are 128-byte grid constants in
// parameter space, read through their generic addresses
// (docs/runtime-contract.md); then the memrefs, K, rows_min, rows_max.
// RUN: awk '/[.]entry /{f = /grouped_matmul_bf16_64x256x64_s4_off64[(]/} f' %t.ptx > %t.k64.ptx
// RUN: FileCheck %s --check-prefix=K64 --input-file %t.k64.ptx
// RUN: awk '/[.]entry /{f = /grouped_matmul_bf16_16x64x64_s4_swapab_off64[(]/} f' %t.ptx | FileCheck %s --check-prefix=SWAP
// Instruction counts of the 64x256 kernel, pinned: 9 load sites (4 stages
// of the first tile's prologue, 4 of the next tile's, issued before the
// epilogue, 1 refill) of 2 TMA loads each with one expect_tx; 4 stage
// mbarriers; 8 wgmma (4 per K step; the main loop body appears twice in
// the PTX after LLVM's loop transformations).
// RUN: grep -cF 'cp.async.bulk.tensor' %t.k64.ptx | FileCheck %s --check-prefix=K64-TMA
// RUN: grep -cF 'mbarrier.arrive.expect_tx' %t.k64.ptx | FileCheck %s --check-prefix=K64-EXPECT
// RUN: grep -cF 'mbarrier.init.shared' %t.k64.ptx | FileCheck %s --check-prefix=K64-INIT
// RUN: grep -cF 'wgmma.mma_async' %t.k64.ptx | FileCheck %s --check-prefix=K64-WGMMA
// RUN: not grep -F 'griddepcontrol.launch_dependents' %t.k64.ptx
// K64-TMA: {{^}}18{{$}}
// K64-EXPECT: {{^}}9{{$}}
// K64-INIT: {{^}}4{{$}}
// K64-WGMMA: {{^}}8{{$}}
// K64: .param .align 64 .b8 grouped_matmul_bf16_64x256x64_s4_off64_param_0[128],
// K64-NEXT: .param .align 64 .b8 grouped_matmul_bf16_64x256x64_s4_off64_param_1[128],
// K64-COUNT-12: .param .u64
// K64-COUNT-3: .param .u32
// K64: .maxntid 128, 1, 1
// The tile lookup (warp shuffles and a ballot over 32 experts at a time),
// the TMA pipeline on mbarriers, the drain before the epilogue, bf16 out.
// K64-DAG: cvta.param.u64
// Programmatic dependent launch: wait for the previous kernel's writes (a
// no-op without the launch attribute); a GEMM lets the next kernel launch
// only when it ends, so no launch_dependents.
// K64-DAG: griddepcontrol.wait;
// K64-DAG: shfl.sync.up.b32
// K64-DAG: vote.sync.ballot.b32
// K64-DAG: shfl.sync.idx.b32
// K64-DAG: mbarrier.init.shared.b64
// K64-DAG: mbarrier.arrive.expect_tx.shared.b64
// K64-DAG: cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// K64-DAG: cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// K64-DAG: mbarrier.try_wait.parity.shared.b64
// K64-DAG: wgmma.wait_group.sync.aligned {{[[:space:]]*}}0;
// K64-DAG: cvt.rn.bf16x2.f32
// K64-DAG: st.global.v4.b32
// Each of the 4 wgmma of a K step leaves up to one step (4 groups) in
// flight.
// K64: wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 0, 0;
// K64: wgmma.commit_group.sync.aligned
// K64-NEXT: wgmma.wait_group.sync.aligned {{[[:space:]]*}}4;
// K64-COUNT-3: wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 0, 0;
// SWAP-COUNT-4: wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 0, 0;
func.func @gate_up(%rows: tensor<?x4096xbf16>, %w: tensor<8x28672x4096xbf16>, %off: tensor<9xi64>) -> tensor<?x28672xbf16> {
  %y = moe.grouped_matmul %rows, %w, %off
      : (tensor<?x4096xbf16>, tensor<8x28672x4096xbf16>, tensor<9xi64>) -> tensor<?x28672xbf16>
  return %y : tensor<?x28672xbf16>
}
