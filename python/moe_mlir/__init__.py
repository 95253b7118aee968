"""moe-mlir from Python: compiled Mixture-of-Experts layers on the GPU.

    import moe_mlir
    bundle = moe_mlir.Bundle("layer.moebundle")         # the runtime (ctypes)
    layer = moe_mlir.MoELayer.from_hf(block)            # a HF MoE block (torch)
    path = moe_mlir.compile_layer(moe_mlir.spec_from_config(config))

Modules:
- moe_mlir.runtime: the ctypes layer over libmoe_runtime.so (Bundle,
  MoERuntimeError, ...), which `pip install ./python` installs inside this
  package; torch only for launching.
- moe_mlir.layer: MoELayer, a Hugging Face sparse MoE block as one compiled
  layer call (needs torch), and its compile half without torch (LayerSpec,
  spec_from_config, compile_layer and the on-disk cache; the command line
  moe-mlir-compile).
- moe_mlir.experts: the transformers experts backend
  (experts_implementation="moe_mlir"), registered by importing moe_mlir
  where transformers 5.x is installed.

Importing moe_mlir needs neither torch nor a GPU; moe_mlir.MoELayer without
torch raises ImportError.
"""

import importlib
import importlib.util

__version__ = "0.1.0"

from .runtime import (Arg, Bundle, Entry, Kernel, MoERuntimeError, Signature,
                      library_path)

# moe_mlir.layer's names, imported on first use: `import moe_mlir` stays
# light (layer imports torch where present), and `python3 -m moe_mlir.layer`
# does not find the module imported already (runpy warns then).
_LAYER_NAMES = ("BLOCK_CLASSES", "ENTRY", "LayerSpec", "MoELayer",
                "PackedBlock", "compile_layer", "default_cache_dir",
                "find_compiler", "pack_hf_block", "spec_from_config")


def __getattr__(name):
    if name == "TrainableMoELayer":
        return importlib.import_module(".training", __name__).TrainableMoELayer
    if name in _LAYER_NAMES or name == "layer":
        layer = importlib.import_module(".layer", __name__)
        # MoELayer without torch: layer's ImportError saying so.
        return layer if name == "layer" else getattr(layer, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAYER_NAMES) |
                  {"layer", "TrainableMoELayer"})



def register_experts_backend() -> bool:
    """Registers experts_implementation="moe_mlir" (moe_mlir.experts) with
    transformers' ExpertsInterface, for every model; `import moe_mlir` does
    it. False where torch or a transformers with the interface (5.x) is
    not installed."""
    if (importlib.util.find_spec("torch") is None
            or importlib.util.find_spec("transformers") is None):
        return False
    try:
        from transformers.integrations.moe import ExpertsInterface
    except ImportError:  # transformers 4.x: no experts interface
        return False

    # moe_mlir.experts (which imports moe_mlir.layer) loads at the first
    # call, for the reason above.
    def moe_mlir_experts(self, hidden_states, top_k_index, top_k_weights):
        from .experts import forward
        return forward(self, hidden_states, top_k_index, top_k_weights)

    ExpertsInterface.register("moe_mlir", moe_mlir_experts)
    return True


register_experts_backend()

__all__ = ["Arg", "Bundle", "Entry", "Kernel", "MoERuntimeError", "Signature",
           "library_path", "register_experts_backend", *(n for n in _LAYER_NAMES if n != "MoELayer")]
# MoELayer only where torch is, so that `from moe_mlir import *` works
# without it.
if importlib.util.find_spec("torch") is not None:
    __all__ += ["MoELayer", "TrainableMoELayer"]
