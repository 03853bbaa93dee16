"""Loops over rows whose number depends on data but has a static bound (``rewriter.bounded_rows``):
the experts a routing hit, written as people write MoE layers. Golden snippets of ``unroll``, the
bound calculus on its own, and the compiled layer against eager (in process and through the
torch-free host) on inputs that hit different numbers and sets of experts."""

from __future__ import annotations

import libcst as cst
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from dycl.rewriter.bounded_rows import Calculus, Definitions, row_bound
from dycl.rewriter.values import Static

import dycl
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch
from tests.rewriter.test_golden import after, golden


class Expert(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.up = nn.Linear(dim, hidden)
        self.down = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.down(F.gelu(self.up(x)))


class HitLoopMoE(nn.Module):
    """The loop of transformers 5's eager experts: over the experts hit, not all of them."""

    def __init__(self, dim: int = 8, num_experts: int = 4, top_k: int = 2) -> None:
        super().__init__()
        self.num_experts, self.top_k = num_experts, top_k
        self.router = nn.Linear(dim, num_experts, bias=False)
        self.experts = nn.ModuleList(Expert(dim, 16) for _ in range(num_experts))

    def forward(self, x):
        weights, chosen = torch.topk(F.softmax(self.router(x), dim=-1), self.top_k, dim=-1)
        mask = F.one_hot(chosen, num_classes=self.num_experts).permute(2, 1, 0)
        hit = torch.greater(mask.sum(dim=(-1, -2)), 0).nonzero()
        out = torch.zeros_like(x)
        for e in hit:
            e = e[0]
            slot, token = torch.where(mask[e])
            y = self.experts[e](x[token]) * weights[token, slot, None]
            out.index_add_(0, token, y)
        return out


class SkipEmptyMoE(nn.Module):
    """Top-1 routing over a loop of the expert ids present, skipping an empty one with
    ``continue`` (``idx.numel() == 0``), the experts' weights stacked in one parameter."""

    def __init__(self, dim: int = 8, num_experts: int = 3) -> None:
        super().__init__()
        self.gate = nn.Linear(dim, num_experts)
        self.w = nn.Parameter(torch.randn(num_experts, dim, dim) / dim ** 0.5)

    def forward(self, tokens):
        probs = self.gate(tokens).softmax(-1)
        best = probs.argmax(-1)
        present = (F.one_hot(best, self.w.shape[0]).view(-1, self.w.shape[0]).sum(0) > 0).nonzero()
        result = tokens.clone()
        for row in present:
            idx = torch.where(best == row[0])[0]
            if idx.numel() == 0:
                continue
            result[idx] = tokens[idx] @ self.w[row[0]] * probs[idx, row[0], None]
        return result


def test_a_loop_over_the_experts_hit_unrolls_to_the_expert_count_with_a_guard_per_iteration():
    source = after(HitLoopMoE(num_experts=2, top_k=1), "unroll")
    assert source == golden("""
        weights, chosen = torch.topk(F.softmax(self.router(x), dim=-1), self.top_k, dim=-1)
        mask = F.one_hot(chosen, num_classes=self.num_experts).permute(2, 1, 0)
        hit = torch.greater(mask.sum(dim=(-1, -2)), 0).nonzero()
        out = torch.zeros_like(x)
        padded = torch.cat([hit, hit.new_zeros((2, *hit.shape[1:]))])
        if not (hit.shape[0] > 0):
            pass
        else:
            e = padded[0]
            e = e[0]
            slot, token = torch.where(mask[e])
            y = self.experts[e](x[token]) * weights[token, slot, None]
            out.index_add_(0, token, y)
            if not (hit.shape[0] > 1):
                pass
            else:
                e = padded[1]
                e = e[0]
                slot, token = torch.where(mask[e])
                y = self.experts[e](x[token]) * weights[token, slot, None]
                out.index_add_(0, token, y)
        return out
    """)


def _bound(expression: str, *assignments: tuple[str, str | None], **definitions: str | None) -> int | None:
    statics = {"K": 5, "zero": 0, "table": torch.zeros(3, 7), "torch": torch, "F": F}

    def evaluate(node):
        if isinstance(node, cst.Name) and node.value in statics:
            return Static(statics[node.value], node)
        if isinstance(node, (cst.Integer, cst.UnaryOperation)):
            return Static(int(cst.Module([]).code_for_node(node)), node)
        numbers = (cst.UnaryOperation, cst.Integer)
        if isinstance(node, cst.Tuple) and all(isinstance(e.value, numbers) for e in node.elements):
            return Static(tuple(int(cst.Module([]).code_for_node(e.value)) for e in node.elements), node)
        if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value in ("torch", "F"):
            return Static(getattr(statics[node.value.value], node.attr.value), node)
        return None

    history = Definitions()
    for name, text in [*assignments, *definitions.items()]:
        history.assign(name, None if text is None else cst.parse_expression(text))
    return row_bound(cst.parse_expression(expression), Calculus(history, evaluate))


def test_the_bound_calculus_follows_definitions_and_knows_only_what_it_can_prove():
    mask = "F.one_hot(idx, num_classes=K).permute(2, 1, 0)"
    assert _bound("hit", mask=mask, hit="torch.greater(mask.sum(dim=(-1, -2)), zero).nonzero()") == 5
    # transformers' own order: the mask made, then permuted under the same name
    assert _bound("hit", ("m", "F.one_hot(idx, num_classes=K)"), ("m", "m.permute(2, 1, 0)"),
                  ("hit", "torch.greater(m.sum(dim=(-1, -2)), zero).nonzero()")) == 5
    # a name means what it meant where it was read: m changed after hit was computed
    assert _bound("hit", ("m", "F.one_hot(idx, num_classes=K).permute(2, 1, 0)"),
                  ("hit", "(m.sum(dim=(-1, -2)) > zero).nonzero()"), ("m", "table")) == 5
    assert _bound("hit", ("hit", "(m.sum(dim=(-1, -2)) > zero).nonzero()"),
                  ("m", "F.one_hot(idx, num_classes=K).permute(2, 1, 0)")) is None
    assert _bound("(mask.sum(dim=(-1, -2)) > zero).nonzero()", mask=mask) == 5
    assert _bound("torch.nonzero(table > zero)") == 21  # every element of a static 3 x 7 tensor
    assert _bound("mask.nonzero()", mask=mask) is None  # its other dims come from the input
    assert _bound("(x > zero).nonzero()") is None  # x: an input of unknown size
    assert _bound("(F.one_hot(idx).sum(0) > zero).nonzero()") is None  # num_classes from the data
    assert _bound("(F.one_hot(idx, K).sum(0) > zero).nonzero()") is None  # idx's rank unknown: which dim is 0?
    assert _bound("(F.one_hot(idx, K).view(-1, K).sum(0) > zero).nonzero()") == 5
    assert _bound("hit", mask=mask, hit="(mask.sum(dim=(-1, -2), keepdim=True) > zero).nonzero()") is None
    assert _bound("hit", hit=None) is None  # assigned under a branch: forgotten


def test_a_loop_over_rows_from_data_without_a_bound_is_still_refused():
    class Unbounded(nn.Module):
        def forward(self, x):
            total = x.sum() * 0
            for row in (x > 0).nonzero():
                total = total + row.sum()
            return total

    with pytest.raises(dycl.UnsupportedError, match="a for loop over a value that is not known at compile time"):
        dycl.compile(Unbounded().eval(), torch.randn(5))


def _inputs(count: int, dim: int = 8, seed: int = 3) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    sizes = [1, 2, 3, 6, 1, 9, 4, 2]
    return [torch.randn(sizes[i % len(sizes)], dim, generator=generator) * (1 + i % 4) for i in range(count)]


def _experts_run(model: nn.Module, x: torch.Tensor) -> frozenset[int]:
    chosen = torch.topk(F.softmax(model.router(x), dim=-1), model.top_k, dim=-1).indices
    return frozenset(chosen.unique().tolist())


@pytest.mark.parametrize("cls", [HitLoopMoE, SkipEmptyMoE])
def test_a_moe_layer_looping_over_the_experts_hit_agrees_with_eager_in_process_and_on_the_host(cls, tmp_path):
    torch.manual_seed(0)
    model = cls().eval()
    compiled = dycl.compile(model, torch.randn(6, 8), dynamic={next(iter(_argument_names(model))): {0: "tokens"}})
    inputs = _inputs(24)
    paths = assert_equivalent(model, compiled, inputs, min_paths=2, atol=1e-5)
    assert paths >= 3, paths  # different numbers of experts hit
    if cls is HitLoopMoE:
        assert len({_experts_run(model, x) for x in inputs}) >= 4  # and different sets of experts
    report = run_host_without_torch(compiled.save(tmp_path / cls.__name__), model, inputs, atol=1e-5)
    assert report == {"checked": len(inputs), "problems": [], "torch_loaded": False}


def _argument_names(model: nn.Module) -> list[str]:
    import inspect

    return list(inspect.signature(model.forward).parameters)
