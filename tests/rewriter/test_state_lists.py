"""Golden before/after of ``rewriter.state_lists``: a list on self that forward() appends to and
takes the len() of gets a length parameter, counted up at each append; one whose items it reads gets
its items at the call's start (tests/state/test_list_history.py checks the compiled model against
eager over several calls)."""

from __future__ import annotations

import pytest
import torch
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


class ComparesWithHistory(TokenCounter):
    def forward(self, x):
        h = self.fc(x)
        if self.scores[-1] > 0.5:
            h = h * 2
        self.scores.append(h.max().item())
        return h + sum(self.scores)


def test_a_read_of_the_items_reads_the_items_before_the_call_and_its_own():
    result = rewriter.rewrite(ComparesWithHistory().eval())
    assert [(s.path, s.kind) for s in result.state] == [("scores", "list"), ("scores", "prior")]
    body = result.plain_source.split(":\n", 1)[1]
    assert golden(body) == golden("""
        state_scores = []
        h = self.fc(x)
        if [*state_scores_prior, *state_scores][-1] > 0.5:
            h = h * 2
        state_scores.append(h.max().item())
        return ((h + sum([*state_scores_prior, *state_scores])), (state_scores, state_scores_prior, ))
    """)


class StacksItsScores(TokenCounter):
    def forward(self, x):
        h = self.fc(x)
        self.scores.append(h.max().item())
        return h * torch.tensor(self.scores).mean()


def test_another_use_of_the_list_is_refused():
    with pytest.raises(rewriter.UnsupportedError, match="a read of the list scores on the model") as info:
        rewriter.rewrite(StacksItsScores().eval())
    assert "torch.tensor(self.scores)" in str(info.value) and "len()" in info.value.hint


class SkipsUntilScored(TokenCounter):
    def forward(self, x):
        h = self.fc(x)
        if not self.scores:
            self.scores.append(0.0)
        return h if self.scores else -h


def test_a_test_of_the_lists_truth_reads_its_length():
    result = rewriter.rewrite(SkipsUntilScored().eval())
    assert [(s.path, s.kind) for s in result.state] == [("scores", "list"), ("scores", "length")]
    body = result.plain_source.split(":\n", 1)[1]
    assert golden(body) == golden("""
        state_scores = []
        h = self.fc(x)
        if not (state_scores_len > 0):
            state_scores.append(0.0)
            state_scores_len = state_scores_len + 1
        if (state_scores_len > 0):
            choice = h
        else:
            choice = -h
        return ((choice), (state_scores, state_scores_len, ))
    """)
