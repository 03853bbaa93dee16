"""The mixture-of-experts group of the real-world corpus (``tests/realworld/moe_corpus.py``):
every layer agrees with eager (in-process and as a torch-free host, on inputs where the
number of tokens per expert varies) or is refused with ``UnsupportedError`` — never a
wrong answer, never a crash. The layers that pass today must keep passing.

Needs the ``realworld`` extra for the package layers (``pip install -e .[realworld]``);
the paper-style layers always run. Slow cases run with ``make test-slow`` or ``DYCL_SLOW=1``."""

from __future__ import annotations

import inspect

import pytest
import torch

import dycl
from dycl.harness.testing import assert_equivalent, outputs_match
from dycl.harness.testing_host import Call, run_host_without_torch
from tests.realworld.corpus import run_case
from tests.realworld.moe_corpus import moe_cases, moe_missing
from tests.realworld.moe_lms import build_jetmoe_lm, build_moe_lm, experts_hit, moe_block, moe_lm_names, token_batches

#: agree with eager today (paths: the distinct eager paths the corpus inputs take)
PASSING = {"MixtureOfDepths": 1, "SwitchLoopMoE": 3, "ThresholdRoutedMoE": 2,
           # transformers' experts loop, followed into the library (dycl.model.library_decisions):
           # Mixtral's loop over ``expert_hit`` (a tensor whose length depends on the routing) and its
           # test ``expert_idx == self.num_experts``, which tracing would keep at the example's experts,
           # are rewritten, the loop unrolled to the expert count (rewriter.bounded_rows): calls that
           # hit different numbers of experts take different paths
           "MixtralSparseMoeBlock": 3, "Qwen2MoeSparseMoeBlock": 3, "OlmoeSparseMoeBlock": 3}
SLOW = {"SwitchLoopMoE", "ExpertChoiceMoE", "SwitchTransformersSparseMLP", "OlmoeSparseMoeBlock"}
CASES = moe_cases()


@pytest.mark.parametrize("case", [pytest.param(c, marks=[pytest.mark.slow] if c.name in SLOW else [], id=c.name)
                                  for c in CASES])
def test_moe_layer_agrees_or_is_refused_clearly(case, tmp_path):
    outcome = run_case(case, tmp_path)
    assert outcome.status in ("pass", "clear error"), f"{outcome.status}: {outcome.detail}"
    if case.name in PASSING:
        assert outcome.status == "pass", outcome.detail
        assert outcome.checked == 8 and outcome.host_checked == 8
        assert outcome.paths == PASSING[case.name]
    elif outcome.status == "clear error":
        assert outcome.detail.startswith(("UnsupportedError", "ModelStateError")), outcome.detail


def test_every_package_of_the_group_is_installed_or_reported():
    missing = moe_missing()
    names = {c.name.split(".")[0] for c in CASES}
    for package in ("st_moe_pytorch", "mixture_of_experts", "soft_moe_pytorch"):
        assert (package in names) != (package.replace("_", "-") in missing)
    if missing:
        pytest.skip(f"not installed (pip install -e .[realworld]): {', '.join(missing)}")


#: the tiny LMs of the issue whose cases run without DYCL_SLOW=1
FAST_LMS = {"MixtralForCausalLM"}
CALLS = 20


def _lm_params(slow_except: set[str]) -> list:
    return [pytest.param(name, marks=[] if name in slow_except else [pytest.mark.slow], id=name)
            for name in moe_lm_names()]


@pytest.mark.parametrize("name", _lm_params(FAST_LMS))
def test_a_moe_lm_with_the_default_experts_agrees_with_eager_on_calls_that_run_other_experts(name, tmp_path):
    """transformers 5's default experts on CPU (``torch.histc`` counts per expert,
    ``F.grouped_mm``: dycl's ONNX translations) unmodified, with a symbolic batch and
    sequence (batch 1 and sequence 1 among them): logits within 1e-4 of eager on 20
    calls, in process and through the torch-free host; the calls ran different sets
    of experts."""
    pytest.importorskip("transformers")
    lm = build_moe_lm(name)
    compiled = dycl.compile(lm, (torch.randint(0, 61, (2, 7)),), dynamic={"input_ids": {0: "batch", 1: "seq"}})
    _agrees_on_calls_that_run_other_experts(lm, compiled, tmp_path / name)


