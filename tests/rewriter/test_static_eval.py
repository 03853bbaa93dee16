"""The static evaluator folds what is known at compile time and nothing else."""

from __future__ import annotations

import builtins

import libcst as cst
import pytest
import torch
import torch.nn as nn
from dycl.rewriter.names import Namespace
from dycl.rewriter.static_eval import StaticEvaluator
from dycl.rewriter.values import ListLength, ModuleIndex, Static, literal_term


class Config(nn.Module):
    def __init__(self):
        super().__init__()
        self.num_layers = [2, 3]
        self.layers = nn.ModuleDict({"group1_ds0": nn.Linear(2, 2)})
        self.blocks = nn.ModuleList([nn.ReLU(), nn.Tanh()])
        self.threshold = 0.5
        self.weight = nn.Parameter(torch.ones(3))


class Scope:
    def __init__(self, model, **facts):
        self.facts = {"self": Static(model, cst.Name("self")), "torch": Static(torch, cst.Name("torch")),
                      **{name: value if isinstance(value, (Static, ListLength))
                         else Static(value, literal_term(value)) for name, value in facts.items()}}

    def lookup(self, name):
        if name in self.facts:
            return self.facts[name]
        if hasattr(builtins, name):
            return Static(getattr(builtins, name), cst.Name(name))
        return None


def evaluate(source: str, **facts):
    model = Config()
    evaluator = StaticEvaluator(Scope(model, **facts), ModuleIndex(model, cst.Name("self")))
    return evaluator.evaluate(cst.parse_expression(source)), model


def code(node) -> str:
    return cst.Module([]).code_for_node(node)


@pytest.mark.parametrize(("source", "facts", "value"), [
    ("'group{}_ds{}'.format(g + 1, i)", {"g": 0, "i": 0}, "group1_ds0"),
    ("f'layer{i}'", {"i": 3}, "layer3"),
    ("self.num_layers[g] - 1", {"g": 1}, 2),
    ("i % 2 == 1", {"i": 3}, True),
    ("name in self.layers", {"name": "group1_ds0"}, True),
    ("len(self.blocks)", {}, 2),
    ("self.training", {}, True),
    ("self.threshold * 2 if flag else 0", {"flag": True}, 1.0),
    ("len(outs)", {"outs": ListLength(4)}, 4),
    ("self.weight.shape[0]", {}, 3),
])
def test_folds_static_expressions(source, facts, value):
    static, _ = evaluate(source, **facts)
    assert static is not None and static.value == value
    assert code(static.term) == repr(value)


def test_submodules_fold_to_their_path():
    static, model = evaluate("getattr(self, 'blocks')[i]", i=1)
    assert static.value is model.blocks[1]
    assert code(static.term) == "self.blocks[1]"
    static, _ = evaluate("self.layers[name]", name="group1_ds0")
    assert code(static.term) == "self.layers['group1_ds0']"


@pytest.mark.parametrize("source", [
    "x.sum() > 0",              # x is an input
    "self.weight * 2",          # computing with a parameter is tensor work
    "torch.zeros(3)",           # not an allowed call
    "self.blocks[0](self.weight)",
    "outs[0]",                  # element of a dynamic list
])
def test_leaves_dynamic_expressions_alone(source):
    static, _ = evaluate(source, outs=ListLength(2))
    assert static is None


def test_namespace_never_shadows_user_names_or_builtins():
    namespace = Namespace()
    namespace.reserve("out")
    assert namespace.fresh("out") == "out_1"
    assert namespace.fresh("out") == "out_2"
    assert namespace.fresh("len") == "len_1"
    assert namespace.fresh("item") == "item"
    assert namespace.fresh("item_3") == "item_1"
