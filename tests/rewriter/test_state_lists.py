"""Golden before/after of ``rewriter.state_lists``: a list on self that forward() appends to and
takes the len() of gets a length parameter, counted up at each append (tests/state/test_list_history.py
checks the compiled model against eager over several calls)."""

from __future__ import annotations

import pytest
import torch.nn as nn

from dycl import rewriter
from tests.rewriter.golden import golden


class TokenCounter(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.scores = []

    def forward(self, x):
        h = self.fc(x)
        self.scores.append(h.max().item())
        if h.mean() > 0:
            self.scores.append(0.0)
        if len(self.scores) > 3:
            return h * len(self.scores)
        return h


def test_len_of_an_appended_list_reads_a_counted_length():
    result = rewriter.rewrite(TokenCounter().eval())
    assert [(s.path, s.kind) for s in result.state] == [("scores", "list"), ("scores", "length")]
    body = result.plain_source.split(":\n", 1)[1]
    assert golden(body) == golden("""
        state_scores = []
        h = self.fc(x)
        state_scores.append(h.max().item())
        state_scores_len = state_scores_len + 1
        if h.mean() > 0:
            state_scores.append(0.0)
            state_scores_len = state_scores_len + 1
        if state_scores_len > 3:
            return ((h * state_scores_len), (state_scores, state_scores_len, ))
        return ((h), (state_scores, state_scores_len, ))
    """)
    assert result.plain_source.startswith("def forward(self, x, state_scores_len):")


class ReadsLastScore(TokenCounter):
    def forward(self, x):
        h = self.fc(x)
        self.scores.append(h.max().item())
        return h * self.scores[-1]


def test_an_item_of_the_list_read_is_refused():
    with pytest.raises(rewriter.UnsupportedError, match="a read of the list scores on the model") as info:
        rewriter.rewrite(ReadsLastScore().eval())
    assert "self.scores[-1]" in str(info.value) and "len()" in info.value.hint