@pytest.mark.parametrize("name", _lm_params(FAST_LMS))
def test_the_eager_experts_loop_of_each_moe_lm_compiles_with_a_path_per_number_of_experts_hit(name, tmp_path):
    """``experts_implementation="eager"``: the loop over ``expert_hit`` inside the
    ``@use_experts_implementation`` class, in the LM's own MoE block, compiled unmodified
    (the configured implementation is the one compiled): agrees with eager on 20 inputs of
    other batch and sequence sizes, in process and on the host; the inputs hit 2, 3 and 4
    of the 4 experts (a path each)."""
    pytest.importorskip("transformers")
    block = moe_block(build_moe_lm(name, experts="eager"))
    argument = next(iter(inspect.signature(block.forward).parameters))
    compiled = dycl.compile(block, (torch.randn(2, 7, 32),), dynamic={argument: {0: "batch", 1: "seq"}})
    generator = torch.Generator().manual_seed(5)
    sizes = [(1, 1), (2, 7), (1, 3), (3, 5), (2, 1), (4, 2), (1, 9), (2, 4)]
    inputs = [torch.randn(*sizes[i % len(sizes)], 32, generator=generator) * (1 + i % 3) for i in range(CALLS)]
    paths = assert_equivalent(block, compiled, inputs, min_paths=2, atol=1e-5)
    assert paths == 3, paths  # 1 token, top-2 of 4: 2 experts at least; larger inputs hit 3 or 4
    report = run_host_without_torch(compiled.save(tmp_path / name), block, inputs, atol=1e-5)
    assert report == {"checked": CALLS, "problems": [], "torch_loaded": False}


def test_only_the_refused_line_and_the_library_functions_leading_to_it_are_followed():
    """The eager run names the functions on the stack of the read at the refused line: the
    experts loop, the ``@use_experts_implementation`` wrapper and the block calling them;
    a line that made no read on the example follows nothing."""
    pytest.importorskip("transformers")
    from dycl.rewriter.errors import SourceLocation

    from dycl.model.library_decisions import deciders_at

    block = moe_block(build_moe_lm("MixtralForCausalLM", experts="eager"))
    experts = type(block.experts)
    loop = inspect.unwrap(experts.forward)
    decision = next(i for i, line in enumerate(inspect.getsourcelines(loop)[0])
                    if "expert_idx == self.num_experts" in line) + loop.__code__.co_firstlineno
    example = (torch.randn(2, 7, 32),)
    followed = deciders_at(block, example, None, SourceLocation(loop.__code__.co_filename, decision))
    assert {(c.co_name, c.co_filename.rsplit("/", 1)[-1]) for c in followed} == {
        ("forward", "modeling_mixtral.py"), ("forward", "moe.py")}
    assert loop.__code__ in followed and experts.forward.__code__ in followed
    assert type(block).forward.__code__ in followed
    assert deciders_at(block, example, None, SourceLocation(loop.__code__.co_filename, decision + 1)) == frozenset()


@pytest.mark.slow
def test_the_configured_experts_implementation_is_the_one_compiled(tmp_path):
    """``@use_experts_implementation`` picks the experts' forward by the configured name: the
    eager loop compiles to a path per number of experts hit, ``batched_mm`` (no decision on
    data) to one graph; both agree with eager."""
    pytest.importorskip("transformers")
    generator = torch.Generator().manual_seed(2)
    inputs = [torch.randn(b, s, 32, generator=generator) for b, s in [(1, 1), (2, 7), (3, 5), (1, 2), (4, 3)]]
    counts = {}
    for experts in ("eager", "batched_mm"):
        block = moe_block(build_moe_lm("OlmoeForCausalLM", experts=experts))
        compiled = dycl.compile(block, (torch.randn(2, 7, 32),), dynamic={"hidden_states": {0: "batch", 1: "seq"}})
        assert_equivalent(block, compiled, inputs, min_paths=1, atol=1e-5)
        counts[experts] = compiled.stats["conditions"]
    assert counts["eager"] >= 4 and counts["batched_mm"] == 0, counts


