#!/usr/bin/env bash
# Runs every test: the lit suite (dialect, passes, executable CPU layers and
# quantization, bundles, runtime, C API), the runtime's own checks, the
# installed package used out of tree, the fuzz regression corpus, and the
# clang-format check.
# Exits non-zero when any fails. Usage: scripts/test.sh [build-dir]
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
status=0

echo "== lit"
cmake --build "$build" --target check-moe || status=1

echo "== runtime (unit tests, C header, Python wrapper, bundle fuzz corpus)"
cmake --build "$build" --target check-moe-runtime || status=1

echo "== installed package (out-of-tree consumer, tools, C API)"
"$root/scripts/test-install.sh" "$build" || status=1

if [ -x "$build/bin/moe-fuzz" ]; then
  echo "== fuzz regression corpus (every saved input, no new exploration)"
  "$build/bin/moe-fuzz" -runs=0 "$root/fuzz/corpus" 2>&1 | tail -2 || status=1
fi

echo "== clang-format (LLVM style)"
mapfile -t sources < <(cd "$root" && git ls-files '*.cpp' '*.h')
if ! (cd "$root" && /usr/lib/llvm-22/bin/clang-format --dry-run --Werror "${sources[@]}"); then
  echo "clang-format: run /usr/lib/llvm-22/bin/clang-format -i on the files above"
  status=1
fi

[ $status -eq 0 ] && echo "== all tests passed" || echo "== SOME TESTS FAILED"
exit $status
