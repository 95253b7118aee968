#!/usr/bin/env python3
"""Checks moe_mlir.layer (python/moe_mlir/layer.py) without a GPU.

Always (no torch needed): the MLIR written for the five reference models'
configurations, compiled by the build's moe-opt and moe-translate into
bundles whose layer.v1 entry the runtime reads back; the cache (a second
compile does not run the compiler, a cache without a compiler serves its
bundle, the command line: python -m moe_mlir.layer and, installed,
moe-mlir-compile); where the compiler is found; the checks of LayerSpec
and spec_from_config and the compiler errors, by message. With torch: the
weights of fake transformers 4.x and 5.x blocks packed into the runtime's
layout (GPT-OSS de-interleaved, a shared expert as ceil(Is / I) more
experts) and the block errors. With transformers too: real 5.x blocks on the CPU in float32
against the packed layer computed by an independent reference, and their
specs against their configs'.

    python_torch_test.py COMPILER_DIR

moe_mlir is imported as Python finds it: from the source tree
(check-moe-runtime sets PYTHONPATH=python and MOE_RUNTIME_LIB to the
build's library) or as `pip install ./python` installed it (scripts/test.sh).

Exits 1 on failure. One file past 800 lines: its checks share one compiled
cache, whose compiles are most of its run time.
"""
import contextlib
import copy
import glob
import json
import os
import re
import subprocess
import sys
import sysconfig
import tempfile
import types
from concurrent.futures import ThreadPoolExecutor

import moe_mlir  # must import without torch
from moe_mlir import Bundle, MoERuntimeError

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
PACKAGE = os.path.dirname(os.path.abspath(moe_mlir.__file__))
SOURCE_TREE = os.path.samefile(PACKAGE, os.path.join(REPO, "python", "moe_mlir"))
print(f"moe_mlir {moe_mlir.__version__} from {PACKAGE} "
      f"({'the source tree' if SOURCE_TREE else 'installed'})")

COMPILER = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(HERE, "..", "..", "build", "bin"))
failures = 0


def check(condition, what):
    global failures
    if not condition:
        print(f"FAIL: {what}")
        failures += 1


def expect(fn, error_type, *needles, status=None):
    """fn() raises error_type whose message has every needle."""
    try:
        fn()
    except error_type as error:
        message = str(error)
        for needle in needles:
            check(needle in message, f"'{needle}' not in '{message}'")
        if status is not None:
            check(error.status == status, f"status {error.status} != {status}")
        return
    except Exception as error:  # the wrong kind of error
        check(False, f"expected {error_type.__name__} ({needles}), got "
              f"{type(error).__name__}: {error}")
        return
    check(False, f"no {error_type.__name__} ({needles})")


@contextlib.contextmanager
def environment(**values):
    """os.environ with `values` set (None: removed), restored after."""
    saved = {name: os.environ.get(name) for name in values}
    try:
        for name, value in values.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def no_build_tree():
    """find_compiler without its last resort, the checkout's build tree."""
    saved = moe_mlir.layer._build_tree_compiler
    moe_mlir.layer._build_tree_compiler = lambda: None
    try:
        yield
    finally:
        moe_mlir.layer._build_tree_compiler = saved


# The five reference models' MoE layers (their config.json fields).
CONFIGS = {
    "mixtral": dict(model_type="mixtral", hidden_size=4096,
                    intermediate_size=14336, num_local_experts=8,
                    num_experts_per_tok=2, hidden_act="silu"),
    "qwen3_moe": dict(model_type="qwen3_moe", hidden_size=2048,
                      moe_intermediate_size=768, num_experts=128,
                      num_experts_per_tok=8, hidden_act="silu",
                      norm_topk_prob=True),
    "olmoe": dict(model_type="olmoe", hidden_size=2048,
                  intermediate_size=1024, num_experts=64,
                  num_experts_per_tok=8, hidden_act="silu",
                  norm_topk_prob=False),
    "deepseek_v3": dict(model_type="deepseek_v3", hidden_size=7168,
                        moe_intermediate_size=2048, n_routed_experts=256,
                        num_experts_per_tok=8, hidden_act="silu",
                        norm_topk_prob=True, n_group=8, topk_group=4,
                        routed_scaling_factor=2.5, n_shared_experts=1),
    "gpt_oss": dict(model_type="gpt_oss", hidden_size=2880,
                    intermediate_size=2880, num_local_experts=128,
                    num_experts_per_tok=4),
}
# The --moe-build-layer options of each (the semantics of its config), and
# the route and expert-MLP lines the compiler then builds.
L = "name=moe_layer "
OPTIONS = {
    "mixtral": L + "hidden=4096 intermediate=14336 experts=8 top-k=2 "
               "routing=softmax_topk logits=bf16 activation=silu renormalize=true",
    "qwen3_moe": L + "hidden=2048 intermediate=768 experts=128 top-k=8 "
                 "routing=softmax_topk logits=bf16 activation=silu renormalize=true",
    "olmoe": L + "hidden=2048 intermediate=1024 experts=64 top-k=8 "
             "routing=softmax_topk logits=bf16 activation=silu",
    "deepseek_v3": L + "hidden=7168 intermediate=2048 experts=256 top-k=8 "
                   "routing=sigmoid_topk logits=f32 activation=silu renormalize=true "
                   "groups=8 select-groups=4 scale=2.5 score-bias=true shared-intermediate=2048",
    "gpt_oss": L + "hidden=2880 intermediate=2880 experts=128 top-k=4 "
               "routing=topk_softmax logits=bf16 activation=gptoss alpha=1.702 "
               "limit=7.0 expert-bias=true",
}
ROUTES = {
    "mixtral": "moe.route softmax_topk %arg1 top 2 renormalize : (tensor<?x8xbf16>)",
    "qwen3_moe": "moe.route softmax_topk %arg1 top 8 renormalize : (tensor<?x128xbf16>)",
    "olmoe": "moe.route softmax_topk %arg1 top 8 : (tensor<?x64xbf16>)",
    "deepseek_v3": "moe.route sigmoid_topk %arg1 bias %arg2 top 8 groups 8 select 4 "
                   "renormalize scale 2.500000e+00 : (tensor<?x256xf32>, tensor<256xf32>)",
    "gpt_oss": "moe.route topk_softmax %arg1 top 4 : (tensor<?x128xbf16>)",
}
MLPS = {
    "mixtral": "moe.expert_mlp silu %rows, %offsets, %arg2, %arg3 :",
    "deepseek_v3": "moe.expert_mlp silu %rows, %offsets, %arg3, %arg4 :",
    "gpt_oss": "moe.expert_mlp gptoss %rows, %offsets, %arg2, %arg4 gate_up_bias "
               "%arg3 down_bias %arg5 alpha 1.702000e+00 limit 7.000000e+00 :",
}

