"""Exports Hugging Face-style sparse MoE blocks to linalg-on-tensors MLIR.

The fixtures under ../fixtures are the unmodified output of this script:

    python3 -m venv /tmp/export-venv
    /tmp/export-venv/bin/pip install torch-mlir==20261001 torch==2.15.0
    /tmp/export-venv/bin/python export_fixtures.py ../fixtures

(torch-mlir 20261001 is the only torch-mlir on PyPI; it does not pin torch,
2.15.0 was the newest torch there.) Each block is written in plain torch after
the Hugging Face modules (transformers' MixtralSparseMoeBlock,
Qwen3MoeSparseMoeBlock and the stacked-weight experts of transformers 5),
exported with torch.export (token count dynamic) and lowered by
torch_mlir.fx.export_and_import(..., output_type="linalg-on-tensors").
torch-mlir lowers torch.topk to `tm_tensor.sort`, its own dialect, whose
custom syntax upstream mlir-opt cannot parse, so the modules are printed in
the generic op form (`print_generic_op_form=True`); they parse with
`mlir-opt --allow-unregistered-dialect`. Weights are frozen into
dense_resource constants (seeded, small). For each fixture the script also
writes `<name>.io.txt`: a fixed input and torch's eager output for it, which
test/Transforms/raise-fixtures-run.mlir checks the raised module against.
The `*_bf16` fixtures are the same blocks converted with
module.to(torch.bfloat16) and run on a bf16 input (their .io.txt holds the
bf16 values, printed exactly as floats); they need ml_dtypes.

The experts loop of the Hugging Face modules (one torch.where per expert, a
data-dependent row count) is tried too; it does not lower (see README.md).
"""

import os
import sys
import traceback

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch_mlir
from torch_mlir import fx

HIDDEN, INTERMEDIATE = 16, 32


