#!/usr/bin/env bash
# The refactoring guard for the layers scripts/build-hf-cache.sh compiles for
# test/device/train_layer.py and expert_parallel.py, which
# scripts/compare-kernels.sh does not cover: builds each model's layer as the
# tree's moe_mlir.compile_layer does (--moe-build-layer with the tree's own
# LayerSpec options; train: both backward variants and GPT-OSS's native
# layout; expert parallel: one rank's stages, forward and train) and writes
# the layer and its device code as PTX with manifests (format=isa) into
# <out>. Two snapshots compare with `diff -r`, also across commits: pass the
# older commit's worktree, with moe-opt built in <tree>/build.
# Usage: scripts/snapshot-layer-kernels.sh <out> [tree]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?output folder}
tree=$(cd "${2:-$root}" && pwd)
opt=$tree/build/bin/moe-opt
python=$root/.venv/bin/python
[ -x "$python" ] || python=python3
export CUDA_ROOT=${CUDA_ROOT:-/usr/local/cuda}
rm -rf "$out" && mkdir -p "$out"
: > "$out/empty.mlir"
# <kind> <name> <options> <GPT-OSS: 1>, from the tree's tests' model tables.
"$python" - "$tree" > "$out/models.tsv" <<'EOF'
import os, sys
tree = sys.argv[1]
sys.path[:0] = [os.path.join(tree, "python"), os.path.join(tree, "test/device")]
sys.argv = [sys.argv[0], "/nonexistent"]  # the tests read their folder at import
import moe_mlir, expert_parallel, train_layer
tables = (("train", dict(train_layer.MODELS, **train_layer.BENCH_MODELS)),
          ("ep", expert_parallel.MODELS))
for kind, models in tables:
    for name, (_, _, _, fields) in models.items():
        spec = moe_mlir.spec_from_config(fields)
        print(kind, name, spec.options(), int(spec.activation == "gptoss"), sep="\t")
EOF
isa() { # <source> <output> <moe-opt options...>
  local source=$1 output=$2
  shift 2
  "$opt" "$source" "$@" --moe-gpu-pipeline=format=isa -o "$output"
  # The one property that differs from run to run: the time PTX took.
  sed -i -E 's/LLVMIRToISATimeInMs = [0-9]+ : i64, //' "$output"
}
while IFS=$'\t' read -r kind name options gptoss; do
  if [ "$kind" = ep ]; then
    for mode in forward train; do
      back=()
      [ $mode = train ] && back=(--moe-generate-backward)
      source=$out/$name.ep1.$mode.mlir
      "$opt" "$out/empty.mlir" "--moe-build-layer=$options" -o "$source"
      "$opt" "$source" --moe-expert-parallel=ranks=1 "${back[@]}" --moe-split-exchanges \
        -o "$source"
      isa "$source" "$out/$name.ep1.$mode.ptx.mlir"
    done
    continue
  fi
  layouts=(default)
  [ "$gptoss" = 1 ] && layouts+=(native)
  for layout in "${layouts[@]}"; do
    source=$out/$name.train.mlir build=$options
    if [ $layout = native ]; then
      source=$out/$name.train-native.mlir build="$options native-layout=true"
    fi
    "$opt" "$out/empty.mlir" "--moe-build-layer=$build" -o "$source"
    isa "$source" "${source%.mlir}.ptx.mlir" --moe-generate-backward
    isa "$source" "${source%.mlir}-recompute-rows.ptx.mlir" \
      --moe-generate-backward=recompute-rows=true
  done
done < "$out/models.tsv"
echo "$(ls "$out"/*.ptx.mlir | wc -l) device modules in $out"
