"""A mixture-of-experts layer written as transformers 4.38 wrote Mixtral's sparse block
(``torch.where`` over the expert mask, ``continue`` for an expert with no tokens), inside a
user's pre-norm residual layer. Run as a script (``python -m tests.dynamic.moe_block DIR``) it
compiles the layer with ``dynamic=False``, compares it with eager in-process and loaded from its
artifact, and prints a JSON summary on its last line: a regression that kills the process
(the exporter's division by zero on an expert with zero rows) fails the test that runs it
instead of killing pytest."""

from __future__ import annotations

import json
import sys
import warnings

import torch
import torch.nn.functional as F
from torch import nn


class Expert(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, hidden_states):
        return self.w2(F.silu(self.w1(hidden_states)) * self.w3(hidden_states))


class SparseMoeBlock(nn.Module):
    def __init__(self, dim: int = 8, num_experts: int = 4, top_k: int = 2) -> None:
        super().__init__()
        self.num_experts = num_experts
        self.top_k = top_k
        self.gate = nn.Linear(dim, num_experts, bias=False)
        self.experts = nn.ModuleList([Expert(dim, 16) for _ in range(num_experts)])

    def forward(self, hidden_states):
        batch_size, sequence_length, hidden_dim = hidden_states.shape
        hidden_states = hidden_states.view(-1, hidden_dim)
        router_logits = self.gate(hidden_states)
        routing_weights = F.softmax(router_logits, dim=1, dtype=torch.float)
        routing_weights, selected_experts = torch.topk(routing_weights, self.top_k, dim=-1)
        routing_weights /= routing_weights.sum(dim=-1, keepdim=True)
        final_hidden_states = torch.zeros((batch_size * sequence_length, hidden_dim), dtype=hidden_states.dtype)
        expert_mask = F.one_hot(selected_experts, num_classes=self.num_experts).permute(2, 1, 0)
        for expert_idx in range(self.num_experts):
            expert_layer = self.experts[expert_idx]
            idx, top_x = torch.where(expert_mask[expert_idx])
            if top_x.shape[0] == 0:
                continue
            current_state = hidden_states[None, top_x].reshape(-1, hidden_dim)
            current_hidden_states = expert_layer(current_state) * routing_weights[top_x, idx, None]
            final_hidden_states.index_add_(0, top_x, current_hidden_states.to(hidden_states.dtype))
        final_hidden_states = final_hidden_states.reshape(batch_size, sequence_length, hidden_dim)
        return final_hidden_states, router_logits


class MoeLayer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(8)
        self.moe = SparseMoeBlock()

    def forward(self, x):
        h, _ = self.moe(self.norm(x))
        return x + h


def main(directory: str) -> None:
    import dycl
    from tests.dynamic.outcomes import assert_same_outcomes

    warnings.simplefilter("ignore")
    torch.manual_seed(0)
    model = MoeLayer().eval()
    example = torch.randn(1, 2, 8)  # two tokens, two experts each: two of the four experts get no token
    compiled = dycl.compile(model, example, dynamic=False)
    compiled.save(directory)
    loaded = dycl.load(directory)
    generator = torch.Generator().manual_seed(1)
    inputs = [(torch.randn(1, 2, 8, generator=generator) * 3,) for _ in range(24)]
    used = {tuple(sorted(set(torch.topk(model.moe.gate(model.norm(x)).view(-1, 4), 2).indices.flatten().tolist())))
            for (x,) in inputs}
    paths = assert_same_outcomes(model, {"compiled": compiled, "loaded": loaded}, inputs, atol=1e-5)
    print(json.dumps({"paths": paths, "expert_sets": len(used), "checked": len(inputs)}))


if __name__ == "__main__":
    main(sys.argv[1])
