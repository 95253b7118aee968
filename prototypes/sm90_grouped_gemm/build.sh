#!/usr/bin/env bash
# grouped_gemm_sm90.mlir -> PTX -> cubin (sm_90a) with moe-opt (upstream
# passes) and ptxas, into ./build next to this script; launch.py runs it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
moe_opt=${MOE_OPT:-$root/build/bin/moe-opt}
cuda=${CUDA:-/usr/local/cuda}
mkdir -p "$here/build"
"$moe_opt" --mlir-print-op-on-diagnostic=false \
  -gpu-lower-to-nvvm-pipeline="cubin-chip=sm_90a cubin-features=+ptx80 opt-level=3 cubin-format=isa" \
  "$here/grouped_gemm_sm90.mlir" -o "$here/build/grouped_gemm_sm90.isa.mlir"
python3 "$here/extract_gpu_object.py" "$here/build/grouped_gemm_sm90.isa.mlir" "$here/build/grouped_gemm_sm90.ptx"
"$cuda/bin/ptxas" -arch=sm_90a -O3 -v "$here/build/grouped_gemm_sm90.ptx" \
  -o "$here/build/grouped_gemm_sm90.cubin"
