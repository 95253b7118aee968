"""Expert parallelism: one compiled layer per rank, the exchanges through NCCL.

    import torch.distributed as dist
    from moe_mlir.parallel import ExpertParallelMoELayer
    layer = ExpertParallelMoELayer.from_hf(block, ep_group=dist.group.WORLD)
    y = layer(hidden_states)                    # this rank's tokens [..., H]

Each of the N ranks of `ep_group` routes its own tokens and keeps E/N of the
experts (rank d experts [d*E/N, (d+1)*E/N): their weights are copied out of
the block, which the caller may then drop). The compiler writes the rank's
program as stages (compile_layer(spec, expert_parallel=N):
--moe-expert-parallel and --moe-split-exchanges, docs/expert-parallel.md),
one runtime entry each; between them the runtime's exchanges send each
token row to the rank owning its expert and the results back
(moeDispatchCounts / moeDispatchRows / moeUndispatch over NCCL, on torch's
current stream). The bundle says how the stages connect (each stage
entry's keys, contract §3.14, and its signature name every value that
crosses a stage boundary); `stages` reads them, and `run_stages` keeps the
named values and performs each exchange a stage names.

The communicator: rank 0 of `ep_group` makes an NCCL unique id, the group
broadcasts it (any torch.distributed backend), and each rank joins an NCCL
communicator of the group's ranks on its current device with the
process's NCCL (PyTorch's libnccl.so.2): the group's own communicator is
not reachable from Python.

Training: from_hf(block, ep_group=pg, train=True) holds the rank's experts
and the router as the layer's own parameters and, under autograd, runs the
train forward's stages and the backward's (the adjoint exchanges) as their
gradient; the router's gradient is this rank's tokens' part (all-reduce it
over the group).

A shared expert (DeepSeek-V3) is replicated: every rank runs it on its own
tokens in the last stage (the combine's moe.shared_mlp); trained, its
gradient is this rank's tokens' part, as the router's.

Not capturable in a CUDA graph (each exchange synchronizes the stream:
NCCL's host API takes host sizes; refused with a message). Not yet: a
gated shared expert (Qwen2-MoE).
"""
import ctypes
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from .layer import _devices, _open_bundle, _pack, _read_block, compile_layer
from .runtime import MoERuntimeError, _check, _library
from .training import _block_result

try:
    import torch
except ImportError:  # the compiler side needs no torch
    torch = None


@dataclass
class Stage:
    """One stage entry of a split function, as the bundle says (its stage
    keys, contract §3.14, and its signature's argument names)."""
    entry: str
    args: List[str]
    results: List[str]
    exchange: Optional[str] = None
    exchange_args: List[str] = field(default_factory=list)
    exchange_results: List[str] = field(default_factory=list)
    function_args: List[str] = field(default_factory=list)
    function_results: List[str] = field(default_factory=list)


def stages(bundle, function: str) -> List[Stage]:
    """The stages @<function>_stage0.. of a bundle, in order, as the bundle
    says they connect (its program.v1 entries' stage keys, contract §3.14;
    their arguments and results are their signatures'). Raises ValueError
    where the bundle has no stages of `function`."""
    found = {}
    for entry in bundle.entries:
        info = bundle.stage(entry.name)
        if info is None or info.function != function:
            continue
        signature = bundle.signature(entry.name)
        found[info.index] = Stage(
            entry.name, [a.name for a in signature.args if a.role != "out"],
            [a.name for a in signature.args if a.role == "out"], info.exchange,
            list(info.exchange_args), list(info.exchange_results),
            list(info.function_args), list(info.function_results))
    if len(found) < 2:
        raise ValueError(f"the bundle has no stages of @{function} (compile it "
                         "with --moe-split-exchanges: compile_layer(..., "
                         "expert_parallel=N))")
    return [found[i] for i in range(len(found))]  # the reader checked 0..n-1