#: whole LMs with the eager experts loop: all of them (Qwen2-MoE builds its masks from a dict of
#: keyword arguments, ``create_causal_mask(**mask_kwargs)``: one variable per key, ``rewriter.dict_displays``)
EAGER_LOOP_LMS = moe_lm_names()


@pytest.mark.parametrize("name", [pytest.param(n, marks=[] if n in FAST_LMS else [pytest.mark.slow], id=n)
                                  for n in EAGER_LOOP_LMS])
def test_a_whole_lm_with_the_eager_experts_loop_agrees_with_eager_on_calls_that_run_other_experts(name, tmp_path):
    """``experts_implementation="eager"`` in the whole LM: following the decision up through the
    LM's decorators passes ``@capture_outputs``, whose ``ContextVar`` binding around the forward
    is folded (``rewriter.scoped_bindings``), its registry lookup and helpers evaluated
    (``rewriter.registry_lookups``, ``rewriter.library_calls``). Symbolic batch and sequence:
    logits within 1e-4 of eager on 20 calls (batch 1 and sequence 1 among them), in process and
    through the torch-free host; the calls ran different sets of experts."""
    pytest.importorskip("transformers")
    lm = build_moe_lm(name, experts="eager")
    compiled = dycl.compile(lm, (torch.randint(0, 61, (2, 7)),), dynamic={"input_ids": {0: "batch", 1: "seq"}})
    assert compiled.stats["conditions"] >= 4  # the experts loop is host conditions, not one frozen graph
    _agrees_on_calls_that_run_other_experts(lm, compiled, tmp_path / name)


@pytest.mark.slow
def test_jetmoe_whose_router_calls_tolist_agrees_with_eager_and_refuses_sequence_one_by_its_guard(tmp_path):
    """JetMoE's router counts the tokens per expert with ``expert_size.tolist()`` in library code
    and splits by those counts: the counts are host values, each call's own. Calls of other batch
    and sequence sizes agree with eager, in process and on the host. A sequence of 1 takes
    another branch of the traced attention (``is_causal = q_len > 1``), which the graph for other
    sizes could not be exported for: refused with the shape guard that names that line, never
    answered from the other branch."""
    pytest.importorskip("transformers")
    lm = build_jetmoe_lm()
    compiled = dycl.compile(lm, (torch.randint(0, 61, (2, 7)),), dynamic={"input_ids": {0: "batch", 1: "seq"}})
    inputs = [ids for ids in token_batches(28) if ids.shape[1] > 1]
    assert len(inputs) >= 20 and len({tuple(ids.shape) for ids in inputs}) >= 5
    with torch.no_grad():
        for i, ids in enumerate(inputs):
            problem = outputs_match(lm(ids).logits, compiled(ids).logits, atol=1e-4)
            assert problem is None, f"call #{i} {tuple(ids.shape)}: {problem}"
    report = run_host_without_torch(compiled.save(tmp_path / "jetmoe"), lm, [Call((ids,), {}) for ids in inputs],
                                    atol=1e-4)
    assert report == {"checked": len(inputs), "problems": [], "torch_loaded": False}
    with pytest.raises(Exception, match="sdpa_attention.py") as caught:
        compiled(torch.randint(0, 61, (2, 1)))
    assert type(caught.value).__name__ == "ShapeGuardError"


def _agrees_on_calls_that_run_other_experts(lm, compiled, directory) -> None:
    """Logits within 1e-4 of eager on ``CALLS`` inputs of assorted batch and sequence sizes, in
    process and through the torch-free host; at least 3 different sets of experts ran."""
    inputs = token_batches(CALLS)
    with torch.no_grad():
        for i, ids in enumerate(inputs):
            problem = outputs_match(lm(ids).logits, compiled(ids).logits, atol=1e-4)
            assert problem is None, f"call #{i} {tuple(ids.shape)}: {problem}"
    hit = {experts_hit(lm, ids) for ids in inputs}
    assert len(hit) >= 3, hit  # different routings, not one set of experts every call
    report = run_host_without_torch(compiled.save(directory), lm, [Call((ids,), {}) for ids in inputs], atol=1e-4)
    assert report == {"checked": CALLS, "problems": [], "torch_loaded": False}
