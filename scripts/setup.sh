#!/usr/bin/env bash
# Installs what moe-mlir needs on Debian 12, configures and builds it,
# installs the moe_mlir Python package into .venv, then runs the shipped
# example on the CPU and checks it against the numpy reference. Safe to run
# again. Usage: scripts/setup.sh [build-dir]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
llvm=/usr/lib/llvm-22

sudo_if_needed() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

# 1. Debian packages (LLVM/MLIR 22 come from bookworm-security).
packages=(clang-22 lld-22 llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools
          clang-format-22 libclang-rt-22-dev ninja-build cmake python3-venv)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "== installing: ${missing[*]}"
  sudo_if_needed apt-get update -qq
  sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi

# 2. The Python that lit's tests run: a venv on Debian's python3, with numpy.
venv=$root/.venv
if [ ! -x "$venv/bin/python" ]; then
  /usr/bin/python3 -m venv "$venv"
fi
"$venv/bin/python" -c "import numpy" 2>/dev/null || "$venv/bin/pip" install -q numpy

# The moe_mlir Python package (the runtime library, built from runtime/ by
# scikit-build-core, its ctypes layer, the PyTorch module), installed into the
# venv as a user installs it: `pip install ./python`. scripts/test.sh tests
# it as installed.
echo "== pip install ./python (the moe_mlir package) into $venv"
CC=$llvm/bin/clang CXX=$llvm/bin/clang++ "$venv/bin/pip" install -q "$root/python"

# 3. CUDA's ptxas and libdevice (for the GPU pipelines): the toolkit where
#    present, else PyPI wheels inside the venv.
# CUDA 13 wheels install into site-packages/nvidia/cu13 (bin/ptxas from
# nvidia-cuda-nvcc, nvvm/libdevice from nvidia-nvvm).
if [ -x /usr/local/cuda/bin/ptxas ] && [ -f /usr/local/cuda/nvvm/libdevice/libdevice.10.bc ]; then
  cuda=/usr/local/cuda
else
  cuda=$("$venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")/nvidia/cu13
  if [ ! -x "$cuda/bin/ptxas" ] || [ ! -f "$cuda/nvvm/libdevice/libdevice.10.bc" ]; then
    "$venv/bin/pip" install -q "nvidia-cuda-nvcc>=13,<14" "nvidia-nvvm>=13,<14"
  fi
fi
# Disassemblers new enough for sm_90a and sm_100a SASS (the lit tests read
# the cubins with them): PyPI's 13.x wheels, also under nvidia/cu13.
site=$("$venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
if [ ! -x "$site/nvidia/cu13/bin/cuobjdump" ] || [ ! -x "$site/nvidia/cu13/bin/nvdisasm" ]; then
  "$venv/bin/pip" install -q "nvidia-cuda-cuobjdump>=13,<14" "nvidia-cuda-nvdisasm>=13,<14"
fi
disasm=$site/nvidia/cu13/bin
# NCCL's header, against which the runtime's tests check the NCCL ABI it
# declares (runtime/test/NcclABICheck.cpp): PyPI's nvidia-nccl-cu13.
if [ ! -f "$site/nvidia/nccl/include/nccl.h" ]; then
  "$venv/bin/pip" install -q "nvidia-nccl-cu13>=2.27,<3"
fi

echo "== CUDA toolkit for ptxas/libdevice: $cuda ($("$cuda/bin/ptxas" --version | tail -1))"

# 4. Configure and build with clang-22 + lld against libMLIR.so. A build
#    folder configured with another compiler is reset: CMake would drop
#    every -D option while switching compilers.
if [ -f "$build/CMakeCache.txt" ] &&
   ! grep -q "^CMAKE_CXX_COMPILER:[A-Z]*=$llvm/bin/clang++$" "$build/CMakeCache.txt"; then
  rm -rf "$build/CMakeCache.txt" "$build/CMakeFiles"
fi
cmake -G Ninja -S "$root" -B "$build" \
  -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_C_COMPILER=$llvm/bin/clang -DCMAKE_CXX_COMPILER=$llvm/bin/clang++ \
  -DLLVM_USE_LINKER=lld \
  -DMLIR_DIR=$llvm/lib/cmake/mlir -DLLVM_EXTERNAL_LIT=$llvm/bin/lit \
  -DMOE_PYTHON="$venv/bin/python" -DMOE_CUDA_TOOLKIT="$cuda" -DMOE_CUDA_DISASSEMBLERS="$disasm" \
  -DMOE_NCCL_INCLUDE="$site/nvidia/nccl/include" \
  -DMOE_ENABLE_FUZZER=ON > "$build.configure.log" 2>&1 || { cat "$build.configure.log"; exit 1; }
cmake --build "$build"

# 5. The main job: compile the example layer for the CPU and run it.
echo "== examples/mixtral_tiny.mlir through --moe-cpu-reference-pipeline and mlir-runner"
"$build/bin/moe-opt" "$root/examples/mixtral_tiny.mlir" --moe-cpu-reference-pipeline \
  | $llvm/bin/mlir-runner -e main -entry-point-result=void \
      -shared-libs=$llvm/lib/libmlir_runner_utils.so,$llvm/lib/libmlir_c_runner_utils.so \
  | tee "$build/example.out"
"$venv/bin/python" "$root/examples/check_example.py" "$build/example.out"
