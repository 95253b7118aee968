"""Training a Hugging Face MoE block through the compiled layer: forward and
backward are two runtime entries each (program.v1, docs/runtime-contract.md
section 3.13) that --moe-generate-backward writes beside the layer:
`moe_layer_train` (the forward, returning what the backward needs) and
`moe_layer_backward` (those values and the output's gradient -> the
gradients of the tokens, the router logits and the expert weights).

The two entries are torch.library custom ops (moe_mlir::train_forward and
moe_mlir::train_backward, paired by register_autograd), so that
torch.compile keeps the layer as one opaque op each way.
TrainableMoELayer runs the block's own parameters: the router is the
block's linear (its gradient is torch's, from the logits' gradient), and the
expert weights are the block's tensors where they have the runtime's layout
(transformers 5.x fused experts) or a differentiable arrangement of them
(4.x per-expert MLPs: torch.stack, whose backward hands each expert its
slice). Gradients land in the block's parameters' .grad.

A shared expert (DeepSeek-V3) is the block's own Linear weights: the
gate and up projections concatenated (torch.cat, whose backward hands each
its half) and the down projection; the program runs it as grouped ops of
one group (--moe-expand-shared-mlp). DeepSeek-V3's correction bias steers
the choice and gets no gradient.

GPT-OSS's experts (gate-up columns interleaving gate and up units, weights
[E, K, N]) are taken as they lie: kn_weights GEMMs around an interleaved
activation (compile_layer's native layout), no copy, the gradients written
in the block's layout. With native_layout=False they are rearranged into the
runtime's layout by differentiable torch ops on each call instead (a copy of
the expert weights per step, whose backward hands the gradients back in the
block's layout; kept for comparison). Its
block returns the routing scores beside the output: those are computed by
torch from the logits (top-k, softmax over the k), so that a loss on them
reaches the router through torch's autograd.

The backward writes its own values over the saved tensors the train forward
made for it (its program's `donated` arguments: the gate-up output, the
experts' output), so its workspace holds little more than the gradient of
the experts' output: one backward per forward. A second backward of one
forward (retain_graph=True) is refused with a message.

Not yet: a gated shared expert (Qwen2-MoE: the gate's gradient has no GPU
kernel), refused with the reason.
"""
from typing import List, Optional

from .layer import (ENTRY, MoERuntimeError, _open_bundle, _read_block,
                    compile_layer)

try:
    import torch
except ImportError:  # the compiler side needs no torch
    torch = None

TRAIN_ENTRY = ENTRY + "_train"
BACKWARD_ENTRY = ENTRY + "_backward"


def _refuse_training(block, spec) -> None:
    name = type(block).__name__
    if spec.shared_gate:
        raise ValueError(f"{name}: training a layer with a gated shared "
                         "expert (Qwen2-MoE) is not supported yet (the "
                         "gate's gradient has no GPU kernel); inference "
                         "works (MoELayer)")


