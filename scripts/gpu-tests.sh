#!/usr/bin/env bash
# GPU tests, run on the H200 through the device tool with `.gpu-artifacts`
# carried (build it here first: scripts/build-gpu-artifacts.sh). Runs
# test/device/grouped_matmul.py (every compiled bundle, both swap-AB and
# normal forms, each alone and split per expert on the device, over 15
# routings, a CUDA-graph replay and the runtime's argument errors) and
# test/device/grouped_dgrad.py (moe.grouped_dgrad's N-major-weights GEMMs,
# the same way, and two runs bit-identical; with the activation's gradient
# in the epilogue, against float64 autograd) and test/device/grouped_wgrad.py
# (moe.grouped_wgrad's per-expert weight gradients: skewed and empty experts,
# M = 0, the next expert's rows kept out, bit-identical runs) and
# test/device/backward_ops.py (the backward's SIMT kernels: swiglu_grad, silu
# and GPT-OSS at its clamps, against torch autograd) and
# test/device/expert_mlp.py (the fused expert MLP bundles) and
# test/device/routing.py (the five models' routers against shared/bench's
# route_model, the permutation and the combine; needs .shared-bench carried)
# and test/device/layer.py (whole layers route -> permute -> expert MLP ->
# unpermute against shared/bench's reference() for four models) and
# test/device/decode_layer.py (the decode kernel's layers, bit-equal to the
# default ones) and
# test/device/quantize.py (the quantize kernel, bit-exact against
# test/lib/moe_ref.py's quantize) and test/device/fp8_layer.py (the
# block-FP8 layers of four models against a float32 reference on the
# dequantized values) and test/device/mxfp8_layer.py (the MXFP8 layers of
# five models, the same way) and test/device/plans.py (each layer through
# its launch plan, moeLaunch, bit-identical to moeLayer) and
# test/device/layer_variants.py (the TMA-store layers bit-identical to the
# default ones over skewed routings), against float32
# torch references with
# outputs poisoned first. Prints each test's and the
# total `N passed, N failed`; exits non-zero on any failure.
#   scripts/gpu-tests.sh            the tests
#   scripts/gpu-tests.sh --bench    then bench/grouped_matmul.py (needs
#                                   .shared-bench carried too)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
art=$root/.gpu-artifacts
# The moe_mlir package (runtime library, ctypes layer, PyTorch module) as
# scripts/build-gpu-artifacts.sh installed its wheel: each test puts
# $art/site first on sys.path, so nothing is installed on this machine.
[ -f "$art/site/moe_mlir/libmoe_runtime.so" ] || { echo "no $art/site/moe_mlir: run scripts/build-gpu-artifacts.sh and carry .gpu-artifacts"; exit 2; }
PYTHONPATH=$art/site python3 -c 'import moe_mlir; print(f"moe_mlir {moe_mlir.__version__} from {moe_mlir.__file__}, {moe_mlir.library_path()}")' || exit 2
status=0 passed=0 failed=0
# With .gpu-artifacts/hf-cache (scripts/build-hf-cache.sh): test/device/hf_module.py
# (MoELayer.from_hf), hf_experts.py (experts_implementation="moe_mlir"),
# readme.py (the README's GPU snippets as written), train_layer.py
# (TrainableMoELayer's gradients against the blocks' autograd) and
# expert_parallel.py (one rank through NCCL) too.
for test in grouped_matmul grouped_dgrad grouped_wgrad backward_ops fp8_grouped_matmul expert_mlp routing layer decode_layer shared_layer empty_batch quantize fp8_layer mxfp8_layer layer_variants $([ -d "$art/hf-cache" ] && echo hf_module hf_experts readme train_layer expert_parallel); do
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
[ -d "$art/hf-cache" ] || echo "hf_module.py, hf_experts.py, readme.py, train_layer.py and expert_parallel.py not run: no $art/hf-cache (run scripts/build-hf-cache.sh here, then carry .gpu-artifacts)"
if [ "${1:-}" = "--bench" ]; then
  python3 "$root/bench/grouped_matmul.py" "$art" "$root/.shared-bench" || status=1
fi
exit $status
