"""The transformers experts backend: experts_implementation="moe_mlir".

    import moe_mlir  # registers the backend (register_experts_backend)
    model = AutoModelForCausalLM.from_pretrained(
        name, dtype=torch.bfloat16, device_map="cuda",
        experts_implementation="moe_mlir")

transformers 5.x routes MoE experts through its ExpertsInterface: each
model's sparse block keeps its own router (softmax, sigmoid with groups,
shared experts and all) and calls its experts module with the tokens
[T, H], the top-k expert ids [T, k] and their weights [T, k]. This backend
runs that call as one compiled layer without a route: permute -> fused
gate-up + activation -> down -> weighted combine, one runtime call
(layer.v1 without a route part, `--moe-build-layer routing=none`), on
torch's current stream, no host synchronisation, so it may be captured in
a CUDA graph.

The layer is compiled once per expert configuration (H, I, E, k,
activation, biases) into the on-disk cache of moe_mlir.layer
(compile_layer): at the first call where a compiler is found, or ahead of
time with `moe-mlir-compile config.json --experts` on a machine that has
one. The weights are the module's own where they already have the
runtime's layout (bfloat16 [E, 2I, H] gate rows then up rows, and
[E, H, I], contiguous: Mixtral, Qwen2-MoE, Qwen3-MoE, OLMoE, DeepSeek-V3
and most others); transposed or interleaved weights (GPT-OSS) are arranged
once into a copy, redone when the parameters change. Inference only:
bfloat16, CUDA, sm_90a; a call that would need gradients is refused.
"""

import dataclasses
import weakref
from typing import Optional

from .layer import ENTRY, LayerSpec, compile_layer, _open_bundle
from .runtime import MoERuntimeError

try:
    import torch
except ImportError:  # registering needs torch and transformers
    torch = None

__all__ = ["NAME", "experts_spec", "forward"]

#: The experts_implementation this module registers.
NAME = "moe_mlir"


def _refuse(experts, why: str) -> MoERuntimeError:
    return MoERuntimeError(
        "INVALID_ARGUMENT", f"experts_implementation=\"{NAME}\" cannot run "
        f"{type(experts).__name__}: {why}")


def _gate(experts) -> dict:
    """The activation of `experts` as LayerSpec fields: silu(gate) * up
    through the default gate, or GPT-OSS's clamped form."""
    from transformers.integrations import moe as hf_moe
    custom = getattr(type(experts), "_apply_gate", None)
    default = getattr(hf_moe, "_default_apply_gate", None)
    if custom is not None and custom is not default:
        # GPT-OSS's clamped SwiGLU, the one custom gate the layer compiles.
        if not (hasattr(experts, "alpha") and hasattr(experts, "limit")):
            raise _refuse(experts, "its _apply_gate is custom; the compiled "
                          "activations are silu(gate) * up and GPT-OSS's "
                          "clamped form")
        return dict(activation="gptoss", alpha=float(experts.alpha),
                    limit=float(experts.limit))
    act = type(getattr(experts, "act_fn", None)).__name__
    if act not in ("SiLU", "SiLUActivation"):
        raise _refuse(experts, f"its activation is {act}; the compiled "
                      "gated activation is silu(gate) * up")
    return dict(activation="silu")