def _expert_biases(block, native: bool = False):
    """(gate_up_bias [E, 2I] bf16, down_bias [E, H] f32) of a GPT-OSS block
    as differentiable tensors of its parameters (gate units first, then
    up; native: as they lie, interleaved), or None."""
    experts = block.experts
    if not hasattr(experts, "gate_up_proj_bias"):
        return None
    bias = experts.gate_up_proj_bias
    if native:
        return bias, experts.down_proj_bias.float()
    E, columns = bias.shape
    return (bias.view(E, columns // 2, 2).permute(0, 2, 1).reshape(E, columns),
            experts.down_proj_bias.float())


def _expert_parameters(block, native: bool = False):
    """(gate_up [E, 2I, H], down [E, H, I]) of the block as differentiable
    tensors of its own parameters: the parameters themselves (5.x fused
    experts), GPT-OSS's rearranged (gate_up_proj [E, H, 2I] with gate unit
    i in column 2i and up unit i in 2i + 1, down_proj [E, I, H]; native:
    those two as they are) or a stack of the per-expert weights (4.x)."""
    experts = block.experts
    if native:
        return experts.gate_up_proj, experts.down_proj
    if hasattr(experts, "gate_up_proj_bias"):
        # One copy each way: [E, H, I, 2] -> [E, 2, I, H].
        gate_up = experts.gate_up_proj
        E, H, columns = gate_up.shape
        return (gate_up.view(E, H, columns // 2, 2).permute(0, 3, 2, 1)
                .reshape(E, columns, H),
                experts.down_proj.transpose(1, 2))
    if hasattr(experts, "gate_up_proj"):
        return experts.gate_up_proj, experts.down_proj
    names = (("w1", "w3", "w2") if hasattr(experts[0], "w1")
             else ("gate_proj", "up_proj", "down_proj"))
    gate_up = torch.stack([
        torch.cat((getattr(e, names[0]).weight, getattr(e, names[1]).weight))
        for e in experts])
    down = torch.stack([getattr(e, names[2]).weight for e in experts])
    return gate_up, down


def _shared_parameters(block):
    """(gate_up [2Is, H], down [H, Is]) of the block's shared expert as
    differentiable tensors of its Linear weights, or None."""
    mlp = getattr(block, "shared_experts", None)
    if mlp is None:
        return None
    return (torch.cat((mlp.gate_proj.weight, mlp.up_proj.weight)),
            mlp.down_proj.weight)


def _block_result(returns: str, output, logits, top_k: int):
    """What the block returns (PackedBlock.returns) beside its output, from
    the router's logits [T, E], torch-differentiable: the logits, or
    GPT-OSS's routing weights [T, k] as its router gives them (softmax over
    the top k logits, in their dtype)."""
    if returns == "router_logits":
        return output, logits
    if returns == "router_scores":
        top = torch.topk(logits, top_k, dim=-1).values
        return output, torch.softmax(top, dim=-1, dtype=top.dtype)
    return output


#: Bundles by path: the custom ops name their layer by its bundle's path.
_BUNDLES = {}

def _sizes(signature, tensors):
    """The entry's sizes read from `tensors` (name -> tensor) where an
    argument's dim is the size itself (SymInts under torch.compile)."""
    sizes = {}
    for name, _, _ in signature.sizes:
        for arg in signature.args:
            tensor = tensors.get(arg.name)
            if tensor is not None and name in arg.dims:
                sizes[name] = tensor.shape[arg.dims.index(name)]
                break
    return sizes


def _empty(arg, sizes, like):
    """An empty tensor of `arg`'s dtype and shape (its dims evaluated over
    `sizes`), on `like`'s device: the custom ops' fake outputs."""
    env = dict(sizes, ceildiv=lambda a, b: -(-a // b),
               floordiv=lambda a, b: a // b, min=min, max=max)
    shape = [eval(d, {"__builtins__": {}}, env) for d in arg.dims]
    dtypes = {"bf16": torch.bfloat16, "f32": torch.float32,
              "i32": torch.int32, "i64": torch.int64}
    return like.new_empty(shape, dtype=dtypes[arg.dtype])


def _names(bundle, entry, role):
    """The names of `entry`'s arguments of `role`, in call order."""
    return [a.name for a in bundle.signature(entry).args if a.role == role]


def _inputs(bundle):
    """The train entry's inputs (tokens, logits, the weights, ...)."""
    return _names(bundle, TRAIN_ENTRY, "in")


def _outputs(bundle):
    """The train entry's outputs, `out` first."""
    names = _names(bundle, TRAIN_ENTRY, "out")
    return ["out"] + [n for n in names if n != "out"]


def _kept_names(bundle):
    """The backward entry's inputs but grad_out: what the forward saves
    and the backward only reads, each a train entry input or output of the
    same name."""
    return [n for n in _names(bundle, BACKWARD_ENTRY, "in") if n != "grad_out"]


def _donated_names(bundle):
    """The backward entry's donated inputs: train entry outputs that the
    backward overwrites with its own values once it has read them."""
    return _names(bundle, BACKWARD_ENTRY, "donated")


def _gradients(bundle):
    """The backward entry's outputs, grad_<input>, in its order."""
    return _names(bundle, BACKWARD_ENTRY, "out")


if torch is not None:
    # One opaque op each way, so that torch.compile keeps the layer whole
    # and autograd pairs them (register_autograd). Their tensors are the
    # entries' arguments in signature order: what they are is the bundle's
    # business, not this module's.
    @torch.library.custom_op("moe_mlir::train_forward", mutates_args=())
    def _train_forward(bundle_path: str,
                       inputs: List[torch.Tensor]) -> List[torch.Tensor]:
        bundle = _BUNDLES[bundle_path]
        outputs = bundle.launch(TRAIN_ENTRY, **dict(zip(_inputs(bundle),
                                                        inputs)))
        return [outputs[n] for n in _outputs(bundle)]

    @_train_forward.register_fake
    def _(bundle_path, inputs):
        bundle = _BUNDLES[bundle_path]
        signature = bundle.signature(TRAIN_ENTRY)
        sizes = _sizes(signature, dict(zip(_inputs(bundle), inputs)))
        args = {a.name: a for a in signature.args}
        return [_empty(args[n], sizes, inputs[0]) for n in _outputs(bundle)]

    # The backward overwrites its donated inputs once read: saved values the
    # forward op made for it alone, which nothing else reads. It does not
    # declare them mutated (AOTAutograd refuses a backward graph that
    # mutates its inputs, so torch.compile could not run it); it bumps their
    # versions instead.
    @torch.library.custom_op("moe_mlir::train_backward", mutates_args=())
    def _train_backward(bundle_path: str, kept: List[torch.Tensor],
                        donated: List[torch.Tensor],
                        grad_out: torch.Tensor) -> List[torch.Tensor]:
        bundle = _BUNDLES[bundle_path]
        grads = bundle.launch(BACKWARD_ENTRY, grad_out=grad_out.contiguous(),
                              **dict(zip(_kept_names(bundle), kept)),
                              **dict(zip(_donated_names(bundle), donated)))
        # Autograd then refuses to unpack them again (a second backward).
        for tensor in donated:
            torch.autograd.graph.increment_version(tensor)
        return [grads[n] for n in _gradients(bundle)]

    @_train_backward.register_fake
    def _(bundle_path, kept, donated, grad_out):
        bundle = _BUNDLES[bundle_path]
        signature = bundle.signature(BACKWARD_ENTRY)
        given = dict(zip(_kept_names(bundle), kept), grad_out=grad_out)
        given.update(zip(_donated_names(bundle), donated))
        sizes = _sizes(signature, given)
        args = {a.name: a for a in signature.args}
        return [_empty(args[n], sizes, grad_out) for n in _gradients(bundle)]

    def _setup_context(ctx, inputs, output):
        bundle_path, tensors = inputs
        bundle = _BUNDLES[bundle_path]
        given = dict(zip(_inputs(bundle), tensors))
        given.update(zip(_outputs(bundle), output))
        ctx.bundle_path = bundle_path
        ctx.backward_ran = False
        ctx.save_for_backward(*(given[n] for n in _kept_names(bundle) +
                                _donated_names(bundle)))
        # Only the layer's output is differentiated: no zero gradients of
        # the saved outputs (as large as the saved values themselves).
        ctx.set_materialize_grads(False)

    def _backward(ctx, *grads):
        if len(grads) == 1 and isinstance(grads[0], (list, tuple)):
            grads = grads[0]
        grad_out = grads[0]  # the saved values are not differentiated
        bundle = _BUNDLES[ctx.bundle_path]
        if grad_out is None:  # nothing downstream used the output
            return None, [None for _ in _inputs(bundle)]
        if ctx.backward_ran:
            raise RuntimeError(
                "TrainableMoELayer: the backward of one forward runs once: "
                "it writes its own values over the tensors the forward "
                "saved for it (the donated arguments of its program), so "
                "run the forward again for another backward (retain_graph="
                "True cannot backward through the layer twice)")
        ctx.backward_ran = True
        saved = list(ctx.saved_tensors)
        kept = len(_kept_names(bundle))
        computed = dict(zip(_gradients(bundle), _train_backward(
            ctx.bundle_path, saved[:kept], saved[kept:], grad_out)))
        # A gradient per input, None where the layer has none (a
        # correction bias, which only steers the choice).
        return None, [computed.get("grad_" + n) for n in _inputs(bundle)]

    torch.library.register_autograd("moe_mlir::train_forward", _backward,
                                    setup_context=_setup_context)

    class TrainableMoELayer(torch.nn.Module):
        """A Hugging Face sparse MoE block whose forward and backward run
        the compiled layer, on the block's own parameters (build it with
        from_hf; the block stays a submodule, so its parameters are this
        module's). forward(hidden_states [..., H], bfloat16) returns what
        the block returns (the output, with the router logits for the
        blocks that return them). Gradients reach the block's parameters
        and hidden_states. Deterministic: two backward passes on the same
        inputs give the same bits (no float atomics)."""

        def __init__(self, block, spec, returns, bundle_path: str,
                     native_layout: bool = False):
            super().__init__()
            self.block = block
            self.spec = spec
            self.native_layout = native_layout
            self._returns = returns
            self.bundle_path = bundle_path
            self._bundle = _BUNDLES.get(bundle_path) or _open_bundle(
                bundle_path)
            self._bundle.entry(TRAIN_ENTRY)  # NOT_FOUND if not a train bundle
            self._bundle.entry(BACKWARD_ENTRY)
            _BUNDLES[bundle_path] = self._bundle
            self._loaded = set()

        @classmethod
        def from_hf(cls, block, *, cache_dir: Optional[str] = None,
                    compiler: Optional[str] = None,
                    recompute_rows: bool = False,
                    native_layout: Optional[bool] = None) -> "TrainableMoELayer":
            """The trainable layer of a Hugging Face sparse MoE block
            (bfloat16, on a CUDA device; no gated shared expert), its
            forward and backward compiled on first use
            (compile_layer(..., train=True)). With recompute_rows, the
            forward does not keep the tokens' [T*k, H] expert-ordered copy
            for the backward, which makes it again (a gather): less memory
            for a little time (not with expert parallelism). For GPT-OSS
            the layer trains on the experts' weights as they lie
            (native_layout None or True); native_layout=False copies them
            into the runtime's layout each step instead. Raises what
            MoELayer.from_hf raises, and ValueError for the blocks training
            does not support yet."""
            spec, sources, returns = _read_block(block)
            _refuse_training(block, spec)
            if native_layout is None:
                native_layout = spec.activation == "gptoss"
            path = compile_layer(spec, cache_dir=cache_dir,
                                 compiler=compiler, train=True,
                                 recompute_rows=recompute_rows,
                                 native_layout=native_layout)
            layer = cls(block, spec, returns, path, native_layout)
            layer._load(sources["router_weight"].device)
            return layer

        def _load(self, device) -> None:
            if device not in self._loaded:
                if torch.cuda.is_current_stream_capturing():
                    raise MoERuntimeError(
                        "INVALID_ARGUMENT", "TrainableMoELayer: the kernels "
                        f"are not loaded on {device} yet, which cannot happen "
                        "during CUDA graph capture: run the layer once first")
                with torch.cuda.device(device):
                    self._bundle.load()
                self._loaded.add(device)

        def forward(self, hidden_states):
            spec = self.spec
            if hidden_states.dtype != torch.bfloat16:
                raise TypeError(f"TrainableMoELayer: hidden_states is "
                                f"{hidden_states.dtype}, expected "
                                "torch.bfloat16")
            if hidden_states.shape[-1] != spec.hidden:
                raise ValueError(f"TrainableMoELayer: hidden_states is "
                                 f"{tuple(hidden_states.shape)}, expected "
                                 f"[..., {spec.hidden}]")
            tokens = hidden_states.reshape(-1, spec.hidden).contiguous()
            router = getattr(self.block, "router", None) or self.block.gate
            weight = getattr(router, "weight")
            if spec.logits == "f32":
                logits = torch.nn.functional.linear(tokens.float(),
                                                    weight.float())
            else:
                logits = torch.nn.functional.linear(
                    tokens, weight, getattr(router, "bias", None))
            self._load(tokens.device)
            gate_up, down = _expert_parameters(self.block,
                                               self.native_layout)
            given = dict(tokens=tokens, logits=logits.contiguous(),
                         gate_up_weights=gate_up.contiguous(),
                         down_weights=down.contiguous())
            biases = _expert_biases(self.block, self.native_layout)
            if spec.expert_bias and biases is not None:
                given["gate_up_bias"] = biases[0]
                given["down_bias"] = biases[1].contiguous()
            if spec.score_bias:
                given["score_bias"] = router.e_score_correction_bias.float()
            shared = _shared_parameters(self.block)
            if spec.shared_intermediate and shared is not None:
                given["shared_gate_up_weights"] = shared[0]
                given["shared_down_weights"] = shared[1].contiguous()
            out = _train_forward(self.bundle_path,
                                 [given[n] for n in _inputs(self._bundle)])[0]
            return _block_result(self._returns, out.view(hidden_states.shape),
                                 logits, spec.top_k)
