#!/usr/bin/env bash
# The refactoring guard for the layers scripts/build-hf-cache.sh compiles for
# test/device/train_layer.py and expert_parallel.py, which
# scripts/compare-kernels.sh does not cover: runs the tree's own
# moe_mlir.compile_layer on each model of those tests (train: both backward
# variants and GPT-OSS's native layout; expert parallel: one rank's stages,
# forward and train) with its pipeline set to write the device code as PTX
# with manifests (format=isa) and a moe-translate that keeps that text, and
# writes the layers and their PTX into <out>. Two snapshots compare with
# `diff -r`, also across commits: pass the older commit's worktree, with
# moe-opt built in <tree>/build.
# Usage: scripts/snapshot-layer-kernels.sh <out> [tree]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?output folder}
tree=$(cd "${2:-$root}" && pwd)
python=$root/.venv/bin/python
[ -x "$python" ] || python=python3
export CUDA_ROOT=${CUDA_ROOT:-/usr/local/cuda}
rm -rf "$out" && mkdir -p "$out/compiler"
ln -s "$tree/build/bin/moe-opt" "$out/compiler/moe-opt"
# compile_layer's last step is `moe-translate --moe-to-bundle <in> -o <out>`.
printf '#!/bin/sh\ncp "$2" "$4"\n' > "$out/compiler/moe-translate"
chmod +x "$out/compiler/moe-translate"
"$python" - "$tree" "$out" <<'EOF'
import glob, os, re, shutil, sys
tree, out = sys.argv[1:3]
sys.path[:0] = [os.path.join(tree, "python"), os.path.join(tree, "test/device")]
sys.argv = [sys.argv[0], "/nonexistent"]  # the tests read their folder at import
import moe_mlir, expert_parallel, train_layer
from moe_mlir import layer
layer.PIPELINE += "=format=isa"
cache, compiler = os.path.join(out, "cache"), os.path.join(out, "compiler")
def specs(models):
    return [(name, moe_mlir.spec_from_config(fields))
            for name, (_, _, _, fields) in models.items()]
runs = [(name, spec, dict(train=True, recompute_rows=rows, native_layout=native))
        for name, spec in specs(dict(train_layer.MODELS, **train_layer.BENCH_MODELS))
        for rows in (False, True)
        for native in ((False, True) if spec.activation == "gptoss" else (False,))]
runs += [(name, spec, dict(expert_parallel=1, train=train))
         for name, spec in specs(expert_parallel.MODELS) for train in (False, True)]
for name, spec, how in runs:
    built = layer.compile_layer(spec, cache_dir=cache, compiler=compiler, **how)
    kind = os.path.basename(built).split(".", 1)[1].replace(".moebundle", "")
    with open(built) as f:  # the one property that differs from run to run
        text = re.sub(r"LLVMIRToISATimeInMs = [0-9]+ : i64, ", "", f.read())
    with open(os.path.join(out, f"{name}.{kind}.ptx.mlir"), "w") as f:
        f.write(text)
    for source in glob.glob(os.path.join(cache, spec.key(), "layer*.mlir")):
        shutil.copy(source, os.path.join(out, f"{name}.{os.path.basename(source)}"))
EOF
rm -rf "$out/cache" "$out/compiler"
echo "$(ls "$out"/*.ptx.mlir | wc -l) device modules in $out"
