"""A Hugging Face sparse MoE block as one compiled layer.v1 call (PyTorch).

    from moe_mlir import MoELayer
    layer = MoELayer.from_hf(model.model.layers[3].mlp)             # bf16, CUDA
    model.model.layers[3].mlp = layer                               # drop-in
    y = layer(hidden_states)                                        # [..., H]

`MoELayer.from_hf(block)` reads the block's routing configuration and
expert weights, has the compiler build the layer in the moe dialect for
exactly that configuration (`moe-opt --moe-build-layer` with the options of
`LayerSpec.options()`: no MLIR is written here), compiles it with `moe-opt
--moe-gpu-pipeline` and `moe-translate --moe-to-bundle` into a bundle cached
on disk (`compile_layer`), and keeps
the expert weights packed in the runtime's layout. Its forward computes the
router logits with the block's own router weights, then runs route,
permutation, fused expert MLPs and the weighted combine in one runtime call
(moe_mlir.runtime.Bundle.launch of the layer.v1 entry) on torch's current
stream. A shared expert is part of that call: the compiler runs it as
c = ceil(Is / I) more experts every token takes, so its weights are
arranged once after the routed experts' (_pack).

Supported blocks (transformers 5.x with fused 3-D expert parameters, and
4.x with a ModuleList of expert MLPs): MixtralSparseMoeBlock,
Qwen3MoeSparseMoeBlock, OlmoeSparseMoeBlock, Qwen2MoeSparseMoeBlock
(a shared expert scaled by sigmoid(shared_expert_gate(x))), DeepseekV3MoE
(group-limited sigmoid routing with its correction bias and scale, and an
ungated shared expert) and GptOssMLP (clamped SwiGLU, expert and router
biases, interleaved gate/up columns). Inference only, bfloat16 only.

The compile half (LayerSpec, spec_from_config, compile_layer and the cache)
needs neither torch nor a GPU: the GPU machine may have no MLIR, so bundles
are compiled elsewhere and the cache directory is copied there
(`moe-mlir-compile config.json --cache-dir DIR`, or `python3 -m
moe_mlir.layer ...`, compiles the layer of a Hugging Face config.json).
MoELayer and pack_hf_block need torch. The compiler is found as
find_compiler says.

Over 800 lines for now: the compile half and the torch half share
LayerSpec, the cache and the per-model readers of the blocks; splitting the
torch half (MoELayer, the readers and packers) into its own module is the
natural next cut.
"""

import argparse
import dataclasses
import glob
import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.parse
from typing import Optional, Tuple

from .runtime import Bundle, MoERuntimeError

try:
    import torch
except ImportError:  # the compile half works without torch
    torch = None

__all__ = ["BLOCK_CLASSES", "ENTRY", "LayerSpec", "MoELayer", "MoERuntimeError",
           "PackedBlock", "compile_layer", "default_cache_dir",
           "find_compiler", "pack_hf_block", "spec_from_config"]

#: The name of the compiled function, hence of the bundle's layer.v1 entry.
ENTRY = "moe_layer"
#: The moe-opt pipeline every layer is compiled with (part of the cache key).
PIPELINE = "--moe-gpu-pipeline"
#: Part of every cache key (LayerSpec.key): the module's old name is kept so
#: that caches built before the package keep their keys.
_CACHE_FORMAT = "moe_torch cache 2"

#: Hugging Face block class -> the model_type of its config.
BLOCK_CLASSES = {
    "MixtralSparseMoeBlock": "mixtral",
    "Qwen3MoeSparseMoeBlock": "qwen3_moe",
    "Qwen2MoeSparseMoeBlock": "qwen2_moe",
    "OlmoeSparseMoeBlock": "olmoe",
    "DeepseekV3MoE": "deepseek_v3",
    "GptOssMLP": "gpt_oss",
}
# GPT-OSS's clamped SwiGLU, fixed in GptOssExperts (transformers 4.55-5.17).
_GPT_OSS_ALPHA = 1.702
_GPT_OSS_LIMIT = 7.0
# Activation names (config.hidden_act) and classes (the modules' act_fn) of
# silu, the only activation of a silu expert MLP.
_SILU_NAMES = ("silu", "swish")
_SILU_CLASSES = ("SiLU", "SiLUActivation")