specs = {name: moe_mlir.spec_from_config(c) for name, c in CONFIGS.items()}
for name, spec in specs.items():
    check(spec.options() == OPTIONS[name],
          f"{name}: options {spec.options()!r}")
    check(spec.key() == moe_mlir.spec_from_config(dict(CONFIGS[name])).key(),
          f"{name}: deterministic")
    # A config object (as transformers passes) gives the same spec.
    check(moe_mlir.spec_from_config(types.SimpleNamespace(**CONFIGS[name]))
          == spec, f"{name}: config object")
check(len({spec.key() for spec in specs.values()}) == 5, "distinct keys")
check(specs["deepseek_v3"].logits == "f32" and specs["gpt_oss"].expert_bias,
      "DeepSeek-V3 float32 logits, GPT-OSS biases")
# All groups selected is no group limit; 1.0 is no scale.
ungrouped = moe_mlir.spec_from_config(dict(CONFIGS["deepseek_v3"], topk_group=8,
                                            routed_scaling_factor=1.0))
check(ungrouped.groups == 0 and " groups=" not in ungrouped.options()
      and " scale=" not in ungrouped.options(), f"ungrouped {ungrouped}")

# The spec's and config's checks, by message.
base = dict(hidden=64, intermediate=32, experts=8, top_k=2,
            routing="softmax_topk")
for change, needle in [
        (dict(hidden=100), "LayerSpec.hidden = 100: the runtime needs a positive multiple of 8"),
        (dict(intermediate=0), "LayerSpec.intermediate = 0"),
        (dict(experts=2000), "LayerSpec.experts = 2000: the permutation kernels take 1 to 1024"),
        (dict(top_k=9), "LayerSpec.top_k = 9: must be in [1, min(E, 32)] = [1, 8]"),
        (dict(routing="softmax"), "LayerSpec.routing = 'softmax'"),
        (dict(groups=4, select_groups=2), "only compiled for sigmoid_topk"),
        (dict(routing="sigmoid_topk", groups=3, select_groups=1), "must be at least 2 and divide E = 8"),
        (dict(routing="sigmoid_topk", groups=4, select_groups=4), "select_groups = 4: must be in [1, groups) = [1, 4)"),
        (dict(routing="sigmoid_topk", groups=8, select_groups=2), "needs at least 2 of the E = 8"),
        (dict(routing="sigmoid_topk", top_k=3, groups=4, select_groups=1), "top_k = 3 exceeds the 2 experts"),
        (dict(score_bias=True), "only defined for sigmoid_topk"),
        (dict(scale=0.0), "LayerSpec.scale = 0.0"),
        (dict(logits="f16"), "LayerSpec.logits = 'f16'"),
        (dict(activation="gptoss", limit=7.0), "LayerSpec.alpha = 0.0: gptoss"),
        (dict(alpha=1.0), "silu takes neither"),
        (dict(activation="gelu"), "LayerSpec.activation = 'gelu'")]:
    expect(lambda: moe_mlir.LayerSpec(**dict(base, **change)), ValueError, needle)
mixtral = CONFIGS["mixtral"]
expect(lambda: moe_mlir.spec_from_config({k: v for k, v in mixtral.items()
                                           if k != "num_local_experts"}),
       ValueError, "config of mixtral: no field num_local_experts")
expect(lambda: moe_mlir.spec_from_config(dict(mixtral, model_type="dbrx")),
       ValueError, "model_type 'dbrx' is not supported (supported: deepseek_v3, "
       "gpt_oss, mixtral, olmoe, qwen2_moe, qwen3_moe)")
expect(lambda: moe_mlir.spec_from_config(dict(mixtral, hidden_act="gelu")),
       ValueError, "mixtral: the experts' activation is 'gelu'")
expect(lambda: moe_mlir.spec_from_config({}), ValueError, "no field model_type")
expect(lambda: moe_mlir.spec_from_config(dict(mixtral, num_experts_per_tok=3,
                                               num_local_experts=2)),
       ValueError, "LayerSpec.top_k = 3")

