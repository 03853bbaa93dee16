"""Routing layers written the way their papers' reference code is written (not for dycl).

- ``MixtureOfDepths``: Raposo et al. 2024 — a router scores every token, the top
  ``capacity`` tokens (``topk`` over the sequence) go through the block, the rest skip
  it; the block's output is scaled by the router weight and scattered back.
- ``ExpertChoiceMoE``: Zhou et al. 2022 — each expert picks its top ``capacity``
  tokens (``topk`` over tokens, per expert), processes them, and the weighted
  results are summed back with ``index_add``.
- ``SwitchLoopMoE``: the top-1 loop of many Switch/Mixtral re-implementations: per
  expert, the tokens routed to it (``nonzero``), ``continue`` when it has none, a
  capacity limit, and ``index_add_`` of the weighted expert output.
- ``ThresholdRoutedMoE``: tokens whose gate clears a threshold go to a second expert
  (boolean-mask index assignment, ``where``); the number of them is data-dependent.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


class FeedForward(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.w1 = nn.Linear(dim, hidden)
        self.w2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.w2(F.gelu(self.w1(x)))


class MixtureOfDepths(nn.Module):
    def __init__(self, dim: int = 16, capacity_factor: float = 0.5) -> None:
        super().__init__()
        self.router = nn.Linear(dim, 1)
        self.block = FeedForward(dim, 2 * dim)
        self.capacity_factor = capacity_factor

    def forward(self, x):
        batch, seq_len, dim = x.shape
        capacity = max(1, int(seq_len * self.capacity_factor))
        weights = self.router(x).squeeze(-1)
        top_weights, top_index = torch.topk(weights, capacity, dim=1, sorted=False)
        top_index, order = torch.sort(top_index, dim=1)
        top_weights = torch.gather(top_weights, 1, order)
        index = top_index.unsqueeze(-1).expand(-1, -1, dim)
        selected = torch.gather(x, 1, index)
        processed = self.block(selected) * torch.sigmoid(top_weights).unsqueeze(-1)
        return torch.scatter_add(x, 1, index, processed)


class ExpertChoiceMoE(nn.Module):
    def __init__(self, dim: int = 16, num_experts: int = 4, capacity_factor: float = 1.0) -> None:
        super().__init__()
        self.gate = nn.Linear(dim, num_experts, bias=False)
        self.experts = nn.ModuleList(FeedForward(dim, 2 * dim) for _ in range(num_experts))
        self.capacity_factor = capacity_factor

    def forward(self, x):
        shape = x.shape
        tokens = x.reshape(-1, shape[-1])
        n = tokens.shape[0]
        capacity = max(1, math.ceil(n * self.capacity_factor / len(self.experts)))
        scores = F.softmax(self.gate(tokens), dim=-1)
        gates, index = torch.topk(scores.t(), capacity, dim=-1)
        out = torch.zeros_like(tokens)
        for e, expert in enumerate(self.experts):
            chosen = index[e]
            out.index_add_(0, chosen, expert(tokens[chosen]) * gates[e].unsqueeze(-1))
        return out.reshape(shape)


class SwitchLoopMoE(nn.Module):
    def __init__(self, dim: int = 16, num_experts: int = 4, capacity_factor: float = 1.25) -> None:
        super().__init__()
        self.num_experts = num_experts
        self.switch = nn.Linear(dim, num_experts)
        self.experts = nn.ModuleList(FeedForward(dim, 2 * dim) for _ in range(num_experts))
        self.capacity_factor = capacity_factor

    def forward(self, x):
        batch, seq_len, dim = x.shape
        x = x.reshape(-1, dim)
        capacity = int(self.capacity_factor * x.shape[0] / self.num_experts)
        probs = torch.softmax(self.switch(x), dim=-1)
        route_prob, routes = torch.max(probs, dim=-1)
        out = x.new_zeros(x.shape)
        for i in range(self.num_experts):
            idx = torch.eq(routes, i).nonzero(as_tuple=True)[0]
            if idx.numel() == 0:
                continue
            idx = idx[:capacity]
            out.index_add_(0, idx, self.experts[i](x[idx]) * route_prob[idx].unsqueeze(-1))
        return out.reshape(batch, seq_len, dim)


class ThresholdRoutedMoE(nn.Module):
    def __init__(self, dim: int = 16, threshold: float = 0.3) -> None:
        super().__init__()
        self.gate = nn.Linear(dim, 2)
        self.first = FeedForward(dim, 2 * dim)
        self.second = FeedForward(dim, 2 * dim)
        self.threshold = threshold

    def forward(self, x):
        gates = torch.softmax(self.gate(x), dim=-1)
        out = self.first(x) * gates[..., :1]
        mask = gates[..., 1] > self.threshold
        if mask.any():
            out[mask] = out[mask] + self.second(x[mask]) * gates[..., 1][mask].unsqueeze(-1)
        return torch.where(mask.unsqueeze(-1), out, out * 2)
