"""A library registry's lookup of an implementation by a configured name is evaluated at compile
time (``rewriter.registry_lookups``): transformers' ``ExpertsInterface``, which
``@use_experts_implementation`` consults; anything else stays dynamic."""

from __future__ import annotations

from collections.abc import Mapping

import libcst as cst
import pytest
from dycl.rewriter.registry_lookups import is_registry_lookup
from dycl.rewriter.values import Static

from tests.rewriter.test_static_eval import evaluate as evaluate_with_model

moe = pytest.importorskip("transformers.integrations.moe", reason="needs transformers")


def evaluate(source: str, **facts) -> Static | None:
    return evaluate_with_model(source, **facts)[0]


def original_forward(self, hidden_states, top_k_index, top_k_weights):
    return hidden_states


def _registry() -> Static:
    return Static(moe.ALL_EXPERTS_FUNCTIONS, cst.Name("registry"))


def test_the_configured_implementation_is_looked_up_and_the_default_kept_for_eager():
    default = Static(original_forward, cst.Name("original_forward"))
    chosen = evaluate("registry.get_interface('grouped_mm', original_forward)", registry=_registry(),
                      original_forward=default)
    assert chosen is not None and chosen.value is moe.grouped_mm_experts_forward
    eager = evaluate("registry.get_interface(name, original_forward)", registry=_registry(),
                     original_forward=default, name="eager")
    assert eager is not None and eager.value is original_forward


def test_a_lookup_with_a_dynamic_or_tensor_argument_or_of_user_code_stays_dynamic():
    import torch

    default = Static(original_forward, cst.Name("original_forward"))
    assert evaluate("registry.get_interface(name, original_forward)", registry=_registry(),
                    original_forward=default) is None  # name: not known
    assert evaluate("registry.get_interface(t, original_forward)", registry=_registry(), original_forward=default,
                    t=Static(torch.ones(1), cst.Name("t"))) is None

    class UserRegistry(Mapping):  # the user's own code is rewritten, never called at compile time
        def __getitem__(self, key):
            return original_forward

        def __iter__(self):
            return iter(["a"])

        def __len__(self):
            return 1

        def pick(self, key):
            return self[key]

    assert not is_registry_lookup(UserRegistry().pick)
    assert is_registry_lookup(moe.ALL_EXPERTS_FUNCTIONS.get_interface)