# Compile the five layers through a wrapper of the build's compiler that
# logs its runs, then check the bundles and the cache.
with tempfile.TemporaryDirectory() as scratch:
    log = os.path.join(scratch, "compiler.log")
    wrapper = os.path.join(scratch, "bin")
    os.mkdir(wrapper)
    for tool in ("moe-opt", "moe-translate"):
        path = os.path.join(wrapper, tool)
        with open(path, "w") as f:
            f.write(f'#!/bin/sh\necho {tool} >> "{log}"\n'
                    f'exec "{os.path.join(COMPILER, tool)}" "$@"\n')
        os.chmod(path, 0o755)
    cache = os.path.join(scratch, "cache")

    def runs():
        with open(log) if os.path.exists(log) else contextlib.nullcontext(
                None) as f:
            return 0 if f is None else len(f.readlines())

    def compile_all():
        with ThreadPoolExecutor(max_workers=5) as pool:
            return list(pool.map(lambda spec: moe_mlir.compile_layer(
                spec, cache_dir=cache, compiler=wrapper), specs.values()))

    paths = compile_all()
    check(runs() == 15, f"5 layers compiled with 3 runs each, got {runs()}")
    for (name, spec), path in zip(specs.items(), paths):
        check(path.startswith(os.path.join(cache, spec.key())) and
              path.endswith(".moebundle"), f"{name}: bundle path {path}")
        with open(os.path.join(cache, spec.key(), "layer.mlir")) as f:
            text = f.read()
        check(ROUTES[name] in text, f"{name}: route not in\n{text}")
        check(MLPS.get(name, MLPS["mixtral"]) in text,
              f"{name}: mlp not in\n{text}")
        bundle = Bundle(path)
        layer = bundle.entry(moe_mlir.ENTRY)
        route, gate_up, down = (bundle.entry(layer.route),
                                bundle.entry(layer.gate_up),
                                bundle.entry(layer.down))
        check(layer.abi == "layer.v1", f"{name}: abi {layer.abi}")
        check((route.experts, route.top_k, route.logits_bits, route.bias) ==
              (spec.experts, spec.top_k, 32 if spec.logits == "f32" else 16,
               spec.score_bias), f"{name}: route {route}")
        check((gate_up.n, gate_up.k, gate_up.activation) ==
              (2 * spec.intermediate, spec.hidden, spec.activation),
              f"{name}: gate_up {gate_up}")
        check((gate_up.bias_bits, down.bias_bits) ==
              ((16, 32) if spec.expert_bias else (0, 0)), f"{name}: biases")
        check((down.n, down.k) == (spec.hidden, spec.intermediate),
              f"{name}: down {down}")
        bundle.close()

    # Cache hits: the same paths, the compiler not run.
    check(compile_all() == paths and runs() == 15, "second compile: cache hit")
    config_path = os.path.join(scratch, "config.json")
    with open(config_path, "w") as f:
        json.dump(CONFIGS["olmoe"], f)
    # The command line, as a module and (installed) as the console script.
    commands = [[sys.executable, "-m", "moe_mlir.layer"]]
    script = os.path.join(sysconfig.get_path("scripts"), "moe-mlir-compile")
    if not SOURCE_TREE:
        check(os.access(script, os.X_OK), f"installed, but no {script}")
        if os.access(script, os.X_OK):
            commands.append([script])
    for command in commands:
        cli = subprocess.run(command + [config_path, "--cache-dir", cache,
                                        "--compiler", wrapper],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        check(cli.returncode == 0 and cli.stdout.decode().strip() == paths[2]
              and runs() == 15, f"{command}: {cli.stdout.decode()}")
        cli = subprocess.run(command + [config_path, "--options"],
                             stdout=subprocess.PIPE)
        check(cli.stdout.decode() == OPTIONS["olmoe"] + "\n",
              f"{command} --options")
    # The training bundles beside the layer's (TrainableMoELayer's, with
    # and without recompute_rows), each compiled once; the layer's bundle is
    # still the one served without a compiler; flags that do not go
    # together are refused.
    layer_dir = os.path.join(cache, specs["olmoe"].key())
    for flags, suffix, compiles in (
            (["--train"], ".train.moebundle", 3),
            (["--train", "--recompute-rows"], ".train-recompute-rows.moebundle", 3),
            # Expert parallelism: the split is a fourth compiler run.
            (["--expert-parallel", "2"], ".ep2.moebundle", 4),
            (["--train", "--expert-parallel", "2"], ".train.ep2.moebundle", 4)):
        before = runs()
        for _ in range(2):
            cli = subprocess.run(commands[0] + [config_path, "--cache-dir", cache,
                                                "--compiler", wrapper] + flags,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            out = cli.stdout.decode().strip()
            check(cli.returncode == 0 and out.startswith(layer_dir) and
                  out.endswith(suffix) and runs() == before + compiles,
                  f"{flags}: {out} ({runs() - before} compiler runs)")
    with environment(PATH="/usr/bin:/bin", MOE_MLIR_BIN=None), no_build_tree():
        check(moe_mlir.compile_layer(specs["olmoe"], cache_dir=cache) == paths[2],
              "the layer's bundle beside newer training bundles")
    for flags, message in ((["--recompute-rows"], "an option of --train"),
                           (["--copy-layout"], "an option of --train"),
                           (["--train", "--copy-layout"], "an option of a GPT-OSS"),
                           (["--train", "--experts"], "not --experts'"),
                           (["--expert-parallel", "2", "--experts"], "not --experts'"),
                           (["--expert-parallel", "3"], "must divide the 64 experts"),
                           (["--train", "--recompute-rows", "--expert-parallel", "2"],
                            "no recompute_rows")):
        cli = subprocess.run(commands[0] + [config_path] + flags,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        check(cli.returncode == 2 and message in cli.stdout.decode(),
              f"{flags}: {cli.stdout.decode()}")
    expect(lambda: moe_mlir.compile_layer(specs["olmoe"], cache_dir=cache,
                                           recompute_rows=True),
           ValueError, "recompute_rows is an option of the train bundle")
    # GPT-OSS's train bundle over the weights as transformers keeps them:
    # its own cache name, and the train entry takes gate-up [E, H, 2I] and
    # down [E, I, H]; only GPT-OSS's train bundle has that option.
    native = moe_mlir.compile_layer(specs["gpt_oss"], cache_dir=cache, train=True)
    check(native == moe_mlir.compile_layer(specs["gpt_oss"], cache_dir=cache, train=True,
                                           native_layout=True),
          "GPT-OSS's train bundle is the native-layout one by default")
    copied = moe_mlir.compile_layer(specs["gpt_oss"], cache_dir=cache, train=True,
                                    native_layout=False)
    copied_dims = {a.name: a.dims for a in Bundle(copied).signature("moe_layer_train").args}
    check(copied.endswith(".train.moebundle") and
          copied_dims["gate_up_weights"] == ("128", "5760", "2880"),
          f"copy layout: {copied} {copied_dims}")
    dims = {a.name: a.dims for a in Bundle(native).signature("moe_layer_train").args}
    check(native.endswith(".train-native.moebundle") and
          dims["gate_up_weights"] == ("128", "2880", "5760") and
          dims["down_weights"] == ("128", "2880", "2880"), f"native layout: {native} {dims}")
    expect(lambda: moe_mlir.compile_layer(specs["olmoe"], cache_dir=cache, train=True,
                                           native_layout=True),
           ValueError, "native_layout is an option of a GPT-OSS train bundle")
    # Expert parallelism: the rank's stage programs, one entry each, whose
    # keys say how they connect (contract 3.14), as the split source's
    # attributes do.
    from moe_mlir import parallel
    ep = moe_mlir.compile_layer(specs["mixtral"], cache_dir=cache, expert_parallel=2)
    plan = parallel.stages(Bundle(ep), "moe_layer")

    def source_attrs(path, entry):
        """{key: names} of moe.<key> = [...] of @entry in the split source."""
        with open(path) as f:
            text = f.read()
        line = re.search(r"func\.func @%s\(.*" % entry, text).group(0)
        return {k: re.findall(r'"([^"]*)"', v) for k, v in re.findall(
            r"moe\.(exchange_args|exchange_results|function_args|function_results)"
            r" = \[([^\]]*)\]", line)}

    for stage in plan:
        want = source_attrs(os.path.join(os.path.dirname(ep), "layer.ep2.mlir"), stage.entry)
        got = {k: getattr(stage, k) for k in want}
        check(got == want, f"{stage.entry}: the bundle's stage keys are the source's "
              f"attributes: {got} != {want}")
    check(ep.endswith(".ep2.moebundle") and [s.exchange for s in plan] ==
          ["moe.dispatch", "moe.undispatch", None] and plan[0].args == ["tokens", "logits"]
          and plan[1].args[:2] == ["gate_up_weights", "down_weights"] and
          plan[-1].results == ["out"] and plan[-1].function_results == ["out"] and
          plan[0].function_args[:2] == ["tokens", "logits"],
          f"expert-parallel stages: {ep} {plan}")
    ep_dims = {a.name: a.dims for a in Bundle(ep).signature("moe_layer_stage1").args}
    check(ep_dims["gate_up_weights"][0] == "4" and "out" in {
        a.name for a in Bundle(ep).signature("moe_layer_stage2").args},
          f"the rank's 8 / 2 experts, the last stage's out: {ep_dims}")
    check(ep != paths[0], "the layer's bundle is not the expert-parallel one")
    for bad in (3, -1):
        expect(lambda: moe_mlir.compile_layer(specs["mixtral"], cache_dir=cache,
                                               expert_parallel=bad),
               ValueError, "must divide the 8 experts")
    # Trained: the train forward's and the backward's stages beside the
    # layer's, the backward taking what the train forward saved.
    ep_train = moe_mlir.compile_layer(specs["gpt_oss"], cache_dir=cache, train=True,
                                      expert_parallel=2)
    ep_path = ep
    train_plan, backward_plan = parallel._train_plans(Bundle(ep_train))
    entries = {e.name for e in Bundle(ep_train).entries}
    check(ep_train.endswith(".train.ep2.moebundle") and
          [s.exchange for s in backward_plan] == ["moe.dispatch", "moe.undispatch", None]
          and {s.entry for s in train_plan + backward_plan} <= entries and
          "moe_layer_stage0" in entries and
          set(backward_plan[-1].function_results) == {
              "grad_tokens", "grad_logits", "grad_gate_up_weights", "grad_gate_up_bias",
              "grad_down_weights", "grad_down_bias"},
          f"expert-parallel train stages: {ep_train} {sorted(entries)} {backward_plan}")
    # A shared expert stays replicated: the last stage runs it on the rank's
    # own tokens.
    ep_shared = moe_mlir.compile_layer(specs["deepseek_v3"], cache_dir=cache,
                                       expert_parallel=2)
    shared_plan = parallel.stages(Bundle(ep_shared), "moe_layer")
    check({"shared_gate_up_weights", "shared_down_weights", "tokens"} <=
          set(shared_plan[-1].args) and "score_bias" in shared_plan[0].args,
          f"the shared expert in the last stage: {shared_plan}")
    for option in (dict(recompute_rows=True), dict(native_layout=True)):
        expect(lambda: moe_mlir.compile_layer(specs["gpt_oss"], cache_dir=cache, train=True,
                                               expert_parallel=2, **option),
               ValueError, "no recompute_rows, no native_layout")
    expect(lambda: parallel._train_plans(Bundle(ep)), ValueError,
           "the bundle has no stages of @moe_layer_train")
    check(Bundle(paths[0]).stage(Bundle(paths[0]).entries[0].name) is None,
          "an entry of a layer is no stage")
    expect(lambda: parallel.Exchange(0, 8), MoERuntimeError,
           "nccl_comm is NULL", status="INVALID_ARGUMENT")

    # Not on PATH: the checkout's build tree where it has the compiler (the
    # checkout of this file, or the one pip installed the package from).
    with environment(PATH="/usr/bin:/bin", MOE_MLIR_BIN=None):
        trees = [os.path.realpath(d) for d in glob.glob(os.path.join(REPO, "build*", "bin"))
                 if all(os.access(os.path.join(d, t), os.X_OK)
                        for t in ("moe-opt", "moe-translate"))]
        found = moe_mlir.find_compiler()
        if trees:
            check(found is not None and os.path.realpath(os.path.dirname(found[0])) in trees,
                  f"the build tree's compiler, one of {trees}: {found}")
        else:
            check(found is None, f"no build tree has the compiler: {found}")

    # No compiler: the cache serves the bundle; an empty cache says what to do.
    with environment(PATH="/usr/bin:/bin", MOE_MLIR_BIN=None), no_build_tree():
        check(moe_mlir.find_compiler() is None, "no compiler on PATH")
        check(moe_mlir.compile_layer(specs["mixtral"], cache_dir=cache) == paths[0],
              "cache without a compiler")
        with environment(MOE_CACHE_DIR=cache):
            check(moe_mlir.compile_layer(specs["gpt_oss"]) == paths[4],
                  "$MOE_CACHE_DIR")
        # Each kind of bundle serves only its own kind: GPT-OSS's one
        # expert-parallel bundle is a train bundle.
        check(moe_mlir.compile_layer(specs["mixtral"], cache_dir=cache,
                                     expert_parallel=2) == ep_path and
              moe_mlir.compile_layer(specs["gpt_oss"], cache_dir=cache, train=True,
                                     expert_parallel=2) == ep_train,
              "expert-parallel bundles from the cache without a compiler")
        expect(lambda: moe_mlir.compile_layer(specs["gpt_oss"], cache_dir=cache,
                                               expert_parallel=2),
               MoERuntimeError, "no compiled bundle for this layer", status="NOT_FOUND")
        expect(lambda: moe_mlir.compile_layer(specs["mixtral"],
                                               cache_dir=os.path.join(scratch, "empty")),
               MoERuntimeError, "no compiled bundle for this layer (LayerSpec(hidden=4096",
               "and no compiler to build it: pass compiler=<directory with moe-opt and "
               "moe-translate>, set $MOE_MLIR_BIN", status="NOT_FOUND")
        expect(lambda: moe_mlir.find_compiler(scratch), MoERuntimeError,
               f"compiler= '{scratch}': no executable moe-opt or moe-translate there",
               status="NOT_FOUND")
        with environment(MOE_MLIR_BIN=cache):
            expect(lambda: moe_mlir.compile_layer(specs["mixtral"], cache_dir=cache),
                   MoERuntimeError, f"$MOE_MLIR_BIN '{cache}': no executable moe-opt",
                   status="NOT_FOUND")
        with environment(MOE_MLIR_BIN=wrapper):
            check(moe_mlir.find_compiler() == (os.path.join(wrapper, "moe-opt"),
                                                os.path.join(wrapper, "moe-translate")),
                  "$MOE_MLIR_BIN")
        with environment(PATH=wrapper + ":/usr/bin:/bin"):
            check(moe_mlir.find_compiler() is not None, "compiler on PATH")

    # A compiler that fails: its message, and the layer it failed on.
    broken = os.path.join(scratch, "broken")
    os.mkdir(broken)
    for tool in ("moe-opt", "moe-translate"):
        path = os.path.join(broken, tool)
        with open(path, "w") as f:
            f.write("#!/bin/sh\necho 'error: ptxas not found' >&2\nexit 3\n")
        os.chmod(path, 0o755)
    expect(lambda: moe_mlir.compile_layer(specs["mixtral"], cache_dir=cache,
                                           compiler=broken),
           MoERuntimeError, "moe-opt failed (exit 3) on the layer "
           f"{specs['mixtral']}: error: ptxas not found",
           status="COMPILE_ERROR")
    check(not [p for p in os.listdir(os.path.join(cache, specs["mixtral"].key()))
               if p.startswith("tmp")], "no scratch left after a failed compile")

if moe_mlir.layer.torch is None:
    expect(lambda: moe_mlir.MoELayer, ImportError,
           "MoELayer needs PyTorch (import torch failed)")
    print("torch not importable: the block packing checks are skipped")
    sys.exit(1 if failures else 0)

# ---------------------------------------------------------------------------
# With torch: fake Hugging Face blocks of both layouts, on the CPU.
import torch  # noqa: E402

torch.manual_seed(0)
bf16 = torch.bfloat16
E, H, I, K = 4, 64, 32, 2


def module(class_name, **children):
    """An nn.Module of class `class_name` with these attributes."""
    instance = type(class_name, (torch.nn.Module,), {})()
    for name, value in children.items():
        setattr(instance, name, value)
    return instance


def parameter(*shape, dtype=bf16):
    return torch.nn.Parameter(torch.randn(*shape).to(dtype))


def linear(n_in, n_out):
    return torch.nn.Linear(n_in, n_out, bias=False, dtype=bf16)


def fused_block(class_name, **router_attributes):
    """A transformers 5.x block: a router and fused [E, 2I, H] experts."""
    router = module("TopKRouter", weight=parameter(E, H), top_k=K,
                    **router_attributes)
    experts = module("Experts", gate_up_proj=parameter(E, 2 * I, H),
                     down_proj=parameter(E, H, I), act_fn=torch.nn.SiLU())
    return module(class_name, gate=router, experts=experts)


def list_block(class_name, names, **block_attributes):
    """A transformers 4.x block: an nn.Linear gate and E expert MLPs."""
    experts = torch.nn.ModuleList(
        module("MLP", **{names[0]: linear(H, I), names[1]: linear(H, I),
                         names[2]: linear(I, H)}, act_fn=torch.nn.SiLU())
        for _ in range(E))
    return module(class_name, gate=linear(H, E), experts=experts, top_k=K,
                  **block_attributes)


def shared_mlp(class_name, width):
    """A shared expert MLP (DeepseekV3MLP, Qwen2MoeMLP) of width Is: bf16
    nn.Linear projections without biases, silu."""
    return module(class_name, gate_proj=linear(H, width), up_proj=linear(H, width),
                  down_proj=linear(width, H), act_fn=torch.nn.SiLU())


def arranged_shared(mlp, I):
    """The c = ceil(Is / I) experts [c, 2I, H], [c, H, I] that the shared
    expert `mlp` packs as after the routed ones, unit by unit: intermediate
    unit u is row u % I of slice u // I (gate rows, then up rows; down
    columns), zero past Is."""
    gate, up, down = (getattr(mlp, n).weight for n in ("gate_proj", "up_proj", "down_proj"))
    width, hidden = gate.shape
    c = -(-width // I)
    gate_up, down_slices = torch.zeros(c, 2 * I, hidden, dtype=bf16), torch.zeros(c, hidden, I, dtype=bf16)
    with torch.no_grad():
        for u in range(width):
            j, r = divmod(u, I)
            gate_up[j, r], gate_up[j, I + r], down_slices[j, :, r] = gate[u], up[u], down[:, u]
    return gate_up, down_slices


def check_shared(packed, mlp, routed, what):
    """packed holds the routed experts (gate_up, down [E, ...]) and then the
    shared expert `mlp` arranged as its c slices, exactly."""
    spec = packed.spec
    gate_up, down = arranged_shared(mlp, spec.intermediate)
    c, n = len(gate_up), spec.experts
    check(spec.shared_slices == c and spec.shared_intermediate == mlp.gate_proj.weight.shape[0]
          and tuple(packed.gate_up_weights.shape) == (n + c, 2 * spec.intermediate, spec.hidden)
          and tuple(packed.down_weights.shape) == (n + c, spec.hidden, spec.intermediate),
          f"{what}: E + c = {n} + {c} experts, got {tuple(packed.gate_up_weights.shape)}, "
          f"{tuple(packed.down_weights.shape)}")
    check(torch.equal(packed.gate_up_weights[:n], routed[0])
          and torch.equal(packed.down_weights[:n], routed[1]), f"{what}: routed experts")
    check(torch.equal(packed.gate_up_weights[n:], gate_up)
          and torch.equal(packed.down_weights[n:], down), f"{what}: shared expert slices")
    check(packed.gate_up_weights.is_contiguous() and packed.down_weights.is_contiguous()
          and packed.gate_up_bias is None and packed.down_bias is None, f"{what}: layout")


def gpt_oss_block():
    experts = module("GptOssExperts", gate_up_proj=parameter(E, H, 2 * I),
                     gate_up_proj_bias=parameter(E, 2 * I),
                     down_proj=parameter(E, I, H),
                     down_proj_bias=parameter(E, H), alpha=1.702, limit=7.0)
    router = module("GptOssTopKRouter", weight=parameter(E, H),
                    bias=parameter(E), top_k=K)
    return module("GptOssMLP", router=router, experts=experts)


# 5.x fused layouts are shared, not copied.
block = fused_block("Qwen3MoeSparseMoeBlock", norm_topk_prob=True)
packed = moe_mlir.pack_hf_block(block)
check(packed.spec == moe_mlir.LayerSpec(H, I, E, K, "softmax_topk", renormalize=True),
      f"Qwen3 5.x spec {packed.spec}")
check(packed.gate_up_weights.data_ptr() == block.experts.gate_up_proj.data_ptr()
      and packed.down_weights.data_ptr() == block.experts.down_proj.data_ptr()
      and not packed.gate_up_weights.requires_grad, "5.x weights shared, detached")
check(packed.returns == "tensor" and packed.router_weight.dtype == bf16,
      "5.x returns a tensor; bf16 router")
check(moe_mlir.pack_hf_block(fused_block("MixtralSparseMoeBlock")).spec.renormalize,
      "Mixtral always renormalises")

# 4.x lists: stacked, gate rows then up rows.
for class_name, names in (("MixtralSparseMoeBlock", ("w1", "w3", "w2")),
                          ("OlmoeSparseMoeBlock", ("gate_proj", "up_proj", "down_proj"))):
    block = list_block(class_name, names, norm_topk_prob=False)
    packed = moe_mlir.pack_hf_block(block)
    experts = block.experts
    check(all(torch.equal(packed.gate_up_weights[e, :I], getattr(experts[e], names[0]).weight)
              and torch.equal(packed.gate_up_weights[e, I:], getattr(experts[e], names[1]).weight)
              and torch.equal(packed.down_weights[e], getattr(experts[e], names[2]).weight)
              for e in range(E)), f"{class_name} 4.x stacking")
    check(packed.gate_up_weights.is_contiguous() and packed.returns == "router_logits",
          f"{class_name} 4.x returns (out, router_logits)")

# DeepSeek-V3 (5.x and 4.x names): float32 router and bias; the shared
# expert (Is = 48, not a multiple of I) as c = 2 more experts, ungated.
Is = 48
shared = shared_mlp("DeepseekV3MLP", Is)
for names in (dict(num_group=2, num_experts=E), dict(n_group=2)):
    block = fused_block("DeepseekV3MoE", topk_group=1, norm_topk_prob=True,
                        routed_scaling_factor=2.5,
                        e_score_correction_bias=torch.randn(E), **names)
    block.shared_experts = shared
    packed = moe_mlir.pack_hf_block(block)
    check(packed.spec == moe_mlir.LayerSpec(
        H, I, E, K, "sigmoid_topk", renormalize=True, groups=2, select_groups=1,
        scale=2.5, score_bias=True, logits="f32", shared_intermediate=Is),
          f"DeepSeek-V3 spec {packed.spec}")
    check(not packed.spec.shared_gate and packed.spec.shared_slices == 2
          and " shared-intermediate=48" in packed.spec.options()
          and "shared-gate" not in packed.spec.options(), f"DeepSeek-V3 options {packed.spec.options()}")
    check(packed.router_weight.dtype == torch.float32 and
          torch.equal(packed.router_weight, block.gate.weight.float()) and
          torch.equal(packed.score_bias, block.gate.e_score_correction_bias) and
          packed.shared_gate is None and packed.returns == "tensor",
          "DeepSeek-V3 router, bias, no shared gate")
    check_shared(packed, shared, (block.experts.gate_up_proj, block.experts.down_proj),
                 "DeepSeek-V3")
    check(packed.gate_up_weights.data_ptr() != block.experts.gate_up_proj.data_ptr(),
          "DeepSeek-V3: copied, as the shared slices follow the routed experts")
# Is = I: one slice, no zeros.
block.shared_experts = shared_mlp("DeepseekV3MLP", I)
packed = moe_mlir.pack_hf_block(block)
check(packed.spec.shared_intermediate == I and packed.spec.shared_slices == 1,
      f"DeepSeek-V3 Is = I: {packed.spec}")
check_shared(packed, block.shared_experts, (block.experts.gate_up_proj, block.experts.down_proj),
             "DeepSeek-V3 Is = I")

# Qwen2-MoE (5.x fused, 4.x list): Qwen3's routing, and a shared expert
# (Is = 80: c = 3, the last half zero) scaled by sigmoid(shared_expert_gate(x)).
Is = 80
for fused in (True, False):
    if fused:
        block = fused_block("Qwen2MoeSparseMoeBlock", norm_topk_prob=False)
        routed = (block.experts.gate_up_proj, block.experts.down_proj)
    else:
        block = list_block("Qwen2MoeSparseMoeBlock", ("gate_proj", "up_proj", "down_proj"),
                           norm_topk_prob=True)
        routed = (torch.stack([torch.cat((m.gate_proj.weight, m.up_proj.weight)) for m in block.experts]),
                  torch.stack([m.down_proj.weight for m in block.experts]))
    block.shared_expert = shared_mlp("Qwen2MoeMLP", Is)
    block.shared_expert_gate = linear(H, 1)
    what = f"Qwen2-MoE {'5' if fused else '4'}.x"
    packed = moe_mlir.pack_hf_block(block)
    check(packed.spec == moe_mlir.LayerSpec(H, I, E, K, "softmax_topk", renormalize=not fused,
                                             shared_intermediate=Is, shared_gate=True),
          f"{what} spec {packed.spec}")
    check(" shared-intermediate=80 shared-gate=true" in packed.spec.options(),
          f"{what} options {packed.spec.options()}")
    check(packed.shared_gate is not None and packed.shared_gate.dtype == bf16
          and tuple(packed.shared_gate.shape) == (1, H)
          and torch.equal(packed.shared_gate, block.shared_expert_gate.weight)
          and not packed.shared_gate.requires_grad, f"{what}: shared gate")
    check(packed.returns == ("tensor" if fused else "router_logits"), f"{what} returns")
    check_shared(packed, block.shared_expert, routed, what)
    check(not packed.gate_up_weights[E + 2, Is % I:I].any()
          and not packed.gate_up_weights[E + 2, I + Is % I:].any()
          and not packed.down_weights[E + 2, :, Is % I:].any(), f"{what}: zero past Is")

# GPT-OSS: interleaved [E, H, 2I] -> gate rows then up rows; biases alike.
block = gpt_oss_block()
packed = moe_mlir.pack_hf_block(block)
check(packed.spec == moe_mlir.LayerSpec(H, I, E, K, "topk_softmax", activation="gptoss",
                                         alpha=1.702, limit=7.0, expert_bias=True),
      f"GPT-OSS spec {packed.spec}")
x = torch.randn(5, H)
for e in range(E):
    experts = block.experts
    # Column 2i of gate_up_proj[e] is gate unit i, column 2i + 1 up unit i.
    check(torch.equal(packed.gate_up_weights[e, :I], experts.gate_up_proj[e, :, 0::2].t())
          and torch.equal(packed.gate_up_weights[e, I:], experts.gate_up_proj[e, :, 1::2].t())
          and torch.equal(packed.down_weights[e], experts.down_proj[e].t()),
          f"GPT-OSS expert {e} weights")
    gate_up = x @ experts.gate_up_proj[e].float() + experts.gate_up_proj_bias[e].float()
    ours = x @ packed.gate_up_weights[e].float().t() + packed.gate_up_bias[e].float()
    check(torch.allclose(ours[:, :I], gate_up[..., 0::2], rtol=1e-5, atol=1e-4) and
          torch.allclose(ours[:, I:], gate_up[..., 1::2], rtol=1e-5, atol=1e-4),
          f"GPT-OSS expert {e}: gate and up as GptOssExperts splits them")
check(packed.down_bias.dtype == torch.float32 and
      torch.equal(packed.down_bias, block.experts.down_proj_bias.float()) and
      torch.equal(packed.router_bias, block.router.bias) and
      packed.returns == "router_scores", "GPT-OSS biases, router scores")

# Block errors, by message.
expect(lambda: moe_mlir.pack_hf_block(torch.nn.Linear(4, 4)), TypeError,
       "Linear is not a supported MoE block: expected one of MixtralSparseMoeBlock, "
       "Qwen3MoeSparseMoeBlock, Qwen2MoeSparseMoeBlock, OlmoeSparseMoeBlock, DeepseekV3MoE, "
       "GptOssMLP")
block = fused_block("MixtralSparseMoeBlock")
block.float()
expect(lambda: moe_mlir.pack_hf_block(block), TypeError,
       "MixtralSparseMoeBlock.gate.weight is torch.float32: MoELayer runs bfloat16 "
       "blocks; convert the block first (block.to(torch.bfloat16))")
block.gate.to(bf16)
expect(lambda: moe_mlir.pack_hf_block(block), TypeError,
       "MixtralSparseMoeBlock.experts.down_proj is torch.float32")
block = fused_block("MixtralSparseMoeBlock")
block.experts.gate_up_proj = parameter(E, 2 * I + 2, H)
expect(lambda: moe_mlir.pack_hf_block(block), ValueError,
       f"MixtralSparseMoeBlock.experts.gate_up_proj is ({E}, {2 * I + 2}, {H}), "
       f"expected ({E}, {2 * I}, {H}) = (E, 2I, H), with E and H from the router")
block = fused_block("MixtralSparseMoeBlock")
block.experts.act_fn = torch.nn.GELU()
expect(lambda: moe_mlir.pack_hf_block(block), ValueError,
       "mixtral: the experts' activation is 'GELU'")
block = list_block("OlmoeSparseMoeBlock", ("gate_proj", "up_proj", "down_proj"),
                   norm_topk_prob=True)
del block.experts[3]
expect(lambda: moe_mlir.pack_hf_block(block), ValueError,
       f"OlmoeSparseMoeBlock.experts holds 3 experts, the router weight ({E}, {H}) has E = {E}")
block = list_block("OlmoeSparseMoeBlock", ("gate_proj", "up_proj", "down_proj"))
expect(lambda: moe_mlir.pack_hf_block(block), ValueError,
       "OlmoeSparseMoeBlock (OlmoeSparseMoeBlock) has no norm_topk_prob")
block = gpt_oss_block()
del block.experts.gate_up_proj
block.experts.gate_up_proj_blocks = parameter(E, H, 2)
expect(lambda: moe_mlir.pack_hf_block(block), ValueError,
       "GptOssMLP.experts (GptOssExperts) has no gate_up_proj")


def qwen2_block():
    block = fused_block("Qwen2MoeSparseMoeBlock", norm_topk_prob=False)
    block.shared_expert = shared_mlp("Qwen2MoeMLP", 48)
    block.shared_expert_gate = linear(H, 1)
    return block


block = qwen2_block()
block.shared_expert.act_fn = torch.nn.GELU()
expect(lambda: moe_mlir.pack_hf_block(block), ValueError,
       "Qwen2MoeSparseMoeBlock.shared_expert: the shared expert's activation is 'GELU'")
block = qwen2_block()
block.shared_expert.up_proj = linear(H, 40)
expect(lambda: moe_mlir.pack_hf_block(block), ValueError,
       f"Qwen2MoeSparseMoeBlock.shared_expert.up_proj.weight is (40, {H}), expected (48, {H}) = (Is, H)")
block = qwen2_block()
block.shared_expert.gate_proj.float()
expect(lambda: moe_mlir.pack_hf_block(block), TypeError,
       "Qwen2MoeSparseMoeBlock.shared_expert.gate_proj.weight is torch.float32")
block = qwen2_block()
block.shared_expert.down_proj = torch.nn.Linear(48, H, dtype=bf16)
expect(lambda: moe_mlir.pack_hf_block(block), ValueError,
       "Qwen2MoeSparseMoeBlock.shared_expert.down_proj has a bias; the compiled shared expert has none")
block = qwen2_block()
block.shared_expert_gate = torch.nn.Linear(H, 1, dtype=bf16)
expect(lambda: moe_mlir.pack_hf_block(block), ValueError,
       "Qwen2MoeSparseMoeBlock.shared_expert_gate has a bias; the compiled gate is sigmoid(x . g) "
       "without one")
block = qwen2_block()
del block.shared_expert_gate
expect(lambda: moe_mlir.pack_hf_block(block), ValueError,
       "Qwen2MoeSparseMoeBlock (Qwen2MoeSparseMoeBlock) has no shared_expert_gate")
block = fused_block("DeepseekV3MoE", n_group=2, topk_group=1, norm_topk_prob=True,
                    routed_scaling_factor=2.5, e_score_correction_bias=torch.randn(E))
expect(lambda: moe_mlir.pack_hf_block(block), ValueError,
       "DeepseekV3MoE (DeepseekV3MoE) has no shared_experts")
if not torch.cuda.is_available():
    expect(lambda: moe_mlir.MoELayer.from_hf(gpt_oss_block()), MoERuntimeError,
           "MoELayer needs a CUDA GPU", status="NO_GPU")

try:
    import transformers
except ImportError:
    print("transformers not importable: the real-block checks are skipped")
    sys.exit(1 if failures else 0)

# ---------------------------------------------------------------------------
# Real transformers blocks on the CPU: the packed layer, computed by an
# independent reference in float32, against the block in float32.
from transformers.models.deepseek_v3 import modeling_deepseek_v3 as deepseek  # noqa: E402
from transformers.models.gpt_oss import modeling_gpt_oss as gpt_oss  # noqa: E402
from transformers.models.mixtral import modeling_mixtral as mixtral  # noqa: E402
from transformers.models.olmoe import modeling_olmoe as olmoe  # noqa: E402
from transformers.models.qwen2_moe import modeling_qwen2_moe as qwen2  # noqa: E402
from transformers.models.qwen3_moe import modeling_qwen3_moe as qwen3  # noqa: E402


def reference(spec, packed, x):
    """The packed layer on x [T, H] (float32), from the spec's semantics."""
    f = {name: None if t is None else t.float() for name, t in (
        ("w13", packed.gate_up_weights), ("w2", packed.down_weights),
        ("b13", packed.gate_up_bias), ("b2", packed.down_bias),
        ("router", packed.router_weight), ("router_bias", packed.router_bias),
        ("score_bias", packed.score_bias))}
    logits = torch.nn.functional.linear(x, f["router"], f["router_bias"])
    if spec.routing == "topk_softmax":
        top, ids = logits.topk(spec.top_k, dim=-1)
        weights = top.softmax(dim=-1)
    elif spec.routing == "softmax_topk":
        weights, ids = logits.softmax(dim=-1).topk(spec.top_k, dim=-1)
    else:
        scores = logits.sigmoid()
        choice = scores + f["score_bias"]
        if spec.groups:
            grouped = choice.view(len(x), spec.groups, -1)
            best = grouped.topk(2, dim=-1).values.sum(-1).topk(spec.select_groups, dim=-1).indices
            allowed = torch.zeros_like(grouped[..., 0], dtype=torch.bool)
            allowed.scatter_(1, best, True)
            choice = choice.masked_fill(~allowed.repeat_interleave(
                spec.experts // spec.groups, dim=1), float("-inf"))
        ids = choice.topk(spec.top_k, dim=-1).indices
        weights = scores.gather(1, ids)
    if spec.renormalize:
        weights = weights / (weights.sum(-1, keepdim=True)
                             + (1e-20 if spec.routing == "sigmoid_topk" else 0))
    weights = weights * spec.scale
    out = torch.zeros_like(x)
    for t in range(len(x)):
        for j in range(spec.top_k):
            e = ids[t, j]
            gate_up = f["w13"][e] @ x[t] + (0 if f["b13"] is None else f["b13"][e])
            gate, up = gate_up[:spec.intermediate], gate_up[spec.intermediate:]
            if spec.activation == "gptoss":
                gate, up = gate.clamp(max=spec.limit), up.clamp(-spec.limit, spec.limit)
                hidden = (up + 1) * gate * torch.sigmoid(spec.alpha * gate)
            else:
                hidden = torch.nn.functional.silu(gate) * up
            down = f["w2"][e] @ hidden + (0 if f["b2"] is None else f["b2"][e])
            out[t] += weights[t, j] * down
    return out + shared_reference(spec, packed, x)


def shared_reference(spec, packed, x):
    """The packed shared expert on x [T, H] (float32): its c slices, experts
    E .. E+c-1 every token takes with weight 1, times sigmoid(x . g) with a
    shared gate g (Qwen2-MoE); zero without a shared expert."""
    out = torch.zeros_like(x)
    for j in range(spec.shared_slices):
        gate_up = x @ packed.gate_up_weights[spec.experts + j].float().t()
        gate, up = gate_up[:, :spec.intermediate], gate_up[:, spec.intermediate:]
        out += (torch.nn.functional.silu(gate) * up) @ packed.down_weights[spec.experts + j].float().t()
    if spec.shared_gate:
        out *= torch.sigmoid(x @ packed.shared_gate.float().t())
    return out


def block_shared(block, x):
    """What the block's own shared expert adds on x [T, H] (a float32
    block): DeepSeek-V3's ungated, Qwen2-MoE's scaled by
    sigmoid(shared_expert_gate(x)); None without one."""
    if hasattr(block, "shared_experts"):
        return block.shared_experts(x)
    if hasattr(block, "shared_expert"):
        return torch.sigmoid(block.shared_expert_gate(x)) * block.shared_expert(x)
    return None


small = dict(hidden_size=64, num_experts_per_tok=4, hidden_act="silu")
REAL = [  # (config, block class)
    (mixtral.MixtralConfig(**small, intermediate_size=32, num_local_experts=8),
     mixtral.MixtralSparseMoeBlock),
    (qwen3.Qwen3MoeConfig(**small, moe_intermediate_size=32, num_experts=16,
                          norm_topk_prob=True), qwen3.Qwen3MoeSparseMoeBlock),
    (olmoe.OlmoeConfig(**small, intermediate_size=48, num_experts=16), olmoe.OlmoeSparseMoeBlock),
    (deepseek.DeepseekV3Config(**small, moe_intermediate_size=32, n_routed_experts=16,
                               n_group=4, topk_group=2, routed_scaling_factor=2.5,
                               n_shared_experts=2), deepseek.DeepseekV3MoE),
    (qwen2.Qwen2MoeConfig(**small, moe_intermediate_size=32, num_experts=16,
                          shared_expert_intermediate_size=48), qwen2.Qwen2MoeSparseMoeBlock),
    (gpt_oss.GptOssConfig(**small, intermediate_size=40, num_local_experts=16),
     gpt_oss.GptOssMLP),
]
for config, block_class in REAL:
    name = block_class.__name__
    config._experts_implementation = "eager"  # the blocks' own expert loop
    block = block_class(config).to(bf16)
    with torch.no_grad():
        for parameter_ in block.parameters():  # experts are torch.empty
            parameter_.copy_(torch.randn_like(parameter_, dtype=torch.float32) * 0.3)
        if name == "DeepseekV3MoE":
            block.gate.e_score_correction_bias.copy_(torch.randn(16) * 0.1)
    packed = moe_mlir.pack_hf_block(block)
    check(packed.spec == moe_mlir.spec_from_config(config),
          f"{name}: block spec {packed.spec} != config spec")
    mlp = getattr(block, "shared_experts", None) or getattr(block, "shared_expert", None)
    if mlp is not None and hasattr(block.experts, "gate_up_proj"):  # 5.x fused
        check_shared(packed, mlp, (block.experts.gate_up_proj, block.experts.down_proj), name)
    block32 = copy.deepcopy(block).float()
    x = torch.randn(2, 5, 64)
    with torch.no_grad():
        want = block32(x)
        if isinstance(want, tuple):
            want = want[0]
        got = reference(packed.spec, packed, x.view(-1, 64)).view(2, 5, 64)
        theirs = block_shared(block32, x.view(-1, 64))
        ours = shared_reference(packed.spec, packed, x.view(-1, 64))
    err = ((got - want).norm() / want.norm()).item()
    check(err < 1e-5, f"{name}: packed layer vs the block in float32: relative L2 {err:.2e}")
    if theirs is not None:  # the shared expert alone, against the block's own module
        shared_err = ((ours - theirs).norm() / theirs.norm()).item()
        check(packed.spec.shared_intermediate > 0 and shared_err < 1e-5,
              f"{name}: packed shared expert vs the block's: relative L2 {shared_err:.2e}")
    print(f"{name} ({transformers.__version__}): packed layer vs block {err:.1e}")

print("FAILED" if failures else "all passed")
sys.exit(1 if failures else 0)
