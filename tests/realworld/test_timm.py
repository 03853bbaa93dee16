"""timm classifiers built without pretrained weights, compiled unmodified. timm
imports torchvision; where its wheel does not load with the installed torch the
cases are skipped with the import error."""

from __future__ import annotations

import pytest

from tests.realworld.corpus import run_case, timm_cases, timm_unavailable

_MISSING = timm_unavailable()
pytestmark = pytest.mark.skipif(_MISSING is not None, reason=f"timm cannot be imported here: {_MISSING}")


@pytest.mark.slow
@pytest.mark.parametrize("case", timm_cases(), ids=lambda c: c.name)
def test_timm_model_agrees_with_eager(case, tmp_path):
    outcome = run_case(case, tmp_path)
    assert outcome.status == "pass", outcome.detail
