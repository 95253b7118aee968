#!/usr/bin/env bash
# The refactoring guard: compiles every bundle scripts/build-gpu-artifacts.sh
# makes for the GPU suite (default kernels and every option variant it
# tests) to PTX and compares it, with the manifests, byte for byte against a
# snapshot taken before the change. The hf-cache layers of train_layer.py and
# expert_parallel.py: scripts/snapshot-layer-kernels.sh.
# Usage: scripts/compare-kernels.sh save <dir>      (before the change)
#        scripts/compare-kernels.sh check <dir>     (after: exit 1 on any difference)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:?save or check}
dir=${2:?snapshot directory}
case $mode in
  save) MOE_KERNEL_SNAPSHOT="$dir" "$root/scripts/build-gpu-artifacts.sh" > /dev/null
        echo "saved $(ls "$dir"/*.ptx.mlir | wc -l) device modules in $dir" ;;
  check)
    now=$(mktemp -d)
    MOE_KERNEL_SNAPSHOT="$now" "$root/scripts/build-gpu-artifacts.sh" > /dev/null
    if diff -rq "$dir" "$now"; then
      echo "identical: $(ls "$now"/*.ptx.mlir | wc -l) device modules (PTX and manifests)"
      rm -rf "$now"
    else
      echo "DIFFERENT: see diff -r $dir $now"; exit 1
    fi ;;
  *) echo "usage: $0 save|check <dir>" >&2; exit 2 ;;
esac