class Exchange:
    """moeExchange over an NCCL communicator (an ncclComm_t address) for a
    layer of `experts` experts."""

    def __init__(self, comm: int, experts: int):
        self._handle = ctypes.c_void_p()
        _check(_library().moeExchangeCreate(ctypes.c_void_p(comm), experts,
                                            ctypes.byref(self._handle)))
        ranks, rank = ctypes.c_int32(), ctypes.c_int32()
        _check(_library().moeExchangeGetRanks(self._handle, ctypes.byref(ranks),
                                              ctypes.byref(rank)))
        self.ranks, self.rank = ranks.value, rank.value
        space = ctypes.c_uint64()
        _check(_library().moeExchangeWorkspaceBytes(self._handle,
                                                    ctypes.byref(space)))
        self.workspace_bytes = space.value
        self._work = None  # the counts' device staging, kept between calls

    def close(self) -> None:
        if self._handle:
            _library().moeExchangeDestroy(self._handle)
            self._handle = ctypes.c_void_p()

    def __del__(self):
        self.close()

    def dispatch(self, rows, offsets):
        """moe.dispatch: (received [R, H], local_ids [R, 1] int32, counts
        [N] int64) and the rows this rank sent."""
        stream = ctypes.c_void_p(torch.cuda.current_stream(rows.device).cuda_stream)
        counts = torch.empty(self.ranks, dtype=torch.int64, device=rows.device)
        if self._work is None or self._work.device != rows.device:
            self._work = torch.empty(self.workspace_bytes, dtype=torch.uint8,
                                     device=rows.device)
        work = self._work
        sent, received = ctypes.c_int64(), ctypes.c_int64()
        bits = 64 if offsets.dtype == torch.int64 else 32
        _check(_library().moeDispatchCounts(
            self._handle, offsets.data_ptr(), bits, rows.shape[0], counts.data_ptr(),
            work.data_ptr(), ctypes.byref(sent), ctypes.byref(received), stream))
        out = torch.empty(received.value, rows.shape[1], dtype=rows.dtype,
                          device=rows.device)
        ids = torch.empty(received.value, 1, dtype=torch.int32, device=rows.device)
        _check(_library().moeDispatchRows(
            self._handle, rows.data_ptr(), rows.shape[1] * rows.element_size(),
            out.data_ptr(), ids.data_ptr(), stream))
        return (out, ids, counts), sent.value

    def undispatch(self, rows, counts, offsets, rows_sent: int, sent: int):
        """moe.undispatch: [sent, H], what each rank returned for the rows
        this rank sent it (`rows_sent` the dispatch's rows, `sent` what it
        sent)."""
        stream = ctypes.c_void_p(torch.cuda.current_stream(rows.device).cuda_stream)
        out = torch.empty(sent, rows.shape[1], dtype=rows.dtype, device=rows.device)
        bits = 64 if offsets.dtype == torch.int64 else 32
        _check(_library().moeUndispatch(
            self._handle, rows.data_ptr(), rows.shape[0],
            rows.shape[1] * rows.element_size(), counts.data_ptr(), offsets.data_ptr(),
            bits, rows_sent, out.data_ptr(), sent, stream))
        return out


def run_stages(bundle, plan: List[Stage], inputs: Dict[str, "torch.Tensor"],
               exchange: Exchange) -> List["torch.Tensor"]:
    """Runs the stages on one rank: the named values start as `inputs` (by
    the names of moe.function_args), each stage's entry takes the ones it
    names and adds its results, each exchange adds its results. Returns
    the split function's results, in the order of moe.function_results."""
    if torch.cuda.is_current_stream_capturing():
        raise MoERuntimeError(
            "INVALID_ARGUMENT", "expert parallelism cannot be captured in a "
            "CUDA graph: each exchange reads its sizes on the host (NCCL's "
            "host API), which synchronizes the stream")
    values = dict(inputs)
    dispatched = {}  # offsets name -> (rows it grouped, rows sent)
    for stage in plan:
        missing = [n for n in stage.args if n not in values]
        if missing:
            raise MoERuntimeError("INVALID_ARGUMENT", f"{stage.entry} takes "
                                  f"{missing}, which nothing gave")
        outputs = bundle.launch(stage.entry, **{n: values[n] for n in stage.args})
        values.update(outputs)
        if stage.exchange == "moe.dispatch":
            rows, offsets = (values[n] for n in stage.exchange_args)
            results, sent = exchange.dispatch(rows, offsets)
            dispatched[stage.exchange_args[1]] = (rows.shape[0], sent)
            values.update(zip(stage.exchange_results, results))
        elif stage.exchange == "moe.undispatch":
            rows, counts, offsets = (values[n] for n in stage.exchange_args)
            rows_sent, sent = dispatched[stage.exchange_args[2]]
            values.update(zip(stage.exchange_results, [exchange.undispatch(
                rows, counts, offsets, rows_sent, sent)]))
        elif stage.exchange:
            raise MoERuntimeError("UNSUPPORTED", f"{stage.entry} names "
                                  f"exchange {stage.exchange}")
    return [values[name] for name in plan[-1].function_results]


def nccl_communicator(group) -> int:
    """An NCCL communicator of `group`'s ranks (its address), on the current
    device: rank 0's unique id broadcast through the group."""
    import torch.distributed as dist

    ranks, rank = dist.get_world_size(group), dist.get_rank(group)
    unique = ctypes.create_string_buffer(128)
    if rank == 0:
        _check(_library().moeNcclGetUniqueId(unique))
    box = [unique.raw if rank == 0 else None]
    dist.broadcast_object_list(box, src=dist.get_global_rank(group, 0), group=group)
    comm = ctypes.c_void_p()
    _check(_library().moeNcclCommInitRank(ranks, box[0], rank, ctypes.byref(comm)))
    return comm.value


