"""Token routing as mixture-of-experts papers' code writes it: ``nonzero``/``where``/``topk``
routing, ``index_add_``/``scatter_add``, per-expert loops that ``continue`` past an
expert with no tokens, capacity factors. Compiled with a symbolic batch and sequence
length, the number of tokens each expert gets differs from call to call (zero
included) and must never be frozen at the example's count."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import dycl
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch
from tests.realworld.moe_models import ExpertChoiceMoE, MixtureOfDepths, SwitchLoopMoE, ThresholdRoutedMoE

DIMS = {"x": {0: "batch", 1: "seq"}}


def _inputs(count: int = 12, seed: int = 0, dim: int = 16) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    shapes = [(1 + i % 3, 1 + (5 * i) % 9) for i in range(count)]
    return [torch.randn(b, s, dim, generator=generator) * (0.2 + i % 4) for i, (b, s) in enumerate(shapes)]


def _compiled(model: nn.Module, example_shape=(2, 5, 16)):
    torch.manual_seed(0)
    return dycl.compile(model.eval(), torch.randn(*example_shape), dynamic=DIMS)


class NonzeroTop1(nn.Module):
    """Switch-style top-1 routing with ``torch.where`` over the token-expert mask, no capacity."""

    def __init__(self, dim: int = 16, experts: int = 3) -> None:
        super().__init__()
        self.router = nn.Linear(dim, experts)
        self.experts = nn.ModuleList(nn.Linear(dim, dim) for _ in range(experts))

    def forward(self, x):
        flat = x.view(-1, x.size(-1))
        probs = F.softmax(self.router(flat), dim=-1)
        weight, choice = probs.max(dim=-1)
        y = torch.zeros_like(flat)
        for e, expert in enumerate(self.experts):
            (rows,) = torch.where(choice == e)
            if rows.numel() == 0:
                continue
            y = y.index_add(0, rows, expert(flat[rows]) * weight[rows, None])
        return y.view_as(x)


def _tokens_per_expert(model: nn.Module, inputs: list[torch.Tensor]) -> set[tuple[int, ...]]:
    """The distinct per-expert token counts (Switch-style models: argmax of the router)."""
    counts = set()
    for x in inputs:
        router = model.switch if hasattr(model, "switch") else model.router
        choice = router(x.reshape(-1, x.shape[-1])).argmax(-1)
        counts.add(tuple(int((choice == e).sum()) for e in range(router.out_features)))
    return counts


def test_a_per_expert_loop_with_continue_and_capacity_agrees_on_every_token_count():
    torch.manual_seed(0)
    model = SwitchLoopMoE(num_experts=4).eval()
    inputs = _inputs(16)
    counts = _tokens_per_expert(model, inputs)
    assert any(0 in c for c in counts) and len(counts) >= 8  # experts with no tokens, many different counts
    paths = assert_equivalent(model, _compiled(model), inputs, min_paths=4, atol=1e-5)
    assert paths >= 4


def test_where_routing_without_capacity_agrees():
    torch.manual_seed(1)
    model = NonzeroTop1().eval()
    inputs = _inputs(14, seed=3)
    assert any(0 in c for c in _tokens_per_expert(model, inputs))
    assert assert_equivalent(model, _compiled(model), inputs, min_paths=3, atol=1e-5) >= 3


def test_mixture_of_depths_topk_capacity_follows_the_sequence_length():
    torch.manual_seed(2)
    model = MixtureOfDepths().eval()
    compiled = _compiled(model)
    # capacity = seq_len // 2 is computed on the host for each call, never the example's 2
    assert_equivalent(model, compiled, _inputs(10, seed=5), min_paths=1, atol=1e-5)
    x = torch.randn(1, 9, 16)
    assert torch.allclose(compiled(x), model(x), atol=1e-5)


def test_threshold_routing_with_a_boolean_mask_write_agrees_in_process_and_without_torch(tmp_path):
    torch.manual_seed(3)
    model = ThresholdRoutedMoE(threshold=0.7).eval()
    compiled = _compiled(model)
    inputs = _inputs(12, seed=7)
    assert assert_equivalent(model, compiled, inputs, min_paths=2, atol=1e-5) == 2
    report = run_host_without_torch(compiled.save(tmp_path / "moe"), model, inputs, 1e-5)
    assert report["problems"] == [] and report["checked"] == len(inputs)


def test_expert_choice_routing_agrees():
    torch.manual_seed(4)
    model = ExpertChoiceMoE().eval()
    compiled = _compiled(model)  # compiles since `shape = x.shape` crosses sub-DNNs as a torch.Size port
    assert_equivalent(model, compiled, _inputs(8, seed=9), min_paths=1, atol=1e-5)


def test_an_in_place_index_add_on_a_routing_buffer_is_kept():
    """The buffer updated in place by ``out.index_add_`` in one sub-DNN is the value later
    sub-DNNs read (it was dropped: every call returned zeros)."""

    class Scatter(nn.Module):
        def forward(self, x, index):
            out = torch.zeros_like(x)
            if index.numel() == 0:
                return out
            out.index_add_(0, index, x[index] * 2)
            return out + 1

    model = Scatter().eval()
    compiled = dycl.compile(model, (torch.randn(6, 3), torch.tensor([1, 4])), dynamic={"index": {0: "n"}})
    inputs = [(torch.randn(6, 3), torch.tensor(i, dtype=torch.long)) for i in ([0], [2, 3, 5], [], [1, 1])]
    assert assert_equivalent(model, compiled, inputs, min_paths=2) == 2


def test_host_metadata_reads_are_written_so_numpy_answers_them():
    """``idx.numel() == 0`` on the host (an expert with no tokens) became ``len(idx.reshape(-1))``;
    building it crashed (libcst has no negative Integer)."""
    import libcst as cst
    from dycl.hcfg.portable import portable_metadata

    test = cst.parse_expression("idx.numel() == 0 and x.size(1) > x.dim()")
    rewritten = cst.Module([]).code_for_node(portable_metadata(test, lambda receiver: True))
    assert rewritten == "len(idx.reshape(-1)) == 0 and x.shape[1] > x.ndim"
