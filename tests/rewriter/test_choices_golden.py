"""Golden snippets of ``rewriter.choices``: each data-dependent choice becomes ``if`` statements."""

from __future__ import annotations

import torch
import torch.nn as nn

from tests.rewriter.test_golden import after, golden


class Heads(nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 4)])
        self.table = nn.ModuleDict({"pos": nn.Linear(4, 4), "neg": nn.Linear(4, 4)})

    def forward(self, x):
        i = int(x.mean() > 0)
        y = self.heads[i](x)
        key = "pos" if y.sum() > 0 else "neg"
        return self.table[key](y)


def test_index_and_key_become_switches_and_the_conditional_expression_an_if():
    assert after(Heads(), "choices") == golden("""
        i = int(x.mean() > 0)
        if (i == 0) | (i == -2):
            chosen = self.heads[0](x)
        else:
            if (i == 1) | (i == -1):
                chosen = self.heads[1](x)
            else:
                raise IndexError("index out of range")
        y = chosen
        if y.sum() > 0:
            choice = "pos"
        else:
            choice = "neg"
        key = choice
        if key == 'pos':
            return self.table['pos'](y)
        else:
            if key == 'neg':
                return self.table['neg'](y)
            else:
                raise RuntimeError("a value chosen by data that dycl did not compile this statement for")
    """)


class Activation(nn.Module):
    def forward(self, x, scale: float = 2.0):
        act = "relu" if x.sum() > 0 else "tanh" if x.sum() > -1 else "sigmoid"
        name = act
        if name == "relu":
            x = x * scale
        return getattr(torch, name)(x)


def test_a_name_holding_a_literal_chosen_by_data_runs_each_reader_once_per_literal():
    assert after(Activation(), "choices") == golden("""
        if x.sum() > 0:
            choice = "relu"
        else:
            if x.sum() > -1:
                choice_1 = "tanh"
            else:
                choice_1 = "sigmoid"
            choice = choice_1
        act = choice
        name = act
        if name == "relu":
            x = x * scale
        if name == 'relu':
            return getattr(torch, 'relu')(x)
        else:
            if name == 'tanh':
                return getattr(torch, 'tanh')(x)
            else:
                if name == 'sigmoid':
                    return getattr(torch, 'sigmoid')(x)
                else:
                    raise RuntimeError("a value chosen by data that dycl did not compile this statement for")
    """)


class Band(nn.Module):
    def forward(self, x):
        if -1 < x.mean() < 1 <= x.max():
            return x
        return -x


def test_a_chained_comparison_runs_each_later_comparison_only_where_the_earlier_held():
    assert after(Band(), "choices") == golden("""
        operand = x.mean()
        chain = -1 < operand
        if chain:
            chain = operand < 1
            if chain:
                chain = 1 <= x.max()
        if chain:
            return x
        return -x
    """)


class Static(nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 4)])
        self.scale = None

    def forward(self, x, h=None):
        for i in range(2):
            x = self.heads[i](x)                         # static after unrolling
        x = x.unsqueeze(0) if x.dim() == 1 else x        # metadata: left as it is
        x = x if h is None else x + h                    # an `is` test: left as it is
        y = x.relu() if self.scale else x.tanh()         # static
        return y.sum() > 0 and (y if y.mean() > 0 else -y)  # the right of `and` only where the left holds


def test_static_and_metadata_choices_stay_and_a_lazy_one_is_made_where_it_runs():
    assert after(Static(), "choices") == golden("""
        i = 0
        x = self.heads[i](x)
        i = 1
        x = self.heads[i](x)
        x = x.unsqueeze(0) if x.dim() == 1 else x
        x = x if h is None else x + h
        y = x.relu() if self.scale else x.tanh()
        operand = y.sum() > 0
        if operand:
            if y.mean() > 0:
                choice = y
            else:
                choice = -y
            operand = choice
        return operand
    """)


def test_choices_compile_to_conditions_that_agree_with_eager():
    import dycl
    from dycl.harness.testing import assert_equivalent

    torch.manual_seed(0)
    model = Heads().eval()
    inputs = [torch.randn(3, 4) + shift for shift in (-1.0, -0.3, 0.0, 0.4, 1.0) for _ in range(3)]
    compiled = dycl.compile(model, inputs[0])
    assert_equivalent(model, compiled, inputs, min_paths=1, atol=1e-5)
    with torch.no_grad():
        outcomes = {(int(x.mean() > 0), bool(model.heads[int(x.mean() > 0)](x).sum() > 0)) for x in inputs}
    assert len(outcomes) >= 3


class BoundExpert(nn.Module):
    def __init__(self):
        super().__init__()
        self.experts = nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 4)])

    def forward(self, x):
        expert = self.experts[x.argmax()]
        return expert(x)


def test_a_member_bound_to_a_name_is_switched_where_it_is_read():
    assert after(BoundExpert(), "choices") == golden("""
        key = x.argmax()
        if (key == 0) | (key == -2):
            return self.experts[0](x)
        else:
            if (key == 1) | (key == -1):
                return self.experts[1](x)
            else:
                raise IndexError("index out of range")
    """)


