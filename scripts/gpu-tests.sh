#!/usr/bin/env bash
# GPU tests, run on the H200 through the device tool with `.gpu-artifacts`
# carried (build it here first: scripts/build-gpu-artifacts.sh). Runs
# test/device/grouped_matmul.py: every compiled bundle (both swap-AB and
# normal forms, each alone and split per expert on the device) over 15
# routings, a CUDA-graph replay and the runtime's argument errors, against
# a float32 torch reference with outputs poisoned first. Prints
# `N passed, N failed`; exits non-zero on any failure.
#   scripts/gpu-tests.sh            the tests
#   scripts/gpu-tests.sh --bench    then bench/grouped_matmul.py (needs
#                                   .shared-bench carried too)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
art=$root/.gpu-artifacts
[ -f "$art/libmoe_runtime.so" ] || { echo "no $art/libmoe_runtime.so: run scripts/build-gpu-artifacts.sh and carry .gpu-artifacts"; exit 2; }
python3 "$root/test/device/grouped_matmul.py" "$art"
status=$?
if [ "${1:-}" = "--bench" ]; then
  python3 "$root/bench/grouped_matmul.py" "$art" "$root/.shared-bench" || status=1
fi
exit $status
