#!/usr/bin/env bash
# The runtime on a GPU (an H100/H200; nvcc, torch): builds the reference
# kernels, then runs gpu_test.py with libmoe_runtime.so and, against the real
# libcuda, the unit tests. Usage: runtime/test/gpu/run.sh [runtime build dir]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../../../build-runtime}
work=$(mktemp -d)
nvcc -arch=sm_90a -cubin -O2 -o "$work/reference.cubin" "$here/abi_reference_kernels.cu"
status=0
MOE_RUNTIME_LIB="$build/lib/libmoe_runtime.so" python3 "$here/gpu_test.py" "$work/reference.cubin" || status=1
"$build/bin/moe-runtime-tests" | tail -1 || status=1
exit $status