@dataclasses.dataclass(frozen=True)
class LayerSpec:
    """Everything the compiled layer depends on; `mlir()` writes it. The
    constructor checks the values against what the dialect and the GPU
    lowering accept (ValueError naming the field)."""
    hidden: int  # H
    intermediate: int  # I, per expert
    experts: int  # E
    top_k: int  # k
    #: "softmax_topk" (Mixtral, Qwen2, Qwen3, OLMoE), "topk_softmax"
    #: (GPT-OSS) or "sigmoid_topk" (DeepSeek-V3), as moe.route spells them;
    #: "none": the model routes, and the layer takes the top-k ids and
    #: weights (the transformers experts backend, moe_mlir.experts).
    routing: str
    renormalize: bool = False
    #: Group-limited top-k (sigmoid_topk): `groups` groups of experts, the
    #: `select_groups` best eligible; 0 and 0 for none.
    groups: int = 0
    select_groups: int = 0
    scale: float = 1.0  # the routing weights' factor
    score_bias: bool = False  # a float32 correction bias [E] (sigmoid_topk)
    logits: str = "bf16"  # the router logits' type: "bf16" or "f32"
    activation: str = "silu"  # "silu" or "gptoss"
    alpha: float = 0.0  # gptoss only
    limit: float = 0.0  # gptoss only
    #: Expert biases: gate-up [E, 2I] bfloat16 and down [E, H] float32.
    expert_bias: bool = False
    #: Is, the width of a shared expert every token takes (silu, added to
    #: the routed experts' combine); 0 for none.
    shared_intermediate: int = 0
    #: The shared expert is scaled by sigmoid(x . g), g a bfloat16 [1, H]
    #: (Qwen2-MoE's shared_expert_gate).
    shared_gate: bool = False

    @property
    def shared_slices(self) -> int:
        """c = ceil(Is / I): the experts after the E routed ones that the
        compiled layer runs the shared expert as (0 without one)."""
        return -(-self.shared_intermediate // self.intermediate)

    def __post_init__(self):
        for name in ("hidden", "intermediate"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 8 or value % 8:
                raise ValueError(f"LayerSpec.{name} = {value!r}: the runtime "
                                 "needs a positive multiple of 8 (16-byte "
                                 "rows)")
        if not isinstance(self.experts, int) or not 1 <= self.experts <= 1024:
            raise ValueError(f"LayerSpec.experts = {self.experts!r}: the "
                             "permutation kernels take 1 to 1024 experts")
        if (not isinstance(self.shared_intermediate, int)
                or self.shared_intermediate < 0):
            raise ValueError(f"LayerSpec.shared_intermediate = "
                             f"{self.shared_intermediate!r}: the shared "
                             "expert's width, or 0 for none")
        if self.shared_intermediate:
            # The shared expert's slices are experts of the same kernels.
            if self.experts + self.shared_slices > 1024:
                raise ValueError(f"LayerSpec.shared_intermediate = "
                                 f"{self.shared_intermediate}: E + "
                                 f"ceil(Is / I) = {self.experts} + "
                                 f"{self.shared_slices} experts exceed the "
                                 "permutation kernels' 1024")
            if self.activation != "silu" or self.expert_bias:
                raise ValueError("LayerSpec.shared_intermediate: a shared "
                                 "expert runs as routed experts of the same "
                                 "kernels, so those must be silu without "
                                 "biases")
        elif self.shared_gate:
            raise ValueError("LayerSpec.shared_gate needs a shared expert "
                             "(shared_intermediate > 0)")
        if (not isinstance(self.top_k, int)
                or not 1 <= self.top_k <= min(self.experts, 32)):
            raise ValueError(f"LayerSpec.top_k = {self.top_k!r}: must be in "
                             f"[1, min(E, 32)] = [1, {min(self.experts, 32)}]")
        if self.routing not in ("softmax_topk", "topk_softmax",
                                "sigmoid_topk", "none"):
            raise ValueError(f"LayerSpec.routing = {self.routing!r}: expected "
                             "softmax_topk, topk_softmax, sigmoid_topk or "
                             "none")
        if self.routing == "none":
            for name, unset in (("renormalize", False), ("groups", 0),
                                ("select_groups", 0), ("scale", 1.0),
                                ("score_bias", False), ("logits", "bf16"),
                                ("shared_intermediate", 0)):
                if getattr(self, name) != unset:
                    raise ValueError(f"LayerSpec.{name}: routing 'none' (the "
                                     "model routes) takes the ids and weights "
                                     f"and no {name}")
        if self.groups or self.select_groups:
            if self.routing != "sigmoid_topk":
                raise ValueError("LayerSpec.groups: group-limited routing is "
                                 "only compiled for sigmoid_topk")
            if self.groups < 2 or self.experts % self.groups:
                raise ValueError(f"LayerSpec.groups = {self.groups}: must be "
                                 f"at least 2 and divide E = {self.experts}")
            if not 1 <= self.select_groups < self.groups:
                raise ValueError(f"LayerSpec.select_groups = "
                                 f"{self.select_groups}: must be in [1, "
                                 f"groups) = [1, {self.groups})")
            if self.experts // self.groups < 2:
                raise ValueError(f"LayerSpec.groups = {self.groups}: a group "
                                 "score is the sum of the group's 2 best "
                                 "experts, so a group needs at least 2 of the "
                                 f"E = {self.experts}")
            reachable = self.select_groups * (self.experts // self.groups)
            if self.top_k > reachable:
                raise ValueError(f"LayerSpec.top_k = {self.top_k} exceeds the "
                                 f"{reachable} experts of the "
                                 f"{self.select_groups} selected groups")
        if self.score_bias and self.routing != "sigmoid_topk":
            raise ValueError("LayerSpec.score_bias: a correction bias is only "
                             "defined for sigmoid_topk routing")
        if not (math.isfinite(self.scale) and self.scale > 0):
            raise ValueError(f"LayerSpec.scale = {self.scale!r}: must be "
                             "finite and positive")
        if self.logits not in ("bf16", "f32"):
            raise ValueError(f"LayerSpec.logits = {self.logits!r}: expected "
                             "'bf16' or 'f32'")
        if self.activation == "gptoss":
            for name in ("alpha", "limit"):
                value = getattr(self, name)
                if not (math.isfinite(value) and value > 0):
                    raise ValueError(f"LayerSpec.{name} = {value!r}: gptoss "
                                     "needs a finite positive value")
        elif self.activation == "silu":
            if self.alpha or self.limit:
                raise ValueError("LayerSpec.alpha and limit are gptoss "
                                 "parameters; silu takes neither")
        else:
            raise ValueError(f"LayerSpec.activation = {self.activation!r}: "
                             "expected 'silu' or 'gptoss'")

    def options(self) -> str:
        """The layer as the options of moe-opt's --moe-build-layer, which
        adds the moe-dialect function @moe_layer for any token count (route
        -> permute -> expert_mlp -> weighted unpermute) that
        --moe-gpu-pipeline (--moe-fuse-layer) compiles to one layer.v1
        entry: the compiler builds the IR, not this module. Deterministic:
        the cache key is its hash."""
        words = [f"name={ENTRY}", f"hidden={self.hidden}",
                 f"intermediate={self.intermediate}",
                 f"experts={self.experts}", f"top-k={self.top_k}",
                 f"routing={self.routing}"]
        if self.routing != "none":  # no logits without a route
            words.append(f"logits={self.logits}")
        words.append(f"activation={self.activation}")
        if self.renormalize:
            words.append("renormalize=true")
        if self.groups:
            words += [f"groups={self.groups}",
                      f"select-groups={self.select_groups}"]
        if self.scale != 1.0:
            words.append(f"scale={float(self.scale)!r}")
        if self.score_bias:
            words.append("score-bias=true")
        if self.activation == "gptoss":
            words += [f"alpha={float(self.alpha)!r}",
                      f"limit={float(self.limit)!r}"]
        if self.expert_bias:
            words.append("expert-bias=true")
        if self.shared_intermediate:
            words.append(f"shared-intermediate={self.shared_intermediate}")
        if self.shared_gate:
            words.append("shared-gate=true")
        return " ".join(words)

    def experts_only(self) -> "LayerSpec":
        """The layer of this one's experts with the model routing them
        (routing "none", no shared expert): what the transformers experts
        backend runs for the same configuration."""
        return dataclasses.replace(
            self, routing="none", renormalize=False, groups=0,
            select_groups=0, scale=1.0, score_bias=False, logits="bf16",
            shared_intermediate=0, shared_gate=False)

    def key(self) -> str:
        """The cache directory name of this layer: a hash of its options and
        the pipeline (the compiler's identity names the bundle in it)."""
        text = f"{_CACHE_FORMAT}\n{PIPELINE}\n{self.options()}"
        return hashlib.sha256(text.encode()).hexdigest()[:24]


def _family_spec(model_type: str, *, hidden: int, intermediate: int,
                 experts: int, top_k: int, activation: str,
                 norm_topk_prob: bool = False, groups: int = 0,
                 select_groups: int = 0, scale: float = 1.0,
                 alpha: float = _GPT_OSS_ALPHA,
                 limit: float = _GPT_OSS_LIMIT,
                 shared_intermediate: int = 0) -> LayerSpec:
    """The LayerSpec of a `model_type` layer, as its Hugging Face block
    computes it. Both spec_from_config and pack_hf_block end here, so a
    config and the block built from it give the same spec (cache key).
    `activation` is silu's name or class name (unused by GPT-OSS), the
    shared expert's too; `shared_intermediate` is its width (Qwen2-MoE,
    DeepSeek-V3; 0: none)."""
    if model_type not in BLOCK_CLASSES.values():
        raise ValueError(_unsupported_model_type(model_type))
    if model_type != "gpt_oss" and activation not in _SILU_NAMES + _SILU_CLASSES:
        raise ValueError(f"{model_type}: the experts' activation is "
                         f"{activation!r}; the compiled expert MLP is "
                         "silu(gate) * up (hidden_act 'silu')")
    if shared_intermediate and model_type not in ("qwen2_moe",
                                                  "deepseek_v3"):
        raise ValueError(f"{model_type}: its blocks have no shared expert")
    common = dict(hidden=int(hidden), intermediate=int(intermediate),
                  experts=int(experts), top_k=int(top_k),
                  shared_intermediate=int(shared_intermediate))
    if model_type == "mixtral":  # softmax, top-k, always renormalised
        return LayerSpec(**common, routing="softmax_topk", renormalize=True)
    if model_type in ("qwen3_moe", "olmoe"):
        return LayerSpec(**common, routing="softmax_topk",
                         renormalize=bool(norm_topk_prob))
    if model_type == "qwen2_moe":  # Qwen3-MoE's routing, a gated shared expert
        return LayerSpec(**common, routing="softmax_topk",
                         renormalize=bool(norm_topk_prob),
                         shared_gate=bool(shared_intermediate))
    if model_type == "deepseek_v3":
        # Logits in float32 (the router casts both operands). All groups
        # selected is no group limit: compiled without one.
        limited = groups > 1 and select_groups < groups
        return LayerSpec(**common, routing="sigmoid_topk",
                         renormalize=bool(norm_topk_prob),
                         groups=int(groups) if limited else 0,
                         select_groups=int(select_groups) if limited else 0,
                         scale=float(scale), score_bias=True, logits="f32")
    if model_type == "gpt_oss":  # top-k of the logits, softmax over those k
        return LayerSpec(**common, routing="topk_softmax",
                         activation="gptoss", alpha=float(alpha),
                         limit=float(limit), expert_bias=True)
    raise ValueError(_unsupported_model_type(model_type))


def _unsupported_model_type(model_type) -> str:
    return (f"model_type {model_type!r} is not supported (supported: "
            f"{', '.join(sorted(set(BLOCK_CLASSES.values())))})")


def spec_from_config(config) -> LayerSpec:
    """The LayerSpec of one MoE layer of a Hugging Face model, from its
    config: a transformers config object, or a dict of its fields (a
    config.json) with `model_type` and the fields that model reads
    (hidden_size, intermediate_size or moe_intermediate_size, the expert
    count, num_experts_per_tok, hidden_act, norm_topk_prob, Qwen2-MoE's
    shared_expert_intermediate_size, DeepSeek-V3's n_group, topk_group,
    routed_scaling_factor and n_shared_experts). A missing field is a
    ValueError naming it; defaults are not guessed, but for Qwen2-MoE's
    norm_topk_prob, False when absent as Qwen2MoeConfig has it."""
    def field(*names, default=None):
        for name in names:
            value = (config.get(name) if isinstance(config, dict)
                     else getattr(config, name, None))
            if value is not None:
                return value
        if default is not None:
            return default
        raise ValueError(f"config of {model_type or 'a model'}: no field "
                         f"{' or '.join(names)}")

    model_type = None
    model_type = field("model_type")
    expert_count = {"mixtral": ("num_local_experts",),
                    "qwen3_moe": ("num_experts",), "olmoe": ("num_experts",),
                    "qwen2_moe": ("num_experts",),
                    "deepseek_v3": ("n_routed_experts", "num_local_experts"),
                    "gpt_oss": ("num_local_experts",)}
    if model_type not in expert_count:
        raise ValueError(_unsupported_model_type(model_type))
    intermediate = ("moe_intermediate_size"
                    if model_type in ("qwen3_moe", "qwen2_moe", "deepseek_v3")
                    else "intermediate_size")
    values = dict(hidden=field("hidden_size"),
                  intermediate=field(intermediate),
                  experts=field(*expert_count[model_type]),
                  top_k=field("num_experts_per_tok"),
                  activation=("silu" if model_type == "gpt_oss"
                              else field("hidden_act")))
    if model_type in ("qwen3_moe", "olmoe", "deepseek_v3"):
        values["norm_topk_prob"] = field("norm_topk_prob")
    if model_type == "qwen2_moe":
        values.update(norm_topk_prob=field("norm_topk_prob", default=False),
                      shared_intermediate=field(
                          "shared_expert_intermediate_size"))
    if model_type == "deepseek_v3":
        # Its shared expert is n_shared_experts experts' width as one MLP.
        values.update(groups=field("n_group"),
                      select_groups=field("topk_group"),
                      scale=field("routed_scaling_factor"),
                      shared_intermediate=values["intermediate"]
                      * field("n_shared_experts"))
    return _family_spec(model_type, **values)


def default_cache_dir() -> str:
    """$MOE_CACHE_DIR, else $XDG_CACHE_HOME/moe-mlir, else
    ~/.cache/moe-mlir."""
    explicit = os.environ.get("MOE_CACHE_DIR")
    if explicit:
        return explicit
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(
        os.path.expanduser("~"), ".cache")
    return os.path.join(base, "moe-mlir")


def _checkouts() -> list:
    """The moe-mlir checkouts this package may come from: the one holding
    this file (python/moe_mlir/ of a checkout), and the directory `pip
    install ./python` installed it from (its PEP 610 direct_url.json)."""
    here = os.path.dirname(os.path.abspath(__file__))
    found = [os.path.dirname(os.path.dirname(here))]
    try:
        from importlib import metadata
        dist = metadata.distribution("moe-mlir")
        same = os.path.samefile(dist.locate_file("moe_mlir/layer.py"),
                                os.path.abspath(__file__))
        origin = json.loads(dist.read_text("direct_url.json") or "{}")
        url = origin.get("url", "")
        if same and "dir_info" in origin and url.startswith("file://"):
            source = urllib.parse.unquote(urllib.parse.urlparse(url).path)
            found.append(os.path.dirname(os.path.abspath(source)))
    except (ImportError, OSError, ValueError):
        pass  # not installed, or installed from a wheel: no checkout known
    return [root for root in found
            if os.path.isfile(os.path.join(root, "python", "pyproject.toml"))]


def _build_tree_compiler() -> Optional[Tuple[str, str]]:
    """(moe-opt, moe-translate) of the most recently built build*/bin of
    the checkouts of _checkouts(); None when none has both."""
    candidates = []
    for root in _checkouts():
        for directory in glob.glob(os.path.join(root, "build*", "bin")):
            tools = tuple(os.path.join(directory, name)
                          for name in ("moe-opt", "moe-translate"))
            if all(os.access(t, os.X_OK) for t in tools):
                candidates.append(tools)
    return max(candidates, key=lambda t: os.path.getmtime(t[0]),
               default=None)


def find_compiler(compiler: Optional[str] = None) -> Optional[Tuple[str, str]]:
    """(moe-opt, moe-translate), looked for in this order:

    1. the directory `compiler` (compile_layer's and MoELayer.from_hf's
       compiler=, moe-mlir-compile's --compiler);
    2. the directory $MOE_MLIR_BIN;
    3. $PATH;
    4. the build tree of the moe-mlir checkout this package comes from
       (<checkout>/build*/bin, the most recently built): the checkout
       holding this file, or the one `pip install ./python` installed it
       from.

    None when none has both. A directory given by argument or variable
    must hold both (else a MoERuntimeError NOT_FOUND naming it)."""
    for where, directory in (("compiler=", compiler),
                             ("$MOE_MLIR_BIN", os.environ.get("MOE_MLIR_BIN"))):
        if directory:
            tools = tuple(os.path.join(directory, name)
                          for name in ("moe-opt", "moe-translate"))
            missing = [t for t in tools if not os.access(t, os.X_OK)]
            if missing:
                raise MoERuntimeError(
                    "NOT_FOUND", f"{where} {directory!r}: no executable "
                    f"{' or '.join(os.path.basename(t) for t in missing)} "
                    "there (expected the directory holding moe-opt and "
                    "moe-translate, e.g. build/bin)")
            return tools
    tools = tuple(shutil.which(name) for name in ("moe-opt", "moe-translate"))
    if all(tools):
        return tools
    return _build_tree_compiler()


_identities = {}


def _compiler_identity(tools: Tuple[str, str]) -> str:
    """A hash of the compiler's executables, which names its bundles in the
    cache (memoised per path, size and modification time)."""
    stats = tuple((os.path.realpath(t), os.stat(t).st_size,
                   os.stat(t).st_mtime_ns) for t in tools)
    if stats not in _identities:
        digest = hashlib.sha256()
        for path, _, _ in stats:
            with open(path, "rb") as f:
                digest.update(hashlib.sha256(f.read()).digest())
        _identities[stats] = digest.hexdigest()[:16]
    return _identities[stats]


def compile_layer(spec: LayerSpec, *, cache_dir: Optional[str] = None,
                  compiler: Optional[str] = None, train: bool = False,
                  recompute_rows: bool = False,
                  native_layout: Optional[bool] = None,
                  expert_parallel: int = 0) -> str:
    """The path of the bundle of `spec` (entry ENTRY), compiled on first
    use. The cache holds <cache_dir>/<spec.key()>/layer.mlir and one
    <compiler id>.moebundle per compiler that compiled it. With train, the
    bundle also holds ENTRY_train and ENTRY_backward
    (--moe-generate-backward; training.py), as <compiler id>.train.moebundle;
    with recompute_rows too, its backward permutes the tokens again instead
    of saving the permuted rows (<compiler id>.train-recompute-rows.moebundle).
    A GPT-OSS train bundle takes the experts' weights as transformers keeps
    them (--moe-build-layer native-layout: gate-up [E, H, 2I] interleaved,
    down [E, I, H]) and trains on them as they lie
    (<compiler id>.train-native[-recompute-rows].moebundle, its source
    layer.train-native.mlir): native_layout None (the default) is that for
    GPT-OSS's train bundle and False otherwise; native_layout=False gives
    GPT-OSS's train bundle over the runtime's layout (the caller copies the
    weights into it). With expert_parallel=N, the layer one of N ranks runs
    (--moe-expert-parallel=ranks=N --moe-split-exchanges: its stage
    programs, each one entry, with the exchanges between them; the experts'
    weights the rank's E/N; <compiler id>.ep<N>.moebundle, whose stage
    entries say how they connect (contract 3.14: parallel.stages), its
    source layer.ep<N>.mlir the stages as split); with train too, the train forward's and the
    backward's stages beside them (--moe-generate-backward before the
    split: the adjoint exchanges; <compiler id>.train.ep<N>.moebundle, its
    source layer.train.ep<N>.mlir; the runtime's weight layout, rows
    saved). With a compiler
    (find_compiler), its own bundle is returned, compiled first when
    missing; without one, the newest bundle of the layer (one compiled
    elsewhere and copied here). Raises MoERuntimeError: NOT_FOUND (no
    bundle and no compiler: what to do), COMPILE_ERROR (moe-opt or
    moe-translate failed: their message)."""
    cache_dir = cache_dir or default_cache_dir()
    layer_dir = os.path.join(cache_dir, spec.key())
    tools = find_compiler(compiler)
    if recompute_rows and not train:
        raise ValueError("compile_layer: recompute_rows is an option of the "
                         "train bundle (train=True)")
    if expert_parallel and (expert_parallel < 1 or
                            spec.experts % expert_parallel):
        raise ValueError(
            "compile_layer: expert_parallel is the number of ranks, which "
            f"must divide the {spec.experts} experts, got {expert_parallel}")
    if expert_parallel and (recompute_rows or native_layout):
        raise ValueError("compile_layer: an expert-parallel train bundle "
                         "saves the rows and takes the runtime's weight "
                         "layout (no recompute_rows, no native_layout)")
    if native_layout is None:
        native_layout = (train and spec.activation == "gptoss" and
                         not expert_parallel)
    if native_layout and not (train and spec.activation == "gptoss"):
        raise ValueError("compile_layer: native_layout is an option of a "
                         "GPT-OSS train bundle (train=True, activation "
                         "gptoss)")
    suffix = (f".{'train.' if train else ''}ep{expert_parallel}.moebundle"
              if expert_parallel else ".moebundle" if not train else
              ".train" + ("-native" if native_layout else "") +
              ("-recompute-rows" if recompute_rows else "") + ".moebundle")
    if tools is None:
        bundles = [b for b in glob.glob(os.path.join(layer_dir, "*" + suffix))
                   if (train or ".train" not in os.path.basename(b)) and
                   (expert_parallel or ".ep" not in os.path.basename(b))]
        if bundles:
            return max(bundles, key=os.path.getmtime)
        raise MoERuntimeError(
            "NOT_FOUND", f"no compiled bundle for this layer ({spec}) in "
            f"{layer_dir}, and no compiler to build it: pass "
            "compiler=<directory with moe-opt and moe-translate>, set "
            "$MOE_MLIR_BIN, or put them on $PATH; or compile the layer on "
            "a machine that has them (moe-mlir-compile config.json "
            "--cache-dir DIR) and copy DIR here as $MOE_CACHE_DIR or "
            "cache_dir=")
    bundle = os.path.join(layer_dir, _compiler_identity(tools) + suffix)
    if os.path.exists(bundle):
        return bundle
    os.makedirs(layer_dir, exist_ok=True)
    source = os.path.join(layer_dir, f"layer.{'train.' if train else ''}"
                          f"ep{expert_parallel}.mlir"
                          if expert_parallel else "layer.train-native.mlir"
                          if native_layout else "layer.mlir")
    options = spec.options() + (" native-layout=true" if native_layout else "")
    with tempfile.TemporaryDirectory(dir=layer_dir) as scratch:
        empty = os.path.join(scratch, "empty.mlir")
        open(empty, "w").close()
        built_source = os.path.join(scratch, "layer.mlir")
        lowered = os.path.join(scratch, "layer.gpu.mlir")
        built = os.path.join(scratch, "layer.moebundle")
        backward = (["--moe-generate-backward=recompute-rows=true"]
                    if recompute_rows else
                    ["--moe-generate-backward"] if train else [])
        # Expert parallelism: the rank's stages (of the train forward and
        # its backward too, with the adjoint exchanges), kept as the source.
        split = ([[tools[0], built_source,
                   f"--moe-expert-parallel=ranks={expert_parallel}"] +
                  backward + ["--moe-split-exchanges", "-o", built_source]]
                 if expert_parallel else [])
        for command in [[tools[0], empty,
                         f"--moe-build-layer={options}", "-o",
                         built_source]] + split + [
                        [tools[0], built_source] +
                        ([] if expert_parallel else backward) +
                        [PIPELINE, "-o", lowered],
                        [tools[1], "--moe-to-bundle", lowered, "-o", built]]:
            result = subprocess.run(command, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT)
            if result.returncode != 0:
                output = result.stdout.decode("utf-8", "replace").strip()
                raise MoERuntimeError(
                    "COMPILE_ERROR", f"{os.path.basename(command[0])} failed "
                    f"(exit {result.returncode}) on the layer {spec}: "
                    f"{output[-4000:] or 'no output'} (moe-opt runs ptxas "
                    "from $PATH or $CUDA_ROOT/bin)")
        os.replace(built_source, source)  # the layer as the compiler built it
        os.replace(built, bundle)  # atomic: concurrent compiles are safe
    return bundle


def main(argv=None) -> int:
    """The command line moe-mlir-compile (also `python3 -m
    moe_mlir.layer`)."""
    parser = argparse.ArgumentParser(
        prog="moe-mlir-compile", description="Compile the MoE layer of Hugging "
        "Face config.json files into the cache MoELayer.from_hf (or, with "
        "--experts, the experts backend) reads, and "
        "print the bundles' paths.")
    parser.add_argument("configs", nargs="+", metavar="config.json")
    parser.add_argument("--cache-dir", help="default: $MOE_CACHE_DIR or "
                        "~/.cache/moe-mlir")
    parser.add_argument("--compiler", help="directory with moe-opt and "
                        "moe-translate (default: $MOE_MLIR_BIN, $PATH, then "
                        "the build tree of this package's checkout)")
    for flag, what in (
            ("--options", "print the layers' --moe-build-layer options "
             "instead"),
            ("--experts", "the layer of experts_implementation=\"moe_mlir\" "
             "(the model routes) instead of MoELayer's"),
            ("--train", "the training bundle TrainableMoELayer reads (the "
             "train forward and the backward) instead"),
            ("--recompute-rows", "with --train: the one of "
             "TrainableMoELayer.from_hf(block, recompute_rows=True)"),
            ("--copy-layout", "with --train, GPT-OSS: the one of "
             "TrainableMoELayer.from_hf(block, native_layout=False) (the "
             "experts' weights copied into the runtime's layout each step) "
             "instead of the default's (over them as they lie)")):
        parser.add_argument(flag, action="store_true", help=what)
    parser.add_argument("--expert-parallel", type=int, default=0, metavar="N",
                        help="the layer one of N ranks runs (with --train, "
                        "its training bundle too) that "
                        "ExpertParallelMoELayer.from_hf(block, ep_group=pg) "
                        "reads for a group of N ranks")
    args = parser.parse_args(argv)
    if args.expert_parallel and args.experts:
        parser.error("--expert-parallel compiles MoELayer's layer, not "
                     "--experts'")
    if args.recompute_rows and not args.train:
        parser.error("--recompute-rows is an option of --train")
    if args.copy_layout and not args.train:
        parser.error("--copy-layout is an option of --train")
    if args.train and args.experts:
        parser.error("--train compiles MoELayer's layer, not --experts'")
    for path in args.configs:
        with open(path) as f:
            spec = spec_from_config(json.load(f))
        if args.experts:
            spec = spec.experts_only()
        if args.copy_layout and spec.activation != "gptoss":
            parser.error(f"{path}: --copy-layout is an option of a GPT-OSS "
                         "train bundle (the other models' weights already "
                         "have the runtime's layout)")
        try:
            print(spec.options() if args.options else compile_layer(
                spec, cache_dir=args.cache_dir, compiler=args.compiler,
                train=args.train, recompute_rows=args.recompute_rows,
                native_layout=False if args.copy_layout else None,
                expert_parallel=args.expert_parallel))
        except ValueError as error:
            parser.error(f"{path}: {error}")
    return 0


# ---------------------------------------------------------------------------
# The torch half.

def _need_torch(what: str) -> None:
    if torch is None:
        raise ImportError(f"{what} needs PyTorch (import torch failed); the "
                          "compile half (LayerSpec, compile_layer) does not")


def _block_model_type(block) -> str:
    """The model_type of a supported Hugging Face block (a subclass too),
    by class name (transformers need not be importable)."""
    for cls in type(block).__mro__:
        if cls.__name__ in BLOCK_CLASSES:
            return BLOCK_CLASSES[cls.__name__]
    raise TypeError(f"{type(block).__name__} is not a supported MoE block: "
                    f"expected one of {', '.join(BLOCK_CLASSES)} (transformers "
                    "4.x or 5.x)")


def _attr(obj, *names, where: str):
    """The first of `names` that `obj` has (not None); ValueError if none."""
    for name in names:
        value = getattr(obj, name, None)
        if value is not None:
            return value
    raise ValueError(f"{where} ({type(obj).__name__}) has no "
                     f"{' or '.join(names)}")


def _tensor(obj, name: str, where: str, dims: int):
    """obj.<name>, a bfloat16 tensor of `dims` dimensions (else TypeError,
    ValueError naming it), detached."""
    tensor = _attr(obj, name, where=where)
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{where}.{name} is a {type(tensor).__name__}, not a "
                        "tensor (quantized experts are not supported: load "
                        "the model in bfloat16)")
    if tensor.dtype != torch.bfloat16:
        raise TypeError(f"{where}.{name} is {tensor.dtype}: MoELayer runs "
                        "bfloat16 kernels and does not convert weights; "
                        "convert the block first (block.to(torch.bfloat16))")
    if tensor.dim() != dims:
        raise ValueError(f"{where}.{name} is {tuple(tensor.shape)}, expected "
                         f"{dims} dimensions")
    return tensor.detach()


def _weight(obj, name: str, where: str, shape, meaning: str):
    """obj.<name>, a bfloat16 tensor of `shape` (TypeError, ValueError)."""
    tensor = _tensor(obj, name, where, len(shape))
    if tuple(tensor.shape) != tuple(shape):
        raise ValueError(f"{where}.{name} is {tuple(tensor.shape)}, expected "
                         f"{tuple(shape)} = {meaning}, with E and H from the "
                         "router weight [E, H]")
    return tensor


@dataclasses.dataclass
class PackedBlock:
    """A block's layer in the runtime's layout (pack_hf_block). With a
    shared expert of width Is, the expert weights have c = ceil(Is / I)
    more experts E .. E+c-1: slice j of the shared expert (its
    intermediate units [jI, (j+1)I), zero past Is)."""
    spec: LayerSpec
    #: bf16 [E + c, 2I, H]: I gate rows, I up rows
    gate_up_weights: "torch.Tensor"
    down_weights: "torch.Tensor"  # bf16 [E + c, H, I]
    gate_up_bias: Optional["torch.Tensor"]  # bf16 [E, 2I] (GPT-OSS)
    down_bias: Optional["torch.Tensor"]  # f32 [E, H] (GPT-OSS)
    router_weight: "torch.Tensor"  # [E, H], bf16 (DeepSeek-V3: f32)
    router_bias: Optional["torch.Tensor"]  # bf16 [E] (GPT-OSS)
    score_bias: Optional["torch.Tensor"]  # f32 [E] (DeepSeek-V3)
    shared_gate: Optional["torch.Tensor"]  # bf16 [1, H] (Qwen2-MoE)
    #: What the block's forward returns: "tensor", "router_logits"
    #: ((out, logits [T, E]): transformers 4.x Mixtral, Qwen2-MoE,
    #: Qwen3-MoE, OLMoE) or
    #: "router_scores" ((out, routing weights [T, k]): GPT-OSS).
    returns: str


def _read_block(block):
    """(spec, source tensors, what forward returns) of a supported block,
    with every check of classes, shapes and dtypes made and nothing
    copied."""
    model_type = _block_model_type(block)
    name = type(block).__name__
    router_name = "router" if model_type == "gpt_oss" else "gate"
    router = _attr(block, router_name, where=name)
    where_router = f"{name}.{router_name}"
    router_weight = _attr(router, "weight", where=where_router)
    if not isinstance(router_weight, torch.Tensor) or router_weight.dim() != 2:
        raise ValueError(f"{where_router}.weight must be a tensor [E, H]")
    if model_type != "deepseek_v3" and router_weight.dtype != torch.bfloat16:
        raise TypeError(f"{where_router}.weight is {router_weight.dtype}: "
                        "MoELayer runs bfloat16 blocks; convert the block "
                        "first (block.to(torch.bfloat16))")
    E, H = router_weight.shape
    values = dict(experts=E, hidden=H, top_k=(
        router.top_k if hasattr(router, "top_k")  # 5.x routers, DeepSeek
        else _attr(block, "top_k", where=name)))
    sources = dict(router_weight=router_weight.detach())
    experts = _attr(block, "experts", where=name)
    where = f"{name}.experts"
    fused = hasattr(experts, "gate_up_proj")
    if model_type == "gpt_oss":
        # gate_up_proj [E, H, 2I] with gate and up units in alternate
        # columns, down_proj [E, I, H]: the transposes of our layout.
        I = _tensor(experts, "down_proj", where, 3).shape[1]
        sources.update(
            gate_up=_weight(experts, "gate_up_proj", where, (E, H, 2 * I),
                            "(E, H, 2I)"),
            gate_up_bias=_weight(experts, "gate_up_proj_bias", where,
                                 (E, 2 * I), "(E, 2I)"),
            down=_weight(experts, "down_proj", where, (E, I, H), "(E, I, H)"),
            down_bias=_weight(experts, "down_proj_bias", where, (E, H),
                              "(E, H)"),
            router_bias=_weight(router, "bias", where_router, (E,), "(E,)"))
        values.update(activation="gptoss",
                      alpha=_attr(experts, "alpha", where=where),
                      limit=_attr(experts, "limit", where=where))
    elif fused:  # transformers 5.x: [E, 2I, H] (gate rows, up rows), [E, H, I]
        I = _tensor(experts, "down_proj", where, 3).shape[2]
        sources.update(
            gate_up=_weight(experts, "gate_up_proj", where, (E, 2 * I, H),
                            "(E, 2I, H)"),
            down=_weight(experts, "down_proj", where, (E, H, I), "(E, H, I)"))
        values["activation"] = _activation(experts, where)
    else:  # transformers 4.x: a ModuleList of E expert MLPs
        if not hasattr(experts, "__len__") or not hasattr(experts, "__getitem__"):
            raise ValueError(f"{where} ({type(experts).__name__}) is neither "
                             "fused experts (gate_up_proj, down_proj) nor a "
                             "list of expert MLPs")
        if len(experts) != E:
            raise ValueError(f"{where} holds {len(experts)} experts, the "
                             f"router weight {tuple(router_weight.shape)} "
                             f"has E = {E}")
        # Mixtral's w1 (gate), w3 (up), w2 (down); the others' names.
        names = (("w1", "w3", "w2") if hasattr(experts[0], "w1")
                 else ("gate_proj", "up_proj", "down_proj"))
        down = _attr(experts[0], names[2], where=f"{where}[0]")
        I = _tensor(down, "weight", f"{where}[0].{names[2]}", 2).shape[1]
        per_expert, activations = [], set()
        for e in range(E):
            mlp = experts[e]
            per_expert.append(tuple(
                _weight(_attr(mlp, n, where=f"{where}[{e}]"), "weight",
                        f"{where}[{e}].{n}", shape, meaning)
                for n, shape, meaning in zip(
                    names, ((I, H), (I, H), (H, I)),
                    ("(I, H)", "(I, H)", "(H, I)"))))
            activations.add(_activation(mlp, f"{where}[{e}]"))
        if len(activations) > 1:
            raise ValueError(f"{where}: the experts have different "
                             f"activations ({', '.join(sorted(activations))})")
        sources["per_expert"] = per_expert
        values["activation"] = activations.pop()
    values["intermediate"] = I
    if model_type in ("qwen3_moe", "qwen2_moe", "olmoe", "deepseek_v3"):
        values["norm_topk_prob"] = (  # 5.x: the router's; 4.x: the block's
            router.norm_topk_prob if hasattr(router, "norm_topk_prob")
            else _attr(block, "norm_topk_prob", where=name))
    if model_type == "deepseek_v3":
        # The router's in some 5.x releases, the block's in others.
        holder = router if hasattr(router, "topk_group") else block
        where_holder = where_router if holder is router else name
        values.update(
            groups=_attr(holder, "num_group", "n_group", where=where_holder),
            select_groups=_attr(holder, "topk_group", where=where_holder),
            scale=_attr(holder, "routed_scaling_factor", where=where_holder))
        score_bias = _attr(router, "e_score_correction_bias",
                           where=where_router)
        if tuple(score_bias.shape) != (E,):
            raise ValueError(f"{where_router}.e_score_correction_bias is "
                             f"{tuple(score_bias.shape)}, expected ({E},)")
        sources["score_bias"] = score_bias.detach()
    if model_type in ("qwen2_moe", "deepseek_v3"):
        shared_name = ("shared_expert" if model_type == "qwen2_moe"
                       else "shared_experts")
        gate_proj, up_proj, down_proj, Is = _shared_mlp(
            _attr(block, shared_name, where=name), f"{name}.{shared_name}", H)
        sources["shared"] = (gate_proj, up_proj, down_proj)
        values["shared_intermediate"] = Is
        if model_type == "qwen2_moe" and Is:  # a Linear(H, 1, bias=False)
            gate = _attr(block, "shared_expert_gate", where=name)
            where_gate = f"{name}.shared_expert_gate"
            if getattr(gate, "bias", None) is not None:
                raise ValueError(f"{where_gate} has a bias; the compiled "
                                 "gate is sigmoid(x . g) without one")
            sources["shared_gate"] = _weight(gate, "weight", where_gate,
                                             (1, H), "(1, H)")
    spec = _family_spec(model_type, **values)
    if model_type == "gpt_oss":
        returns = "router_scores"
    elif not fused and model_type != "deepseek_v3":
        returns = "router_logits"
    else:
        returns = "tensor"
    return spec, sources, returns


def _shared_mlp(mlp, where: str, H: int):
    """(gate_proj [Is, H], up_proj [Is, H], down_proj [H, Is] weights, Is)
    of a shared expert MLP (Qwen2MoeMLP, DeepseekV3MLP), checked: bfloat16,
    silu, no biases."""
    weights = []
    down = _attr(mlp, "down_proj", where=where)
    Is = _tensor(down, "weight", f"{where}.down_proj", 2).shape[1]
    for n, shape, meaning in (("gate_proj", (Is, H), "(Is, H)"),
                              ("up_proj", (Is, H), "(Is, H)"),
                              ("down_proj", (H, Is), "(H, Is)")):
        linear = _attr(mlp, n, where=where)
        if getattr(linear, "bias", None) is not None:
            raise ValueError(f"{where}.{n} has a bias; the compiled shared "
                             "expert has none")
        weights.append(_weight(linear, "weight", f"{where}.{n}", shape,
                               meaning))
    activation = _activation(mlp, where)
    if activation not in _SILU_NAMES + _SILU_CLASSES:
        raise ValueError(f"{where}: the shared expert's activation is "
                         f"{activation!r}; the compiled one is silu(gate) * "
                         "up (hidden_act 'silu')")
    return (*weights, Is)


def _activation(module, where: str) -> str:
    """The class name of `module.act_fn` (checked by _family_spec)."""
    return type(_attr(module, "act_fn", where=where)).__name__


def _devices(sources) -> set:
    found = set()
    for value in sources.values():
        if isinstance(value, torch.Tensor):
            found.add(value.device)
        elif isinstance(value, tuple):  # the shared expert's
            found.update(t.device for t in value)
        elif isinstance(value, list):
            found.update(t.device for trio in value for t in trio)
    return found


def _pack(spec: LayerSpec, sources, returns: str) -> PackedBlock:
    """The runtime's layout, on the weights' device. Weights already in it
    (transformers 5.x fused bf16 experts, contiguous) are shared, not
    copied, unless a shared expert's slices must follow them."""
    E, H, I = spec.experts, spec.hidden, spec.intermediate
    rows = E + spec.shared_slices
    with torch.no_grad():
        gate_up_bias = down_bias = None
        device = sources["router_weight"].device
        if "per_expert" in sources:
            gate_up = torch.empty(rows, 2 * I, H, dtype=torch.bfloat16,
                                  device=device)
            down = torch.empty(rows, H, I, dtype=torch.bfloat16,
                               device=device)
            for e, (gate, up, down_e) in enumerate(sources["per_expert"]):
                gate_up[e, :I].copy_(gate)
                gate_up[e, I:].copy_(up)
                down[e].copy_(down_e)
        elif spec.activation == "gptoss":
            # Column 2i of gate_up_proj is gate unit i, column 2i + 1 up unit
            # i (GptOssExperts: gate_up[..., ::2], gate_up[..., 1::2]).
            source = sources["gate_up"]
            gate_up = torch.empty(E, 2 * I, H, dtype=torch.bfloat16,
                                  device=source.device)
            gate_up[:, :I].copy_(source[..., 0::2].transpose(1, 2))
            gate_up[:, I:].copy_(source[..., 1::2].transpose(1, 2))
            bias = sources["gate_up_bias"]
            gate_up_bias = torch.cat((bias[:, 0::2], bias[:, 1::2]), dim=1)
            down = sources["down"].transpose(1, 2).contiguous()
            down_bias = sources["down_bias"].float().contiguous()
        elif spec.shared_intermediate:
            gate_up = torch.empty(rows, 2 * I, H, dtype=torch.bfloat16,
                                  device=device)
            down = torch.empty(rows, H, I, dtype=torch.bfloat16,
                               device=device)
            gate_up[:E].copy_(sources["gate_up"])
            down[:E].copy_(sources["down"])
        else:
            gate_up = sources["gate_up"].contiguous()
            down = sources["down"].contiguous()
        if spec.shared_intermediate:
            _arrange_shared(spec, *sources["shared"], gate_up[E:], down[E:])
        router_weight = sources["router_weight"]
        if spec.logits == "f32":
            router_weight = router_weight.float()
        router_bias = sources.get("router_bias")
        score_bias = sources.get("score_bias")
        shared_gate = sources.get("shared_gate") if spec.shared_gate else None
        return PackedBlock(
            spec, gate_up, down, gate_up_bias, down_bias,
            router_weight.contiguous(),
            None if router_bias is None else router_bias.contiguous(),
            None if score_bias is None else score_bias.float().contiguous(),
            None if shared_gate is None else shared_gate.contiguous(),
            returns)


def _arrange_shared(spec: LayerSpec, gate_proj, up_proj, down_proj, gate_up,
                    down) -> None:
    """Writes the shared expert (gate_proj, up_proj [Is, H], down_proj
    [H, Is]) as the c experts gate_up [c, 2I, H] and down [c, H, I]: slice
    j takes intermediate units [jI, (j+1)I), zero past Is. The arrangement
    of the compiler's @<f>_pack_shared (--moe-route-shared-experts), which
    the bundle's entry expects its callers to have made."""
    I, Is, c = spec.intermediate, spec.shared_intermediate, spec.shared_slices
    H = spec.hidden

    def by_slice(rows):  # [Is, H] -> [c, I, H]
        padded = rows.new_zeros(c * I, H)
        padded[:Is].copy_(rows)
        return padded.view(c, I, H)

    gate_up[:, :I].copy_(by_slice(gate_proj))
    gate_up[:, I:].copy_(by_slice(up_proj))
    columns = down_proj.new_zeros(H, c * I)
    columns[:, :Is].copy_(down_proj)
    down.copy_(columns.view(H, c, I).transpose(0, 1))


def pack_hf_block(block) -> PackedBlock:
    """The layer of a Hugging Face MoE block (see the module docstring) in
    the runtime's layout, on the block's device (any: CPU too). Raises
    TypeError (unsupported block class, weights not bfloat16) or ValueError
    (unsupported configuration, mismatched weight shapes), naming it."""
    _need_torch("pack_hf_block")
    spec, sources, returns = _read_block(block)
    devices = _devices(sources)
    if len(devices) > 1:
        raise ValueError(f"{type(block).__name__}: its weights are on "
                         f"several devices ({', '.join(map(str, devices))})")
    return _pack(spec, sources, returns)


_bundles = {}


def _open_bundle(path: str) -> Bundle:
    """One Bundle per path in this process: layers of one configuration
    share their loaded kernels."""
    if path not in _bundles:
        _bundles[path] = Bundle(path)
    return _bundles[path]


def _routing_weights(workspace, tokens: int, top_k: int):
    """The route's float32 weights [T, k] in a layer.v1 workspace (contract
    section 3.5: int32 ids [T, k] first, then the weights, each from a
    multiple of 256 bytes)."""
    start = -(-tokens * top_k * 4 // 256) * 256
    end = start + tokens * top_k * 4
    return workspace[start:end].view(torch.float32).view(tokens, top_k)


if torch is not None:
    class MoELayer(torch.nn.Module):
        """A Hugging Face sparse MoE block as one compiled layer call; build
        it with from_hf. Inference only: bfloat16, CUDA, no backward.

        forward(hidden_states [..., H], bfloat16, on the weights' device)
        returns what the block returns: the output [..., H] (bfloat16);
        (output, router_logits [T, E]) for transformers 4.x Mixtral,
        Qwen2-MoE, Qwen3-MoE and OLMoE blocks; (output, router_scores
        [T, k], the routing weights best first in the input's dtype) for
        GPT-OSS (4.x returned them scattered to [T, E]). T is the number of
        tokens (the product of the leading dimensions).

        Memory: the packed weights are non-persistent buffers (state_dict
        is empty); they share the block's storage where it already has the
        runtime's layout (transformers 5.x fused bfloat16 experts, no
        shared expert), else are a copy: a block with a shared expert
        (Qwen2-MoE, DeepSeek-V3) is always copied, as its c = ceil(Is / I)
        slices are experts after the routed ones in one [E + c, ...]
        tensor. One workspace per module is reused by eager calls, grown to
        the largest T seen; calls of one module must therefore be ordered
        on the GPU (one stream, or streams the caller synchronises), as for
        any module holding buffers. Each call allocates its output from torch's
        caching allocator, as the block would.

        CUDA graphs: forward makes no host synchronisation; it runs the
        router linear, allocates its output and launches the layer's
        kernels on the current stream. Under capture it takes its workspace
        from the graph's memory pool (a torch.empty, like any
        intermediate), never the module's eager workspace, which a later,
        larger eager call may reallocate while a graph still points at it.
        The kernels are loaded by from_hf for the block's device; a module
        moved to another device must run once there before capture.
        """

        def __init__(self, packed: PackedBlock, bundle_path: str):
            super().__init__()
            self.spec = packed.spec
            self.bundle_path = bundle_path
            self._bundle = _open_bundle(bundle_path)
            self._bundle.entry(ENTRY)  # NOT_FOUND if not a layer bundle
            self._returns = packed.returns
            for name in ("gate_up_weights", "down_weights", "gate_up_bias",
                         "down_bias", "router_weight", "router_bias",
                         "score_bias", "shared_gate"):
                self.register_buffer(name, getattr(packed, name),
                                     persistent=False)
            self._workspace = None
            self._loaded = set()

        @classmethod
        def from_hf(cls, block, *, cache_dir: Optional[str] = None,
                    compiler: Optional[str] = None) -> "MoELayer":
            """The layer of a Hugging Face sparse MoE block (bfloat16, on a
            CUDA device), compiled on first use or loaded from the cache
            (compile_layer: cache_dir defaults to $MOE_CACHE_DIR or
            ~/.cache/moe-mlir; compiler, a directory with moe-opt and
            moe-translate, to what find_compiler finds; no compiler is
            needed when the cache has the layer). The block is not modified and
            not kept, but its expert weights' storage is shared where it
            already has the runtime's layout and no shared expert follows
            the routed ones, else packed once (a copy). Raises TypeError
            (unsupported block, not bfloat16), ValueError (unsupported
            configuration, mismatched weights, a block not on a CUDA
            device) or MoERuntimeError (NO_GPU, NOT_FOUND: no bundle and no
            compiler, COMPILE_ERROR, and the runtime's errors loading the
            kernels, e.g. on a GPU other than sm_90a)."""
            spec, sources, returns = _read_block(block)
            if not torch.cuda.is_available():
                raise MoERuntimeError(
                    "NO_GPU", "MoELayer needs a CUDA GPU (compiled for "
                    "sm_90a: H100/H200) and torch.cuda.is_available() is "
                    "False")
            devices = _devices(sources)
            if len(devices) != 1 or next(iter(devices)).type != "cuda":
                raise ValueError(
                    f"{type(block).__name__}: its weights are on "
                    f"{', '.join(sorted(map(str, devices)))}; MoELayer "
                    "runs on one CUDA device: move the block there first "
                    "(block.to('cuda'))")
            path = compile_layer(spec, cache_dir=cache_dir,
                                 compiler=compiler)
            layer = cls(_pack(spec, sources, returns), path)
            layer._load(next(iter(devices)))
            return layer

        def extra_repr(self) -> str:
            return f"{self.spec}, bundle={self.bundle_path!r}"

        def _load(self, device) -> None:
            if device not in self._loaded:
                with torch.cuda.device(device):
                    if torch.cuda.is_current_stream_capturing():
                        raise MoERuntimeError(
                            "INVALID_ARGUMENT", f"MoELayer: the kernels are "
                            f"not loaded on {device} yet, which cannot "
                            "happen during CUDA graph capture: run the "
                            "layer once on that device before capturing")
                    self._bundle.load()
                self._loaded.add(device)

        def _workspace_for(self, device, tokens: int):
            need = self._bundle.layer_workspace_bytes(
                ENTRY, tokens, self.spec.hidden, self.spec.intermediate)
            if torch.cuda.is_current_stream_capturing():
                return torch.empty(need, dtype=torch.uint8, device=device)
            workspace = self._workspace
            if (workspace is None or workspace.device != device
                    or workspace.numel() < need):
                self._workspace = None  # freed before its successor
                self._workspace = torch.empty(need, dtype=torch.uint8,
                                              device=device)
            return self._workspace

        def _check_input(self, hidden_states) -> None:
            if not isinstance(hidden_states, torch.Tensor):
                raise TypeError(f"MoELayer: hidden_states is a "
                                f"{type(hidden_states).__name__}, not a "
                                "torch.Tensor")
            if hidden_states.dtype != torch.bfloat16:
                raise TypeError(f"MoELayer: hidden_states is "
                                f"{hidden_states.dtype}; the layer computes "
                                "in torch.bfloat16 and does not convert: pass "
                                "hidden_states.to(torch.bfloat16)")
            device = self.gate_up_weights.device
            if hidden_states.device != device:
                raise ValueError(f"MoELayer: hidden_states is on "
                                 f"{hidden_states.device}, the layer's "
                                 f"weights on {device}")
            if hidden_states.dim() < 1 or hidden_states.shape[-1] != self.spec.hidden:
                raise ValueError(f"MoELayer: hidden_states is "
                                 f"{tuple(hidden_states.shape)}, expected "
                                 f"[..., H] with H = {self.spec.hidden}")
            if torch.is_grad_enabled() and hidden_states.requires_grad:
                raise RuntimeError("MoELayer has no backward (inference "
                                   "only) and hidden_states requires grad: "
                                   "call it under torch.no_grad() or "
                                   "torch.inference_mode()")

        def forward(self, hidden_states):
            self._check_input(hidden_states)
            spec = self.spec
            tokens = hidden_states.reshape(-1, spec.hidden).contiguous()
            count = tokens.shape[0]
            if spec.logits == "f32":  # DeepSeek-V3: float32 router
                logits = torch.nn.functional.linear(tokens.float(),
                                                    self.router_weight)
            else:
                logits = torch.nn.functional.linear(tokens, self.router_weight,
                                                    self.router_bias)
            device = tokens.device
            out = torch.empty(count, spec.hidden, dtype=torch.bfloat16,
                              device=device)
            scores = None
            if count:
                self._load(device)
                with torch.cuda.device(device):
                    workspace = self._workspace_for(device, count)
                    # launch, not Bundle.layer: the entry's signature may
                    # have the shared expert's gate.
                    self._bundle.launch(
                        ENTRY, tokens=tokens, logits=logits,
                        gate_up_weights=self.gate_up_weights,
                        down_weights=self.down_weights,
                        score_bias=self.score_bias,
                        gate_up_bias=self.gate_up_bias,
                        down_bias=self.down_bias,
                        shared_gate=self.shared_gate, out=out,
                        workspace=workspace)
                    if self._returns == "router_scores":
                        scores = _routing_weights(workspace, count,
                                                  spec.top_k).to(
                                                      hidden_states.dtype)
            output = out.view(hidden_states.shape)
            if self._returns == "router_logits":
                return output, logits
            if self._returns == "router_scores":
                if scores is None:
                    scores = logits.new_empty(0, spec.top_k)
                return output, scores
            return output
else:
    def __getattr__(name):
        if name == "MoELayer":
            _need_torch("MoELayer")
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if __name__ == "__main__":
    sys.exit(main())
