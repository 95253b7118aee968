# -*- Python -*-
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "MOE"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes = ["lib", "device", "Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.moe_obj_root, "test")

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.moe_tools_dir, append_path=True)

runner_libs = ",".join(
    os.path.join(config.mlir_lib_dir, lib)
    for lib in ("libmlir_runner_utils.so", "libmlir_c_runner_utils.so"))
test_lib = os.path.join(config.test_source_root, "lib")
# Before lit's own %python (the interpreter running lit, which need not have
# numpy): the venv scripts/setup.sh made.
config.substitutions.insert(0, ("%python", config.moe_python))
config.substitutions.append(("%testlib", test_lib))
# GPU code generation tests assemble with the toolkit scripts/setup.sh found;
# without it they would not test anything, so that is an error, not a skip.
ptxas = os.path.join(config.moe_cuda_toolkit, "bin", "ptxas")
if not os.access(ptxas, os.X_OK):
    lit_config.fatal("no ptxas at %r: configure with -DMOE_CUDA_TOOLKIT=<dir> (scripts/setup.sh does)" % ptxas)
config.substitutions.append(("%ptxas", ptxas))
config.substitutions.append(("%cuda_toolkit", config.moe_cuda_toolkit))
cuobjdump = os.path.join(config.moe_cuda_disassemblers, "cuobjdump")
if not os.access(cuobjdump, os.X_OK):
    lit_config.fatal("no cuobjdump at %r: configure with -DMOE_CUDA_DISASSEMBLERS=<dir> "
                     "(scripts/setup.sh installs PyPI's nvidia-cuda-cuobjdump)" % cuobjdump)
config.substitutions.append(("%cuobjdump", cuobjdump))
config.substitutions.append(
    ("%mlir-runner",
     f"{os.path.join(config.llvm_tools_dir, 'mlir-runner')} -e main "
     f"-entry-point-result=void -shared-libs={runner_libs}"))
# The runtime's tools exist only when it is built (MOE_BUILD_RUNTIME).
if config.moe_build_runtime:
    config.available_features.add("moe-runtime")
llvm_config.add_tool_substitutions(
    ["moe-opt", "moe-translate", "moe-bundle-info", "moe-runtime-tests",
     "moe-runtime-c-api-test", "moe-capi-test", "moe-nvgpu-unit-tests"],
    [config.moe_tools_dir])
llvm_config.add_tool_substitutions(["FileCheck", "not", "count"], [config.llvm_tools_dir])