#: The expert weights and biases a rank keeps, its slice of the experts
#: (the first four) or replicated (the shared expert's), in the entries'
#: names.
_EXPERT_TENSORS = ("gate_up_weights", "down_weights", "gate_up_bias", "down_bias",
                   "shared_gate_up_weights", "shared_down_weights")
_SLICED = _EXPERT_TENSORS[:4]


def _train_plans(bundle):
    """(train forward stages, backward stages) of a train bundle, checked to
    connect: each backward argument but grad_out is a train forward result
    of the same name (contract §3.13)."""
    train, backward = stages(bundle, "moe_layer_train"), stages(bundle,
                                                                "moe_layer_backward")
    saved, takes = train[0].function_results, backward[0].function_args
    if (not saved or saved[0] != "out" or "grad_out" not in takes or
            not set(takes) - {"grad_out"} <= set(saved[1:])):
        raise ValueError("the backward's stages do not take the train "
                         f"forward's saved values: {saved} -> {takes}")
    return train, backward


if torch is not None:

    class _TrainStages(torch.autograd.Function):
        """The train forward's stages, and the backward's (with the adjoint
        exchanges) as its gradient: one backward per forward, since the
        backward writes over the values the forward saved for it."""

        @staticmethod
        def forward(ctx, layer, tokens, logits, *weights):
            given = dict(tokens=tokens, logits=logits, score_bias=layer.score_bias)
            given.update((n, w) for n, w in zip(_EXPERT_TENSORS, weights) if w is not None)
            results = run_stages(layer._bundle, layer._train_plan,
                                 {n: given[n] for n in layer._train_plan[0].function_args},
                                 layer._exchange)
            ctx.layer, ctx.backward_ran = layer, False
            ctx.weights = [w is not None for w in weights]
            ctx.save_for_backward(*results[1:])
            ctx.set_materialize_grads(False)
            return results[0]

        @staticmethod
        def backward(ctx, grad_out):
            if grad_out is None:
                return (None,) * (3 + len(ctx.weights))
            if ctx.backward_ran:
                raise RuntimeError(
                    "ExpertParallelMoELayer: the backward of one forward runs "
                    "once (it writes over the values the forward saved for "
                    "it): run the forward again for another backward")
            ctx.backward_ran = True
            layer = ctx.layer
            plan = layer._backward_plan
            given = dict(zip(layer._train_plan[0].function_results[1:], ctx.saved_tensors))
            given["grad_out"] = grad_out.contiguous()
            given = {n: given[n] for n in plan[0].function_args}
            grads = dict(zip(plan[-1].function_results,
                             run_stages(layer._bundle, plan, given, layer._exchange)))
            return (None, grads.get("grad_tokens"), grads.get("grad_logits"),
                    *[grads.get("grad_" + n) if present else None
                      for n, present in zip(_EXPERT_TENSORS, ctx.weights)])

    class ExpertParallelMoELayer(torch.nn.Module):
        """A Hugging Face sparse MoE block on one rank of an expert-parallel
        group; build it with from_hf. forward(hidden_states [..., H],
        bfloat16) returns the block's output for this rank's tokens (and what
        the block returns beside it, as MoELayer). A trainable layer (from_hf
        with train=True) holds the rank's experts and the router as its own
        parameters and differentiates through the backward's stages when
        gradients are enabled."""

        def __init__(self, packed, bundle_path: str, plan: List[Stage], comm: int,
                     ranks: int, rank: int, train_plans=None, shared=None):
            super().__init__()
            spec = packed.spec
            self.spec, self.bundle_path, self.ranks, self.rank = spec, bundle_path, ranks, rank
            self._bundle = _open_bundle(bundle_path)
            self._plan = plan
            self._train_plan, self._backward_plan = train_plans or (None, None)
            self._returns = packed.returns
            self._comm = comm
            L = spec.experts // ranks
            #: The experts this rank holds: [first, first + count).
            self.experts = range(rank * L, (rank + 1) * L)
            trainable = train_plans is not None
            # The rank's experts only (copies: the block's may be dropped).
            # Trained, the biases are bfloat16 parameters as the block's are.
            # The shared expert (DeepSeek-V3) is replicated: the combine's
            # moe.shared_mlp, gate and up projections concatenated.
            shared = (None, None) if shared is None else (
                torch.cat(shared[:2]), shared[2])
            for name in _EXPERT_TENSORS + ("router_weight", "router_bias", "score_bias"):
                tensor = (shared[_EXPERT_TENSORS.index(name) - 4] if name.startswith("shared")
                          else getattr(packed, name))
                if tensor is not None and name in _SLICED:
                    tensor = tensor[rank * L:(rank + 1) * L]
                if tensor is not None and trainable and name != "score_bias":
                    self.register_parameter(name, torch.nn.Parameter(
                        tensor.detach().to(torch.bfloat16 if name.endswith("bias")
                                           else tensor.dtype, copy=True)))
                else:
                    self.register_buffer(name, None if tensor is None else
                                         tensor.contiguous().clone(), persistent=False)
            self._exchange = Exchange(comm, spec.experts)

        def close(self) -> None:
            """Frees the layer's NCCL communicator (every rank of the group
            calls it); the layer is unusable after."""
            self._exchange.close()
            if self._comm:
                _check(_library().moeNcclCommDestroy(ctypes.c_void_p(self._comm)))
                self._comm = 0

        @classmethod
        def from_hf(cls, block, *, ep_group, train: bool = False,
                    cache_dir: Optional[str] = None,
                    compiler: Optional[str] = None) -> "ExpertParallelMoELayer":
            """This rank's layer of `block` (as MoELayer.from_hf reads it) in
            `ep_group` (a torch.distributed process group of N ranks, one
            GPU each, N dividing the experts). With train, the layer's
            parameters are copies of the rank's experts (the runtime's
            layout: gate_up_weights [E/N, 2I, H], down_weights [E/N, H, I],
            GPT-OSS's biases [E/N, 2I] and [E/N, H]) and of the router;
            their gradients are this rank's: the experts' over every rank's
            tokens routed to them, the router's over this rank's tokens
            (all-reduce it over the group, as data parallelism would).
            Raises what MoELayer.from_hf raises, and ValueError for a block
            with a gated shared expert (Qwen2-MoE)."""
            import torch.distributed as dist

            spec, sources, returns = _read_block(block)
            if spec.shared_gate:
                raise ValueError(f"{type(block).__name__}: expert parallelism "
                                 "of a layer with a gated shared expert "
                                 "(Qwen2-MoE) is not supported yet (the GPU "
                                 "runs no gated moe.shared_mlp of the "
                                 "combine); MoELayer runs it on one GPU")
            devices = _devices(sources)
            if len(devices) != 1 or next(iter(devices)).type != "cuda":
                raise ValueError(f"{type(block).__name__}: its weights must be "
                                 "on one CUDA device")
            ranks, rank = dist.get_world_size(ep_group), dist.get_rank(ep_group)
            path = compile_layer(spec, cache_dir=cache_dir, compiler=compiler,
                                 expert_parallel=ranks, train=train)
            bundle = _open_bundle(path)
            plan = stages(bundle, "moe_layer")
            train_plans = _train_plans(bundle) if train else None
            device = next(iter(devices))
            with torch.cuda.device(device):
                comm = nccl_communicator(ep_group)
                layer = cls(_pack(spec, sources, returns), path, plan, comm, ranks, rank,
                            train_plans, sources.get("shared"))
                layer._bundle.load()
            return layer

        def forward(self, hidden_states):
            spec = self.spec
            if not self._comm:
                raise MoERuntimeError("INVALID_ARGUMENT", "ExpertParallelMoELayer: "
                                      "the layer is closed")
            if hidden_states.dtype != torch.bfloat16 or hidden_states.shape[-1] != spec.hidden:
                raise ValueError(f"ExpertParallelMoELayer: hidden_states is "
                                 f"{hidden_states.dtype} {tuple(hidden_states.shape)}, "
                                 f"expected torch.bfloat16 [..., {spec.hidden}]")
            tokens = hidden_states.reshape(-1, spec.hidden).contiguous()
            if spec.logits == "f32":
                logits = torch.nn.functional.linear(tokens.float(),
                                                    self.router_weight.float())
            else:
                logits = torch.nn.functional.linear(tokens, self.router_weight,
                                                    self.router_bias)
            logits = logits.contiguous()
            weights = [getattr(self, n) for n in _EXPERT_TENSORS]
            if weights[3] is not None:
                weights[3] = weights[3].float()  # the entries take f32
            with torch.cuda.device(tokens.device):
                if self._train_plan is not None and torch.is_grad_enabled():
                    out = _TrainStages.apply(self, tokens, logits, *weights)
                else:
                    given = dict(tokens=tokens, logits=logits,
                                 score_bias=self.score_bias,
                                 **dict(zip(_EXPERT_TENSORS, weights)))
                    out = run_stages(self._bundle, self._plan,
                                     {n: given[n] for n in self._plan[0].function_args},
                                     self._exchange)[0]
            return _block_result(self._returns, out.view(hidden_states.shape),
                                 logits, spec.top_k)
