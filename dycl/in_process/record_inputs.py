"""Records passed in that forward updates and returns, updated in process as eager updates them.

A Hugging Face LM called with ``past_key_values=past`` extends ``past`` in place (each layer's
``keys``/``values`` rebound to longer tensors) and returns that same object in its output.
The compiled model builds a fresh cache from the arrays it is given (``dycl.model.records``),
so on its own the caller's ``past`` would stay as it was and the output would hold another
object: a loop that keeps using ``past`` would silently read a stale cache.

``RecordUpdates.find`` runs forward once on a copy of the example and pairs each record
among the arguments with the output leaf that *is* it (same object); ``apply`` then, after
each compiled call, gives the caller's record the state of the record the compiled model
returned (its attributes, its lists' records in place) and puts the caller's object in the
output, as eager does. A record that forward changes but does not return is refused
(``UnsupportedError``): nothing the compiled model returns holds its new state.

Assumes: which argument is returned as which output leaf does not depend on the path (it is
the example's); a record's state is its attributes (``hcfg.state_objects``). The torch-free
host does the same on plain forms, from the manifest's ``call.returned``
(``dycl.model.records.returned_arguments``, ``hostgen/host_runtime.py``: ``_give_back``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils import _pytree as pytree

from dycl.model.example_copy import copy_tensors
from dycl.model.example_run import run_on_example
from dycl.model.records import fields_of, is_record, records_within
from dycl.rewriter.errors import UnsupportedError


@dataclass(frozen=True)
class RecordUpdates:
    """``pairs``: ``(leaf index among the call's (args, kwargs), leaf index in the output)``."""

    pairs: tuple[tuple[int, int], ...]

    @classmethod
    def find(cls, model: torch.nn.Module, args: tuple, kwargs: Mapping[str, Any]) -> RecordUpdates | None:
        """The records ``model`` returns among the arguments of the example ``(args, kwargs)``,
        found by running it on a copy; None where no argument holds a record."""
        if not any(is_record(leaf) for leaf in pytree.tree_leaves((args, dict(kwargs)))):
            return None  # every compile asks: the example is copied and run only where it holds a record
        args, kwargs = copy_tensors((args, dict(kwargs)))
        inputs = pytree.tree_leaves((args, kwargs))
        before = _states(inputs)
        with torch.no_grad():
            output = run_on_example(model, args, kwargs)
        outputs = {id(leaf): index for index, leaf in enumerate(pytree.tree_leaves(output))}
        pairs = tuple((index, outputs[id(leaf)]) for index, leaf in enumerate(inputs) if id(leaf) in outputs
                      and is_record(leaf))
        returned = {index for index, _ in pairs}
        for index, leaf in enumerate(inputs):
            if is_record(leaf) and index not in returned and not _same(_states([leaf])[0], before[index]):
                raise UnsupportedError(
                    f"forward() updates the {type(leaf).__name__} it is passed in place and does not return it",
                    None, "return it (as Hugging Face LMs return past_key_values with use_cache=True), "
                          "or pass a copy")
        return cls(pairs) if pairs else None

    def apply(self, args: tuple, kwargs: Mapping[str, Any], output: Any) -> Any:
        """``output`` with each returned record replaced by the caller's, updated to its state."""
        inputs = pytree.tree_leaves((args, dict(kwargs)))
        leaves, spec = pytree.tree_flatten(output)
        for given, returned in self.pairs:
            if type(inputs[given]) is type(leaves[returned]):
                assign(inputs[given], leaves[returned])
                leaves[returned] = inputs[given]
        return pytree.tree_unflatten(leaves, spec)


def assign(target: Any, source: Any) -> None:
    """Give record ``target`` the state of ``source`` (same class): its records and lists of
    records stay the same objects where ``source`` has as many, as eager's in-place update keeps them."""
    for name in fields_of(source):
        new, old = getattr(source, name), getattr(target, name, None)
        if is_record(new) and type(old) is type(new):
            assign(old, new)
        elif isinstance(new, list) and isinstance(old, list) and len(old) == len(new) and all(
                is_record(item) and type(item) is type(other) for item, other in zip(new, old)):
            for item, other in zip(new, old):
                assign(other, item)
        else:
            object.__setattr__(target, name, new)


def _states(leaves: list[Any]) -> list[Any]:
    """Each record's state (None for another leaf): its and its records' attributes, lists by their items."""
    return [[(name, value, list(value) if isinstance(value, list) else None)
             for record in records_within([leaf]) for name, value in vars(record).items()]
            if is_record(leaf) else None for leaf in leaves]


def _same(state: list, other: list) -> bool:
    """Whether two states hold the same objects (identity: a rebound attribute is a change)."""
    return len(state) == len(other) and all(
        name == name_2 and value is value_2 and (items is None) == (items_2 is None)
        and (items is None or len(items) == len(items_2) and all(a is b for a, b in zip(items, items_2)))
        for (name, value, items), (name_2, value_2, items_2) in zip(state, other))


__all__ = ["RecordUpdates", "assign"]