class MixtralBlockSparseTop2MLP(nn.Module):
    """One Mixtral expert: w2(silu(w1 x) * w3 x)."""

    def __init__(self):
        super().__init__()
        self.w1 = nn.Linear(HIDDEN, INTERMEDIATE, bias=False)
        self.w2 = nn.Linear(INTERMEDIATE, HIDDEN, bias=False)
        self.w3 = nn.Linear(HIDDEN, INTERMEDIATE, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Qwen3MoeMLP(nn.Module):
    """One Qwen3 expert: down(silu(gate x) * up x)."""

    def __init__(self):
        super().__init__()
        self.gate_proj = nn.Linear(HIDDEN, INTERMEDIATE, bias=False)
        self.up_proj = nn.Linear(HIDDEN, INTERMEDIATE, bias=False)
        self.down_proj = nn.Linear(INTERMEDIATE, HIDDEN, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


def route(gate, hidden_states, top_k, renormalize):
    """The routing of both Hugging Face blocks (softmax in f32, top-k)."""
    router_logits = gate(hidden_states)
    routing_weights = F.softmax(router_logits, dim=1, dtype=torch.float)
    routing_weights, selected_experts = torch.topk(routing_weights, top_k, dim=-1)
    if renormalize:
        routing_weights /= routing_weights.sum(dim=-1, keepdim=True)
    routing_weights = routing_weights.to(hidden_states.dtype)
    return router_logits, routing_weights, selected_experts


class MixtralLoop(nn.Module):
    """transformers' MixtralSparseMoeBlock.forward as written (expert loop)."""

    def __init__(self, num_experts=4, top_k=2):
        super().__init__()
        self.num_experts, self.top_k = num_experts, top_k
        self.gate = nn.Linear(HIDDEN, num_experts, bias=False)
        self.experts = nn.ModuleList(
            [MixtralBlockSparseTop2MLP() for _ in range(num_experts)])

    def forward(self, hidden_states):
        batch_size, sequence_length, hidden_dim = hidden_states.shape
        hidden_states = hidden_states.view(-1, hidden_dim)
        router_logits, routing_weights, selected_experts = route(
            self.gate, hidden_states, self.top_k, True)
        final_hidden_states = torch.zeros(
            (batch_size * sequence_length, hidden_dim), dtype=hidden_states.dtype)
        expert_mask = F.one_hot(
            selected_experts, num_classes=self.num_experts).permute(2, 1, 0)
        for expert_idx in range(self.num_experts):
            idx, top_x = torch.where(expert_mask[expert_idx])
            current_state = hidden_states[None, top_x].reshape(-1, hidden_dim)
            current_hidden_states = self.experts[expert_idx](
                current_state) * routing_weights[top_x, idx, None]
            final_hidden_states.index_add_(
                0, top_x, current_hidden_states.to(hidden_states.dtype))
        final_hidden_states = final_hidden_states.reshape(
            batch_size, sequence_length, hidden_dim)
        return final_hidden_states, router_logits


class MixtralDenseMasked(MixtralLoop):
    """Mixtral with every expert run on every token, weighted by the one-hot
    mask of its top-k choices (zero for the experts a token did not pick)."""

    def forward(self, hidden_states):
        batch_size, sequence_length, hidden_dim = hidden_states.shape
        hidden_states = hidden_states.view(-1, hidden_dim)
        router_logits, routing_weights, selected_experts = route(
            self.gate, hidden_states, self.top_k, True)
        # [T, k, E] one-hot, summed over k: each token's weight per expert.
        expert_mask = F.one_hot(selected_experts, num_classes=self.num_experts)
        dense_weights = (routing_weights.unsqueeze(-1) * expert_mask).sum(dim=1)
        final_hidden_states = torch.zeros(
            (batch_size * sequence_length, hidden_dim), dtype=hidden_states.dtype)
        for expert_idx in range(self.num_experts):
            final_hidden_states = final_hidden_states + self.experts[expert_idx](
                hidden_states) * dense_weights[:, expert_idx, None]
        final_hidden_states = final_hidden_states.reshape(
            batch_size, sequence_length, hidden_dim)
        return final_hidden_states, router_logits


class Qwen3DenseMasked(nn.Module):
    """Qwen3MoeSparseMoeBlock (norm_topk_prob=False, the config default) with
    the expert loop over its [E, k, T] expert_mask run densely."""

    def __init__(self, num_experts=8, top_k=2, norm_topk_prob=False):
        super().__init__()
        self.num_experts, self.top_k = num_experts, top_k
        self.norm_topk_prob = norm_topk_prob
        self.gate = nn.Linear(HIDDEN, num_experts, bias=False)
        self.experts = nn.ModuleList([Qwen3MoeMLP() for _ in range(num_experts)])

    def forward(self, hidden_states):
        batch_size, sequence_length, hidden_dim = hidden_states.shape
        hidden_states = hidden_states.view(-1, hidden_dim)
        router_logits, routing_weights, selected_experts = route(
            self.gate, hidden_states, self.top_k, self.norm_topk_prob)
        final_hidden_states = torch.zeros(
            (batch_size * sequence_length, hidden_dim), dtype=hidden_states.dtype)
        expert_mask = F.one_hot(
            selected_experts, num_classes=self.num_experts).permute(2, 1, 0)
        for expert_idx in range(self.num_experts):
            # expert_mask[e] is [k, T]: the token's weight for expert e.
            token_weight = (routing_weights * expert_mask[expert_idx].t()).sum(dim=-1)
            final_hidden_states = final_hidden_states + self.experts[expert_idx](
                hidden_states) * token_weight[:, None]
        final_hidden_states = final_hidden_states.reshape(
            batch_size, sequence_length, hidden_dim)
        return final_hidden_states, router_logits


class Qwen3StackedGather(nn.Module):
    """Qwen3 (norm_topk_prob=True, as Qwen3-30B-A3B) with transformers 5's
    stacked expert weights (gate_up_proj [E, 2I, H]: gate rows then up rows;
    down_proj [E, H, I]), each (token, slot) gathering its expert's
    weights."""

    def __init__(self, num_experts=8, top_k=2):
        super().__init__()
        self.num_experts, self.top_k = num_experts, top_k
        self.gate = nn.Linear(HIDDEN, num_experts, bias=False)
        self.gate_up_proj = nn.Parameter(
            torch.randn(num_experts, 2 * INTERMEDIATE, HIDDEN) / HIDDEN**0.5)
        self.down_proj = nn.Parameter(
            torch.randn(num_experts, HIDDEN, INTERMEDIATE) / INTERMEDIATE**0.5)

    def forward(self, hidden_states):
        batch_size, sequence_length, hidden_dim = hidden_states.shape
        hidden_states = hidden_states.view(-1, hidden_dim)
        router_logits, routing_weights, selected_experts = route(
            self.gate, hidden_states, self.top_k, True)
        gate_up = torch.einsum(
            "th,tkoh->tko", hidden_states, self.gate_up_proj[selected_experts])
        gate, up = gate_up.chunk(2, dim=-1)
        expert_out = torch.einsum(
            "tki,tkhi->tkh", F.silu(gate) * up, self.down_proj[selected_experts])
        final_hidden_states = (expert_out * routing_weights.unsqueeze(-1)).sum(dim=1)
        final_hidden_states = final_hidden_states.reshape(
            batch_size, sequence_length, hidden_dim)
        return final_hidden_states, router_logits


FIXTURES = {
    "mixtral_dense_masked": MixtralDenseMasked,
    "qwen3_dense_masked": Qwen3DenseMasked,
    "qwen3_stacked_gather": Qwen3StackedGather,
}

# bf16 versions (module.to(torch.bfloat16), bf16 input), as Hugging Face
# models run: the router softmax still runs in f32 (dtype=torch.float), every
# other intermediate is rounded to bf16 where torch rounds it. Exporting bf16
# weights needs ml_dtypes.
BF16_FIXTURES = {
    "mixtral_dense_masked_bf16": MixtralDenseMasked,
    "qwen3_stacked_gather_bf16": Qwen3StackedGather,
}


def export(module, example, name):
    seq = torch.export.Dim("seq", min=1, max=4096)
    return fx.export_and_import(
        module, example, output_type="linalg-on-tensors",
        dynamic_shapes={"hidden_states": {1: seq}}, func_name=name)


def write_io(path, example, expected):
    with open(path, "w") as f:
        f.write("# input hidden_states %s\n" % list(example.shape))
        f.write(" ".join("%.9e" % v for v in example.flatten().tolist()) + "\n")
        f.write("# output %s\n" % list(expected.shape))
        f.write(" ".join("%.9e" % v for v in expected.flatten().tolist()) + "\n")


def main(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    print("torch", torch.__version__, "torch-mlir", getattr(torch_mlir, "__version__", "20261001"))
    for name, cls, dtype in (
            [(n, c, torch.float32) for n, c in FIXTURES.items()]
            + [(n, c, torch.bfloat16) for n, c in BF16_FIXTURES.items()]):
        torch.manual_seed(0)
        module = cls().eval().to(dtype)
        example = torch.randn(1, 5, HIDDEN).to(dtype)
        with torch.no_grad():
            expected = module(example)[0]
        mlir_module = export(module, example, name)
        with open(os.path.join(out_dir, name + ".mlir"), "w") as f:
            f.write(mlir_module.operation.get_asm(print_generic_op_form=True))
        write_io(os.path.join(out_dir, name + ".io.txt"), example, expected)
        print("exported", name)
    # The Hugging Face loop itself, for the record.
    torch.manual_seed(0)
    try:
        export(MixtralLoop().eval(), torch.randn(1, 5, HIDDEN), "mixtral_loop")
        print("MixtralLoop: exported (unexpected)")
    except Exception as error:  # torch-mlir raises its own error types
        print("MixtralLoop: not exported:", type(error).__name__)
        print("".join(traceback.format_exception_only(type(error), error))[:2000])


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "fixtures")
