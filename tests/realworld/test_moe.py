"""The mixture-of-experts group of the real-world corpus (``tests/realworld/moe_corpus.py``):
every layer agrees with eager (in-process and as a torch-free host, on inputs where the
number of tokens per expert varies) or is refused with ``UnsupportedError`` — never a
wrong answer, never a crash. The layers that pass today must keep passing.

Needs the ``realworld`` extra for the package layers (``pip install -e .[realworld]``);
the paper-style layers always run. Slow cases run with ``make test-slow`` or ``DYCL_SLOW=1``."""

from __future__ import annotations

import pytest

from tests.realworld.corpus import run_case
from tests.realworld.moe_corpus import moe_cases, moe_missing

#: agree with eager today (paths: the distinct eager paths the corpus inputs take)
PASSING = {"MixtureOfDepths": 1, "SwitchLoopMoE": 3, "ThresholdRoutedMoE": 2}
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


def test_mixtral_is_refused_at_the_library_line_that_decides_on_a_tensor():
    """Mixtral's experts loop over ``expert_hit`` (a tensor whose length depends on the
    routing) and test ``expert_idx == self.num_experts``: tracing would keep the
    example's experts. The refusal names transformers' line, not dycl's generated code."""
    import dycl

    case = next((c for c in CASES if c.name == "MixtralSparseMoeBlock"), None)
    if case is None:
        pytest.skip("transformers is not installed")
    model, args, kwargs = case.build()
    with pytest.raises(dycl.UnsupportedError) as caught:
        dycl.compile(model.eval(), args, kwargs=kwargs, dynamic=case.dynamic)
    message = str(caught.value)
    assert "modeling_mixtral.py:" in message and "generated code" not in message


def test_every_package_of_the_group_is_installed_or_reported():
    missing = moe_missing()
    names = {c.name.split(".")[0] for c in CASES}
    for package in ("st_moe_pytorch", "mixture_of_experts", "soft_moe_pytorch"):
        assert (package in names) != (package.replace("_", "-") in missing)
    if missing:
        pytest.skip(f"not installed (pip install -e .[realworld]): {', '.join(missing)}")
