"""The fuzzer's per-sample mode (``dycl.per_sample.fuzz``): generated programs compiled
with ``per_sample=True`` agree with eager per sample on batches, or are refused clearly.
Slow (a compile per program): ``pytest -m slow tests/per_sample``."""

from __future__ import annotations

import pytest

from dycl.per_sample.fuzz import campaign


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore")
def test_a_small_per_sample_campaign_finds_no_wrong_answer_and_no_crash():
    counts = campaign(16, seed=1)  # 9 of them are refused as in the default mode (issue-14 patterns)
    assert counts["inconsistent"] == 0 and counts["error"] == 0, counts
    assert counts["ok"] >= 6, counts
