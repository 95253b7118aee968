#!/usr/bin/env bash
# Builds, on this machine (it has MLIR; the GPU machine does not), the
# grouped GEMM cubins that scripts/gpu-tests.sh checks on the H200: the
# normal kernel and the swap-AB kernels, each from --moe-gpu-pipeline's
# passes. Output: .gpu-artifacts/<name>.cubin plus kernels.txt (name,
# tile-m, tile-n, dynamic shared bytes), for the device tool's `carry`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
moe_opt=${MOE_OPT:-$root/build/bin/moe-opt}
cuda=${CUDA:-/usr/local/cuda}
out=$root/.gpu-artifacts
rm -rf "$out" && mkdir -p "$out"
cat > "$out/input.mlir" <<'MLIR'
func.func @gate_up(%rows: tensor<?x4096xbf16>, %w: tensor<8x28672x4096xbf16>, %off: tensor<9xi32>) -> tensor<?x28672xbf16> {
  %y = moe.grouped_matmul %rows, %w, %off
      : (tensor<?x4096xbf16>, tensor<8x28672x4096xbf16>, tensor<9xi32>) -> tensor<?x28672xbf16>
  return %y : tensor<?x28672xbf16>
}
MLIR
# variant: options of convert-moe-to-nvgpu
variants=("tile-n=128 stages=2" "tile-n=256 stages=4"
          "swap-ab=1 tile-m=8 tile-n=64 stages=4" "swap-ab=1 tile-m=16 tile-n=64 stages=4"
          "swap-ab=1 tile-m=32 tile-n=64 stages=4" "swap-ab=1 tile-m=64 tile-n=64 stages=4")
: > "$out/kernels.txt"
for v in "${variants[@]}"; do
  "$moe_opt" "$out/input.mlir" --convert-moe-to-nvgpu="$v" --moe-extract-device-code \
    -gpu-lower-to-nvvm-pipeline="cubin-chip=sm_90a cubin-features=+ptx80 opt-level=3 cubin-format=isa" \
    -o "$out/lowered.mlir"
  # name, tile and shared memory come from the manifest the pipeline wrote
  read -r name tm tn smem < <(python3 - "$out/lowered.mlir" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
m = re.search(r'dynamic_shared_bytes = (\d+).*?name = "([^"]+)".*?tile = array<i64: (\d+), (\d+)', text)
print(m.group(2), m.group(3), m.group(4), m.group(1))
PY
)
  python3 "$root/prototypes/sm90_grouped_gemm/extract_gpu_object.py" "$out/lowered.mlir" "$out/$name.ptx" > /dev/null
  "$cuda/bin/ptxas" -arch=sm_90a -O3 "$out/$name.ptx" -o "$out/$name.cubin"
  echo "$name $tm $tn $smem" >> "$out/kernels.txt"
done
rm -f "$out/lowered.mlir"
cat "$out/kernels.txt"