def experts_spec(experts, top_k: int) -> LayerSpec:
    """The compiled layer of an experts module of transformers 5.x (one
    decorated by use_experts_implementation) at `top_k` experts per token;
    MoERuntimeError INVALID_ARGUMENT naming what the layer cannot run."""
    for flag, value in (("has_gate", True), ("has_post_expert_norm", False),
                        ("_is_expert_parallel", False)):
        if getattr(experts, flag, value) != value:
            raise _refuse(experts, f"{flag} = {not value} is not compiled")
    gate_up = getattr(experts, "gate_up_proj", None)
    down = getattr(experts, "down_proj", None)
    if (not isinstance(gate_up, torch.Tensor) or gate_up.dim() != 3
            or not isinstance(down, torch.Tensor) or down.dim() != 3):
        raise _refuse(experts, "it has no 3-D gate_up_proj and down_proj")
    transposed = getattr(experts, "is_transposed", False)
    E = gate_up.shape[0]
    H, I2 = ((gate_up.shape[1], gate_up.shape[2]) if transposed
             else (gate_up.shape[2], gate_up.shape[1]))
    I = I2 // 2
    want = (E, I, H) if transposed else (E, H, I)
    if I2 % 2 or tuple(down.shape) != want:
        raise _refuse(experts, f"gate_up_proj {tuple(gate_up.shape)} and "
                      f"down_proj {tuple(down.shape)} are not [E, 2I, H] and "
                      "[E, H, I] (or their transposes)")
    for name, tensor in (("gate_up_proj", gate_up), ("down_proj", down)):
        if tensor.dtype != torch.bfloat16:
            raise _refuse(experts, f"{name} is {tensor.dtype}; the layer "
                          "runs bfloat16 weights (load the model with "
                          "dtype=torch.bfloat16)")
    try:
        return LayerSpec(hidden=H, intermediate=I, experts=E, top_k=top_k,
                         routing="none",
                         expert_bias=bool(getattr(experts, "has_bias",
                                                  False)),
                         **_gate(experts))
    except ValueError as error:
        raise _refuse(experts, str(error)) from None


def _arranged(experts, spec: LayerSpec):
    """(gate_up [E, 2I, H], down [E, H, I], gate_up_bias [E, 2I] bf16,
    down_bias [E, H] f32) in the runtime's layout: the parameters
    themselves where they have it, else a copy."""
    transposed = getattr(experts, "is_transposed", False)
    interleaved = not getattr(experts, "is_concatenated", True)

    def gate_then_up(t):  # dim 1: gate units, then up units
        return torch.cat((t[:, 0::2], t[:, 1::2]), 1) if interleaved else t

    with torch.no_grad():
        gate_up = experts.gate_up_proj.detach()
        if transposed:
            gate_up = gate_up.transpose(1, 2)
        gate_up = gate_then_up(gate_up).contiguous()
        down = experts.down_proj.detach()
        if transposed:
            down = down.transpose(1, 2)
        down = down.contiguous()
        gate_up_bias = down_bias = None
        if spec.expert_bias:
            gate_up_bias = gate_then_up(
                experts.gate_up_proj_bias.detach()).to(
                    torch.bfloat16).contiguous()
            down_bias = experts.down_proj_bias.detach().float().contiguous()
    return gate_up, down, gate_up_bias, down_bias


@dataclasses.dataclass
class _State:
    """What one experts module keeps between calls (per top-k)."""
    spec: LayerSpec
    bundle: object
    #: The parameters' (data_ptr, _version) the arranged weights are of.
    sources: tuple
    weights: tuple
    workspace: Optional["torch.Tensor"] = None


def _sources(experts, spec: LayerSpec) -> tuple:
    names = ["gate_up_proj", "down_proj"]
    if spec.expert_bias:
        names += ["gate_up_proj_bias", "down_proj_bias"]
    return tuple((getattr(experts, n).data_ptr(), getattr(experts, n)._version)
                 for n in names)


#: experts module -> {top_k: _State}; beside the module, not on it, so
#: that copying or pickling the model never meets a loaded bundle.
_STATES = weakref.WeakKeyDictionary()


def _state(experts, top_k: int, device) -> _State:
    states = _STATES.setdefault(experts, {})
    state = states.get(top_k)
    capturing = torch.cuda.is_current_stream_capturing()
    if state is None:
        if capturing:
            raise MoERuntimeError(
                "INVALID_ARGUMENT", f"experts_implementation=\"{NAME}\": "
                "the layer is compiled and loaded at its first call, which "
                "cannot happen during CUDA graph capture: run the model "
                "once before capturing")
        spec = experts_spec(experts, top_k)
        bundle = _open_bundle(compile_layer(spec))
        bundle.entry(ENTRY)  # NOT_FOUND if not a layer bundle
        with torch.cuda.device(device):
            bundle.load()
        state = _State(spec, bundle, (), ())
        states[top_k] = state
    sources = _sources(experts, state.spec)
    if sources != state.sources:  # first call, or parameters changed
        if capturing:
            raise MoERuntimeError(
                "INVALID_ARGUMENT", f"experts_implementation=\"{NAME}\": "
                "the expert weights changed since the last call, and cannot "
                "be arranged during CUDA graph capture")
        state.weights = _arranged(experts, state.spec)
        state.sources = sources
    return state


