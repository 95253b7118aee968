#!/usr/bin/env bash
# Compiles here (this machine has MLIR; the GPU machine does not) the MoE
# layers test/device/hf_module.py converts with moe_mlir.MoELayer.from_hf
# (the six reference models' layers) and the experts layers
# test/device/hf_experts.py and bench/hf_experts.py run through
# experts_implementation="moe_mlir",
# from the same configurations and the same specs as the tests, so their
# cache keys match. Output:
# .gpu-artifacts/hf-cache/<layer key>/{layer.mlir,<compiler id>.moebundle}.
# Run it after scripts/build-gpu-artifacts.sh (which empties .gpu-artifacts),
# then carry .gpu-artifacts with the device tool. With MOE_EP_RANKS=2,4,8
# (for a multi-GPU machine) also the N-rank layers of
# test/device/expert_parallel_ranks.py and bench/expert_parallel.py.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build}
export CUDA_ROOT=${CUDA_ROOT:-/usr/local/cuda}
python=$root/.venv/bin/python
[ -x "$python" ] || python=python3
mkdir -p "$root/.gpu-artifacts"
"$python" "$root/test/device/hf_module.py" --build-cache "$root/.gpu-artifacts/hf-cache" \
  --compiler "$build/bin"
"$python" "$root/test/device/hf_experts.py" --build-cache "$root/.gpu-artifacts/hf-cache" \
  --compiler "$build/bin"
"$python" "$root/bench/hf_experts.py" --build-cache "$root/.gpu-artifacts/hf-cache" \
  --compiler "$build/bin"
"$python" "$root/test/device/train_layer.py" --build-cache "$root/.gpu-artifacts/hf-cache" \
  --compiler "$build/bin"
"$python" "$root/test/device/expert_parallel.py" --build-cache "$root/.gpu-artifacts/hf-cache" \
  --compiler "$build/bin"
if [ -n "${MOE_EP_RANKS:-}" ]; then
  "$python" "$root/test/device/expert_parallel_ranks.py" --build-cache \
    "$root/.gpu-artifacts/hf-cache" --ranks "$MOE_EP_RANKS" --compiler "$build/bin"
  "$python" "$root/bench/expert_parallel.py" --build-cache "$root/.gpu-artifacts/hf-cache" \
    --ranks "1,$MOE_EP_RANKS" --compiler "$build/bin"
fi
