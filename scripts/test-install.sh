#!/usr/bin/env bash
# Installs a built moe-mlir into a temporary prefix and uses it from outside
# the tree, as an ML compiler would: examples/consumer built with
# find_package(MoE) compiles a layer with --moe-gpu-pipeline, the installed
# tools turn it into a bundle, and the C API test runs against the installed
# libMoE-C.so. Usage: scripts/test-install.sh [build-dir]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
llvm=/usr/lib/llvm-22
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

fail() { echo "test-install: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$prefix" > "$work/install.log"

cmake -G Ninja -S "$root/examples/consumer" -B "$work/consumer" \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CXX_COMPILER=$llvm/bin/clang++ \
  -DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld > "$work/configure.log" 2>&1 ||
  { cat "$work/configure.log"; fail "configuring examples/consumer failed"; }
cmake --build "$work/consumer" > "$work/build.log" 2>&1 ||
  { cat "$work/build.log"; fail "building examples/consumer failed"; }
consumer=$work/consumer/moe-consumer

# ptxas comes from the toolkit the build was configured with.
export CUDA_ROOT
CUDA_ROOT=$(sed -n 's/^MOE_CUDA_TOOLKIT:PATH=//p' "$build/CMakeCache.txt")

"$consumer" "$root/examples/consumer/tiny_layer.mlir" -o "$work/layer.gpu.mlir"
grep -q "gpu.binary @moe_kernels" "$work/layer.gpu.mlir" ||
  fail "moe-consumer wrote no gpu.binary"
"$prefix/bin/moe-translate" --moe-to-bundle "$work/layer.gpu.mlir" \
  -o "$work/layer.moebundle"
"$prefix/bin/moe-bundle-info" "$work/layer.moebundle" > "$work/bundle.txt"
grep -q "^entry tiny_layer " "$work/bundle.txt" ||
  fail "the bundle has no tiny_layer entry"
echo "moe-consumer: tiny_layer.mlir -> gpu.binary -> bundle with entry tiny_layer"

# Bad input: a message and a non-zero exit, no crash.
if "$consumer" "$root/test/Tools/bad-input.mlir" > "$work/bad.txt" 2>&1; then
  fail "moe-consumer accepted malformed input"
fi
grep -q "bad-input.mlir:[0-9]*:[0-9]*: error: expected ':'" "$work/bad.txt" ||
  { cat "$work/bad.txt"; fail "moe-consumer gave no parse error"; }
if "$consumer" "$work/missing.mlir" > "$work/missing.txt" 2>&1; then
  fail "moe-consumer accepted a missing file"
fi
grep -q "cannot open input file" "$work/missing.txt" ||
  { cat "$work/missing.txt"; fail "moe-consumer gave no message for a missing file"; }
echo "moe-consumer: malformed input and a missing file are errors"

# The C API from the installed headers and library, built as plain C.
$llvm/bin/clang -std=c99 -Wall -Werror -I"$prefix/include" -I$llvm/include \
  "$root/test/CAPI/moe-capi-test.c" -fuse-ld=lld -L"$prefix/lib" -lMoE-C \
  -Wl,-rpath,"$prefix/lib" -o "$work/moe-capi-test"
"$work/moe-capi-test" > "$work/capi.txt" 2>&1 ||
  { cat "$work/capi.txt"; fail "the C API test failed against the install"; }
tail -1 "$work/capi.txt"