def _workspace(state: _State, device, tokens: int):
    spec = state.spec
    need = state.bundle.layer_workspace_bytes(ENTRY, tokens, spec.hidden,
                                              spec.intermediate)
    if torch.cuda.is_current_stream_capturing():  # from the graph's pool
        return torch.empty(need, dtype=torch.uint8, device=device)
    if (state.workspace is None or state.workspace.device != device
            or state.workspace.numel() < need):
        state.workspace = None  # freed before its successor
        state.workspace = torch.empty(need, dtype=torch.uint8, device=device)
    return state.workspace


def forward(self, hidden_states, top_k_index, top_k_weights):
    """The ExpertsInterface function: tokens [T, H] bfloat16, ids [T, k]
    (any integer type; ids outside [0, E) are dropped, as transformers'
    expert-parallel masking expects) and weights [T, k] (or [T, E], read at
    the ids) -> [T, H] bfloat16."""
    if torch.is_grad_enabled() and any(
            t.requires_grad for t in (hidden_states, top_k_weights,
                                      self.gate_up_proj, self.down_proj)):
        raise RuntimeError(
            f"experts_implementation=\"{NAME}\" is inference only (no "
            "backward yet) and this call needs gradients: run the model "
            "under torch.no_grad() or torch.inference_mode() (generate "
            "does), or use experts_implementation=\"grouped_mm\" to train")
    if hidden_states.dim() != 2 or top_k_index.dim() != 2:
        raise ValueError(f"experts_implementation=\"{NAME}\": expected "
                         f"hidden_states [T, H] and top_k_index [T, k], got "
                         f"{tuple(hidden_states.shape)} and "
                         f"{tuple(top_k_index.shape)}")
    if hidden_states.dtype != torch.bfloat16:
        raise TypeError(f"experts_implementation=\"{NAME}\": hidden_states "
                        f"is {hidden_states.dtype}; the layer runs bfloat16 "
                        "(load the model with dtype=torch.bfloat16)")
    tokens, top_k = top_k_index.shape
    device = hidden_states.device
    if tokens != hidden_states.shape[0]:
        raise ValueError(f"experts_implementation=\"{NAME}\": {tokens} rows "
                         f"of ids for {hidden_states.shape[0]} tokens")
    experts = self.gate_up_proj.shape[0]
    if top_k_weights.shape == (tokens, experts) and top_k != experts:
        top_k_weights = top_k_weights.gather(1, top_k_index.long())
    if tuple(top_k_weights.shape) != (tokens, top_k):
        raise ValueError(f"experts_implementation=\"{NAME}\": top_k_weights "
                         f"is {tuple(top_k_weights.shape)}, expected "
                         f"({tokens}, {top_k}) or ({tokens}, {experts})")
    state = _state(self, top_k, device)
    gate_up, down, gate_up_bias, down_bias = state.weights
    if gate_up.device != device:
        raise ValueError(f"experts_implementation=\"{NAME}\": the tokens are "
                         f"on {device}, the expert weights on "
                         f"{gate_up.device}")
    out = torch.empty_like(hidden_states, memory_format=torch.contiguous_format)
    if tokens:
        with torch.cuda.device(device):
            state.bundle.launch(
                ENTRY, tokens=hidden_states.contiguous(),
                ids=top_k_index.to(torch.int32).contiguous(),
                weights=top_k_weights.to(torch.float32).contiguous(),
                gate_up_weights=gate_up, down_weights=down,
                gate_up_bias=gate_up_bias, down_bias=down_bias, out=out,
                workspace=_workspace(state, device, tokens))
    return out
