"""A stand-in for an installed package (a router as Hugging Face MoE layers write
them): the soundness tests make dycl treat this directory as library code."""

from __future__ import annotations

import torch


def route(x: torch.Tensor, experts: torch.nn.ModuleList) -> torch.Tensor:
    """Send ``x`` to the expert its mean picks."""
    if x.mean() > 0:  # DECISION
        return experts[0](x)
    return experts[1](x)


def scale_by_best(x: torch.Tensor, gate: torch.nn.Linear, heads: torch.Tensor) -> torch.Tensor:
    """``x`` times the head its gate picks (branch-free, but the pick is a Python int)."""
    best = int(gate(x).argmax())  # DECISION
    return x * heads[best]


def per_sample(x: torch.Tensor, layer: torch.nn.Module) -> torch.Tensor:
    """``layer`` on each sample in turn (a mixture-of-depths style loop over the batch)."""
    rows = []
    for i in range(x.shape[0]):  # DECISION
        rows.append(layer(x[i:i + 1]))
    return torch.cat(rows)
