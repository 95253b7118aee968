#!/usr/bin/env bash
# A baseline for a regression check across commits whose bundles today's
# runtime cannot launch (no launch plans: commits before the Python package,
# e.g. 81382b2, issue 27's baseline): builds <commit>'s compiler and runtime
# in a worktree, compiles its own test/device/layer_models.mlir into the
# bf16 and block-FP8 layer bundles its test/device/layer.py and
# fp8_layer.py --bench read, and puts them with that runtime
# (libmoe_runtime.so, moe_runtime.py) and those scripts into <dir>.
# On the GPU, with <dir> and .gpu-artifacts carried, run back to back on one
# machine (the peers' columns are the control):
#   python3 <dir>/layer.py <dir> .shared-bench --bench
#   python3 test/device/layer.py .gpu-artifacts .shared-bench --bench
# and the same for fp8_layer.py, with PYTORCH_CUDA_ALLOC_CONF=
# expandable_segments:True. On an 80 GB card DeepSeek-V3's block-FP8 bench
# fits only with today's rowwise_weights (one expert at a time) in <dir>'s
# fp8_layer.py too: the peer's weights, not the layer under test.
# Usage: scripts/build-baseline-layers.sh <commit> <dir>
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
commit=${1:?commit}
dir=${2:?output folder}
llvm=/usr/lib/llvm-22
tree=$(mktemp -d)/tree
git -C "$root" worktree add -q --detach "$tree" "$commit"
trap 'git -C "$root" worktree remove --force "$tree"' EXIT
[ -f "$tree/runtime/python/moe_runtime.py" ] || {
  echo "$commit has the Python package: its bundles carry launch plans, so bench/ab_layer.py compares them in one process"
  exit 2
}
site=$root/.venv/lib/python3.11/site-packages
cmake -G Ninja -S "$tree" -B "$tree/build" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_C_COMPILER=$llvm/bin/clang -DCMAKE_CXX_COMPILER=$llvm/bin/clang++ \
  -DLLVM_USE_LINKER=lld -DMLIR_DIR=$llvm/lib/cmake/mlir -DLLVM_EXTERNAL_LIT=$llvm/bin/lit \
  -DMOE_PYTHON="$root/.venv/bin/python" -DMOE_CUDA_TOOLKIT=/usr/local/cuda \
  -DMOE_CUDA_DISASSEMBLERS="$site/nvidia/cu13/bin" \
  -DMOE_NCCL_INCLUDE="$site/nvidia/nccl/include" > "$tree/configure.log"
ninja -C "$tree/build" moe-opt moe-translate moe_runtime > "$tree/build.log"
mkdir -p "$dir"
bin=$tree/build/bin
bundle() { # <name> <input> <moe-opt options...>
  local name=$1 input=$2
  shift 2
  "$bin/moe-opt" "$input" "$@" -o "$tree/$name.mlir"
  "$bin/moe-translate" --moe-to-bundle "$tree/$name.mlir" -o "$dir/$name.moebundle"
}
models=$tree/test/device/layer_models.mlir
# As that commit's build-gpu-artifacts.sh: the FP8 layers without GPT-OSS.
awk '/^func.func @gpt_oss_120b/ { skip = 1 } !skip { print } skip && /^}/ { skip = 0 }' \
  "$models" > "$tree/fp8_layer_models.mlir"
q="--moe-quantize=scope=weights+activations"
bundle layer "$models" --moe-gpu-pipeline
bundle fp8layer "$tree/fp8_layer_models.mlir" "$q" --moe-gpu-pipeline
bundle fp8layer-epilogue "$tree/fp8_layer_models.mlir" "$q" --moe-gpu-pipeline="fp8-epilogue-quantize=1"
bundle fp8layer-separate "$tree/fp8_layer_models.mlir" "$q" --moe-gpu-pipeline="fp8-gather-quantize=0"
bundle fp8layer-scatter "$tree/fp8_layer_models.mlir" "$q" --moe-gpu-pipeline="fp8-scatter-min-tokens=1"
bundle fp8layer-gather "$tree/fp8_layer_models.mlir" "$q" --moe-gpu-pipeline="fp8-scatter-min-tokens=0"
bundle fp8permute-scatter "$tree/test/device/fp8_permutes.mlir" "$q" --moe-gpu-pipeline="fp8-scatter-min-tokens=1"
bundle fp8permute-separate "$tree/test/device/fp8_permutes.mlir" "$q" --moe-gpu-pipeline="fp8-gather-quantize=0"
cp "$tree/build/lib/libmoe_runtime.so" "$tree/runtime/python/moe_runtime.py" \
  "$tree/test/device/layer.py" "$tree/test/device/fp8_layer.py" "$tree/test/device/fp8_grouped_matmul.py" \
  "$tree/test/device/tally.py" "$tree/test/device/routings.py" "$dir/"
echo "$commit" > "$dir/COMMIT"
ls -l "$dir"
