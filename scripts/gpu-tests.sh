#!/usr/bin/env bash
# GPU tests, run on the H200 through the device tool with `.gpu-artifacts`
# and `.shared-bench` carried (build the first here: scripts/build-gpu-
# artifacts.sh, then scripts/build-hf-cache.sh). Each test checks against
# float32/float64 torch references with outputs poisoned first; the file's
# docstring says what it covers:
#   grouped_matmul   every compiled GEMM bundle, swap-AB and normal, over 15
#                    routings, a CUDA-graph replay, the argument errors
#   grouped_dgrad    N-major-weight GEMMs, the activation's gradient fused
#   grouped_wgrad    per-expert weight gradients, skewed and empty experts
#   backward_ops     the backward's SIMT kernels against autograd
#   fp8_grouped_matmul, expert_mlp   block-FP8 GEMMs, the fused expert MLPs
#   routing          the five routers, the permutation and the combine
#   layer, shared_layer, decode_layer   whole bf16 layers against reference()
#   empty_batch      T = 0 through every token-dependent entry
#   quantize         the quantize kernel, bit-exact
#   fp8_layer, mxfp8_layer   block-FP8 and MXFP8 layers
#   layer_variants   the TMA-store layers bit-identical to the default ones
#   with .gpu-artifacts/hf-cache: hf_module, hf_experts, readme, train_layer,
#                    expert_parallel (one rank through NCCL)
# Prints each test's and the total `N passed, N failed`; exits non-zero on
# any failure.
#   scripts/gpu-tests.sh                the tests
#   scripts/gpu-tests.sh layer quantize only these tests
#   scripts/gpu-tests.sh --bench        then bench/grouped_matmul.py
# With the hf-cache, .gpu-artifacts outgrows the device tool's 64 MiB carry:
# pack it here (`mkdir -p .gpu-pack && tar czf .gpu-pack/artifacts.tgz
# .gpu-artifacts`, about a third of the size) and carry .gpu-pack instead;
# this script unpacks it.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
art=$root/.gpu-artifacts
bench=0 only=()
for arg in "$@"; do
  if [ "$arg" = --bench ]; then bench=1; else only+=("$arg"); fi
done
pack=$root/.gpu-pack/artifacts.tgz
if [ ! -d "$art" ] && [ -f "$pack" ]; then
  tar -xzf "$pack" -C "$root" || exit 2
fi
# The moe_mlir package (runtime library, ctypes layer, PyTorch module) as
# scripts/build-gpu-artifacts.sh installed its wheel: each test puts
# $art/site first on sys.path, so nothing is installed on this machine.
[ -f "$art/site/moe_mlir/libmoe_runtime.so" ] || { echo "no $art/site/moe_mlir: run scripts/build-gpu-artifacts.sh and carry .gpu-artifacts (or .gpu-pack)"; exit 2; }
PYTHONPATH=$art/site python3 -c 'import moe_mlir; print(f"moe_mlir {moe_mlir.__version__} from {moe_mlir.__file__}, {moe_mlir.library_path()}")' || exit 2
status=0 passed=0 failed=0
tests=(grouped_matmul grouped_dgrad grouped_wgrad backward_ops fp8_grouped_matmul expert_mlp routing
       layer decode_layer shared_layer empty_batch quantize fp8_layer mxfp8_layer layer_variants)
[ -d "$art/hf-cache" ] && tests+=(hf_module hf_experts readme train_layer expert_parallel)
[ ${#only[@]} -eq 0 ] || tests=("${only[@]}")
for test in "${tests[@]}"; do
  log=$(mktemp)
  python3 "$root/test/device/$test.py" "$art" "$root/.shared-bench" 2>&1 | tee "$log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  # Each test ends with `N passed, N failed`; a test that died says neither.
  counts=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -1)
  rm -f "$log"
  [ -n "$counts" ] || { counts="0 passed, 1 failed"; status=1; }
  passed=$((passed + ${counts%% *}))
  rest=${counts#*, }
  failed=$((failed + ${rest%% *}))
done
echo "all GPU tests: $passed passed, $failed failed"
# Say so when hf_module.py did not run (scripts/build-gpu-artifacts.sh
# removes the cache): the total is then short of the whole suite.
[ -d "$art/hf-cache" ] || [ ${#only[@]} -gt 0 ] || echo "hf_module.py, hf_experts.py, readme.py, train_layer.py and expert_parallel.py not run: no $art/hf-cache (run scripts/build-hf-cache.sh here, then carry .gpu-artifacts)"
if [ $bench -eq 1 ]; then
  python3 "$root/bench/grouped_matmul.py" "$art" "$root/.shared-bench" || status=1
fi
exit $status
