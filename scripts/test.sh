#!/usr/bin/env bash
# Runs every test: the lit suite (dialect, passes, executable CPU layers and
# quantization, bundles, runtime, C API), the runtime's own checks, the
# Python package as pip installed it, the installed package used out of
# tree, the fuzz regression corpus, and the clang-format check.
# Exits non-zero when any fails. Usage: scripts/test.sh [build-dir]
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
status=0

echo "== lit"
cmake --build "$build" --target check-moe || status=1

echo "== runtime (unit tests, C header, Python package from the source tree, bundle fuzz corpus)"
cmake --build "$build" --target check-moe-runtime || status=1

echo "== the moe_mlir Python package as \`pip install ./python\` installed it into .venv"
# The Python tests again, against the installed package (its own library,
# moe-mlir-compile) instead of the source tree: from outside the tree, with
# nothing pointing at it.
python=$root/.venv/bin/python
cuda=$(sed -n 's/^MOE_CUDA_TOOLKIT:PATH=//p' "$build/CMakeCache.txt")
installed() {
  (cd / && env -u PYTHONPATH -u MOE_RUNTIME_LIB CUDA_ROOT="$cuda" "$python" "$@")
}
if installed -c 'import moe_mlir, sys; sys.exit("site-packages" not in moe_mlir.__file__)'; then
  installed "$root/runtime/test/python_test.py" || status=1
  installed "$root/runtime/test/python_torch_test.py" "$build/bin" || status=1
else
  echo "moe_mlir is not installed in $root/.venv: run scripts/setup.sh (pip install ./python)"
  status=1
fi

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
