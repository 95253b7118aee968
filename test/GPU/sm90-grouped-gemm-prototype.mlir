// The hand-written sm_90a grouped GEMM prototype lowers through upstream
// passes to PTX with TMA, mbarriers and 4 K-major wgmma per K step, and
// ptxas assembles it for sm_90a.
// RUN: moe-opt %S/../../prototypes/sm90_grouped_gemm/grouped_gemm_sm90.mlir --mlir-print-op-on-diagnostic=false -gpu-lower-to-nvvm-pipeline="cubin-chip=sm_90a cubin-features=+ptx80 opt-level=3 cubin-format=isa" -o %t.isa.mlir
// RUN: %python %S/../../prototypes/sm90_grouped_gemm/extract_gpu_object.py %t.isa.mlir %t.ptx
// RUN: FileCheck --input-file %t.ptx %S/sm90-grouped-gemm-prototype.ptx.check
// RUN: %ptxas -arch=sm_90a %t.ptx -o %t.cubin
