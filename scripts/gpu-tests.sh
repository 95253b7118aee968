#!/usr/bin/env bash
# GPU tests, run on the H200 through the device tool with `.gpu-artifacts`
# carried (build it here with scripts/build-gpu-artifacts.sh). Checks every
# grouped GEMM kernel against a float32 torch reference on fresh random
# inputs, outputs poisoned first, over 8 routings (uniform, all rows to one
# expert, empty experts, 1 row, N/K tails, K = 4096, 131072 rows with
# M*N > 2^31), and prints `N passed, N failed` over all of them.
# Add --bench to time each kernel beside torch._grouped_mm.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
art=$root/.gpu-artifacts
[ -f "$art/kernels.txt" ] || { echo "no $art/kernels.txt: run scripts/build-gpu-artifacts.sh and carry .gpu-artifacts"; exit 2; }
passed=0; failed=0
while read -r name tm tn smem; do
  echo "== $name"
  log=$(python3 "$root/prototypes/sm90_grouped_gemm/launch.py" --cubin "$art/$name.cubin" \
        --kernel "$name" --tile-m "$tm" --tile-n "$tn" --dynamic-smem "$smem" --timeout 120 "$@" 2>&1)
  echo "$log" | grep -E "PASS|FAIL|passed|gate-up"
  summary=$(echo "$log" | grep -E "^[0-9]+ passed, [0-9]+ failed$" | tail -1)
  if [ -z "$summary" ]; then
    echo "FAIL $name: no summary (crash?)"; echo "$log" | tail -5; failed=$((failed + 1)); continue
  fi
  passed=$((passed + $(echo "$summary" | cut -d' ' -f1)))
  failed=$((failed + $(echo "$summary" | cut -d' ' -f3)))
done < "$art/kernels.txt"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