class ExpertInOneBranch(nn.Module):
    def __init__(self):
        super().__init__()
        self.experts = nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 4)])

    def forward(self, x):
        if x.mean() > 0:
            expert = self.experts[x.argmax()]
        else:
            expert = self.experts[0]
        return expert(x)


def test_a_member_chosen_in_one_branch_and_called_after_it_is_refused_at_the_call():
    import inspect

    import pytest

    from dycl import rewriter

    with pytest.raises(rewriter.UnsupportedError, match="chosen by data in a branch") as refused:
        rewriter.rewrite(ExpertInOneBranch())
    assert refused.value.location.line == inspect.getsourcelines(ExpertInOneBranch.forward)[1] + 5


class NestedInCall(nn.Module):
    def forward(self, x):
        y = torch.cat([x, x.relu() if x.sum() > 0 else x.tanh()], dim=1).max(1) if x.mean() > 0 else x
        return y.softmax(-1) if x.numel() > 8 else (y if y.sum() > 0 else -y)


def test_a_conditional_expression_inside_a_call_is_lifted_where_it_runs():
    # the inner one runs only where the outer test holds; the last tests metadata (numel) and stays
    assert after(NestedInCall(), "choices") == golden("""
        if x.mean() > 0:
            if x.sum() > 0:
                choice_1 = x.relu()
            else:
                choice_1 = x.tanh()
            choice = torch.cat([x, choice_1], dim=1).max(1)
        else:
            choice = x
        y = choice
        return y.softmax(-1) if x.numel() > 8 else (y if y.sum() > 0 else -y)
    """)


class InPlace(nn.Module):
    def forward(self, x):
        y = x.mul_(2).sum() + (x.mean() if x.sum() > 0 else -x.mean())
        return y


def test_a_statement_that_changes_a_value_in_place_keeps_its_choice():
    # lifting the test would read x before `mul_` doubles it
    assert after(InPlace(), "choices") == golden("""
        y = x.mul_(2).sum() + (x.mean() if x.sum() > 0 else -x.mean())
        return y
    """)


class BooleanTests(nn.Module):
    def __init__(self):
        super().__init__()
        self.exit = nn.Linear(4, 2)
        self.use_exit = True

    def forward(self, x):
        if self.use_exit and x.max() > 0 and self.exit(x).softmax(-1).max() > 0.6:
            return self.exit(x)
        if not (x.mean() > 0 or x.min() > -1):
            x = -x
        keep = x.sum() > 0 or x.std() < 1
        return x * keep


def test_and_or_on_data_are_tested_operand_by_operand_where_python_evaluates_them():
    assert after(BooleanTests(), "choices") == golden("""
        truth = False
        if self.use_exit:
            if x.max() > 0:
                if self.exit(x).softmax(-1).max() > 0.6:
                    truth = True
        if truth:
            return self.exit(x)
        truth_1 = False
        if x.mean() > 0:
            truth_1 = True
        else:
            if x.min() > -1:
                truth_1 = True
        if not truth_1:
            x = -x
        operand = x.sum() > 0
        if not operand:
            operand = x.std() < 1
        keep = operand
        return x * keep
    """)


class Extremes(nn.Module):
    def forward(self, x, limit: float = 4.0):
        factor = min(1.0, limit / x.norm())
        return x * factor + max(x.mean(), x.sum(), 0.0)


def test_max_and_min_of_items_bind_each_item_once_then_compare_as_cpython_does():
    assert after(Extremes(), "choices") == golden("""
        item = 1.0
        item_1 = limit / x.norm()
        best = item
        if item_1 < best:
            best = item_1
        factor = best
        item_2 = x.mean()
        item_3 = x.sum()
        item_4 = 0.0
        best_1 = item_2
        if item_3 > best_1:
            best_1 = item_3
        if item_4 > best_1:
            best_1 = item_4
        return x * factor + best_1
    """)


class AppendsAChoice(nn.Module):
    def forward(self, x):
        outs = []
        outs.append(x.relu() if x.sum() > 0 else x)
        outs.append(x.mul_(2) if x.mean() > 0 else x)
        return outs


def test_a_choice_in_the_arguments_of_an_append_is_lifted_one_beside_another_change_is_not():
    # the append's arguments run before the list changes; `x.mul_(2)` inside them changes x itself
    assert after(AppendsAChoice(), "choices") == golden("""
        outs = []
        if x.sum() > 0:
            choice = x.relu()
        else:
            choice = x
        outs.append(choice)
        outs.append(x.mul_(2) if x.mean() > 0 else x)
        return outs
    """)


class SortedByKey(nn.Module):
    def forward(self, x):
        return sorted([x.relu(), x.tanh()], key=lambda r: float(r.sum()), reverse=True)


def test_sorted_with_a_key_from_data_sorts_positions_on_the_host():
    assert after(SortedByKey(), "choices") == golden("""
        items = [x.relu(), x.tanh()]
        score = float(items[0].sum())
        score_1 = float(items[1].sum())
        keys = (score, score_1)
        order = sorted(range(2), key=keys.__getitem__, reverse=True)
        ordered = [items[order[0]], items[order[1]]]
        return ordered
    """)
