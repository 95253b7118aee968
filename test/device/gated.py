"""The gated activations of the GPU tests, in torch (differentiable): silu(gate)
* up, and GPT-OSS's clamped form with the constants the tests compile in."""
import torch

ALPHA, LIMIT = 1.702, 7.0


def activation(kind, gate, up):
    if kind == "silu":
        return torch.nn.functional.silu(gate) * up
    g = gate.clamp(max=LIMIT)
    u = up.clamp(min=-LIMIT, max=LIMIT)
    return (u + 1) * (g * torch.sigmoid(g * ALPHA))
