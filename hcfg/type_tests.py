"""Type tests that the explored states decide: ``isinstance(out, tuple)``, ``type(h) is
torch.Tensor``, ``state is None``, ``hasattr(out, "logits")``, the keys of a local dict
(``kwargs.get("mask") is None``, ``"mask" in kwargs``), a tensor's dtype (``x.dtype ==
torch.float16``, ``x.dtype in (...)``, ``x.is_floating_point()``, ``torch.is_complex(x)``,
``x.dtype.is_floating_point``), and ``and``/``or``/``not`` of them.

Note: why a type test on explored values is static. Exploration (``hcfg.build``) reaches
a statement in one state per structurally different way to get there (``hcfg.state``:
states merge only where every value has the same type, structure, shapes and dtypes).
The type and structure of a value a test reads are fixed on each such way: an input's
by the host's signature checks, a sub-DNN output's by its export (a graph returns the
structure it was exported with: an RNN's ``(output, h_n)`` is a tuple on every call), a
host value's by the host code that computed it on that path. So a type test that comes out
the same in every state comes out the same on every call, and only its branch is compiled;
the other branch is code no call reaches (running it on the example would fail: the
``else`` of ``isinstance(out, tuple)`` reads a tuple as a tensor).

Assumes: host code does not choose between values of different types on data within one
statement (an ``a if flag else b`` that the rewriter left as one expression); such a
choice would give the value the type of the example's choice in every state.
Where the states disagree, the test stays a condition of the HCFG (the host evaluates it)
but each state enters only the branch it takes there (as ``hcfg.state.PathFlags`` does for
flags): the other branch is not a way that state's calls can go.

Guarantees: ``type_test_outcomes`` gives outcomes only for a test made solely of the type
tests above (and what constant propagation left of it: ``True``/``False``), whose subjects
are local names holding, in every state, None, a tensor, a dtype (``d = x.dtype; d == torch.half``)
or a tuple/list/dict of those (values whose type is one of the facts above; a tensor's dtype is
one too: states merge only where dtypes agree, an input's dtype is checked by the host and a
sub-DNN output's is its export's; a dtype held by a name is one object per dtype, so states
holding different ones are not merged), whose other operands read no local name,
and which evaluates to a bool in every state; otherwise None.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import Any

import libcst as cst
import torch
from dycl.hcfg.pycode import compile_expression
from dycl.rewriter.walk import descendants

_TYPE_FUNCTIONS = {"isinstance": builtins.isinstance, "hasattr": builtins.hasattr}
_IDENTITY = (cst.Is, cst.IsNot, cst.Equal, cst.NotEqual)
_MEMBERSHIP = (cst.In, cst.NotIn)
#: a tensor's methods and torch's functions of one tensor that read its dtype only
_DTYPE_PREDICATES = frozenset({"is_floating_point", "is_complex", "is_signed"})
#: a dtype's attributes
_DTYPE_ATTRIBUTES = frozenset({"is_floating_point", "is_complex", "is_signed", "itemsize"})


def _structure(value: Any, inside: bool = False) -> bool:
    """A value whose type an input check or an export fixes: None, a tensor, a dtype, or a container
    of them; ``inside`` a container also a Python number or string (``return h, n``: a tuple on
    every call of the path that built it, whatever the number; its own type is not asked)."""
    if value is None or isinstance(value, (torch.Tensor, torch.dtype)):
        return True
    if inside and isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, (tuple, list)):
        return all(_structure(v, True) for v in value)
    if isinstance(value, dict):
        return all(_structure(v, True) for v in value.values())
    return False


class _Subjects:
    """Collects the local names a test asks the type of; None where the test is not a type test.
    A length test (``if parts:``, ``len(parts) > 0``) of a name in ``sized`` (lists whose length
    is a function of the path: ``hcfg.path_lengths``) is one too."""

    def __init__(self, local: frozenset[str], state: dict[str, Any], sized: frozenset[str] = frozenset()) -> None:
        self.local = local
        self.state = state
        self.sized = sized

    def length(self, node: cst.BaseExpression) -> set[str] | None:
        """``parts`` (its truth) or ``len(parts)`` of a name in ``sized``."""
        if isinstance(node, cst.Call) and self._builtin(node.func, "len") and len(node.args) == 1 \
                and not node.args[0].star and not node.args[0].keyword:
            node = node.args[0].value
        return {node.value} if isinstance(node, cst.Name) and node.value in self.sized else None

    def of(self, test: cst.BaseExpression) -> set[str] | None:
        if self.length(test):
            return self.length(test)
        if isinstance(test, cst.BooleanOperation):
            left, right = self.of(test.left), self.of(test.right)
            return None if left is None or right is None else left | right
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            return self.of(test.expression)
        if isinstance(test, cst.Name) and test.value in ("True", "False"):
            return set()  # what constant propagation left of a folded part (``isinstance(x, T) and True``)
        if isinstance(test, cst.Call):
            return self._call(test) if self._dtype_call(test) is None else self._dtype_call(test)
        if isinstance(test, cst.Attribute) and test.attr.value in _DTYPE_ATTRIBUTES:
            return self._dtype_of(test.value)  # x.dtype.is_floating_point
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
            return self._comparison(test.left, test.comparisons[0])
        return None

    def _subject(self, node: cst.BaseExpression) -> set[str] | None:
        return {node.value} if isinstance(node, cst.Name) and node.value in self.local else None

    def _static(self, node: cst.BaseExpression) -> bool:
        return not any(isinstance(n, cst.Name) and n.value in self.local for n in descendants(node))

    def _builtin(self, node: cst.BaseExpression, name: str) -> bool:
        return (isinstance(node, cst.Name) and node.value == name and node.value not in self.local
                and self.state.get(name, getattr(builtins, name)) is getattr(builtins, name))

    def _call(self, call: cst.Call) -> set[str] | None:
        function = next((name for name in _TYPE_FUNCTIONS if self._builtin(call.func, name)), None)
        if function is None or len(call.args) != 2 or any(a.star or a.keyword for a in call.args):
            return None
        if not self._static(call.args[1].value):
            return None
        return self._subject(call.args[0].value)

    def _dtype_of(self, node: cst.BaseExpression) -> set[str] | None:
        """``x.dtype`` of a local tensor ``x``, or a local ``d`` holding a dtype (``d = x.dtype``):
        the subject."""
        if isinstance(node, cst.Attribute) and node.attr.value == "dtype":
            return self._subject(node.value)
        if isinstance(node, cst.Name) and isinstance(self.state.get(node.value), torch.dtype):
            return self._subject(node)
        return None

    def _dtype_call(self, call: cst.Call) -> set[str] | None:
        """``x.is_floating_point()`` or ``torch.is_floating_point(x)`` (and the other predicates)."""
        func = call.func
        if not isinstance(func, cst.Attribute) or func.attr.value not in _DTYPE_PREDICATES:
            return None
        if not call.args:
            return self._subject(func.value)
        torch_module = isinstance(func.value, cst.Name) and self.state.get(func.value.value) is torch
        if torch_module and len(call.args) == 1 and not call.args[0].star and not call.args[0].keyword:
            return self._subject(call.args[0].value)
        return None

    def _keyed(self, node: cst.BaseExpression) -> set[str] | None:
        """``d.get("k")`` or ``d["k"]`` on a local dict (``**kwargs``): a subject whose presence
        and type the dict's keys and values fix."""
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "get" \
                and len(node.args) == 1 and isinstance(node.args[0].value, cst.SimpleString):
            base = node.func.value
        elif isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(
                node.slice[0].slice, cst.Index) and isinstance(node.slice[0].slice.value, cst.SimpleString):
            base = node.value
        else:
            return None
        subject = self._subject(base)
        return subject if subject and isinstance(self.state.get(base.value), dict) else None

    def _comparison(self, left: cst.BaseExpression, target: cst.ComparisonTarget) -> set[str] | None:
        for sized, other in ((left, target.comparator), (target.comparator, left)):
            if isinstance(sized, cst.Call) and self.length(sized) and self._static(other):
                return self.length(sized)  # len(parts) > 0
        dtype = self._dtype_of(left) or self._dtype_of(target.comparator)
        if dtype and isinstance(target.operator, _IDENTITY + _MEMBERSHIP):  # x.dtype == torch.float16
            other = target.comparator if self._dtype_of(left) else left
            return dtype if self._static(other) else None
        if isinstance(target.operator, (cst.In, cst.NotIn)) and isinstance(left, cst.SimpleString):
            subject = self._subject(target.comparator)  # "k" in kwargs
            return subject if subject and isinstance(self.state.get(target.comparator.value), dict) else None
        if not isinstance(target.operator, _IDENTITY):
            return None
        right = target.comparator
        if isinstance(target.operator, (cst.Is, cst.IsNot)):
            for subject, other in ((left, right), (right, left)):
                if isinstance(other, cst.Name) and other.value == "None":
                    found = self._subject(subject) or self._keyed(subject)
                    if found:
                        return found
        if (isinstance(left, cst.Call) and self._builtin(left.func, "type") and len(left.args) == 1
                and not left.args[0].star and self._static(right)):
            return self._subject(left.args[0].value)
        return None


class TypeTestEvaluator:
    """Evaluates a test in a state (each expression compiled once): the ``evaluate`` of
    ``type_test_outcomes`` for a walk that has none of its own."""

    def __init__(self) -> None:
        self._code: dict[int, tuple[cst.BaseExpression, Any]] = {}

    def __call__(self, test: cst.BaseExpression, state: dict[str, Any]) -> Any:
        node, code = self._code.get(id(test), (None, None))
        if node is not test:
            code = compile_expression(test, "<dycl-type-test>")
            self._code[id(test)] = (test, code)
        try:
            return eval(code, dict(state))  # noqa: S307 - the rewritten function's own test, explicit namespace
        except Exception:  # noqa: BLE001 - not decided here: the test stays a condition
            return None


def _outcome(test: cst.BaseExpression, state: dict[str, Any], local: frozenset[str],
             evaluate: Callable[[cst.BaseExpression, dict[str, Any]], Any],
             sized: frozenset[str] = frozenset()) -> bool | None:
    """``test``'s value in ``state`` as far as its type tests decide it: a type test's value;
    ``a and b`` False where a decided part is False, ``a or b`` True where one is True; None
    where a part the states do not decide (a tensor test) settles it."""
    if isinstance(test, cst.BooleanOperation):
        left, right = (_outcome(part, state, local, evaluate, sized) for part in (test.left, test.right))
        stop = isinstance(test.operator, cst.Or)  # the value that settles the operation
        if left is stop or right is stop:
            return stop
        return (not stop) if left is not None and right is not None else None
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = _outcome(test.expression, state, local, evaluate, sized)
        return None if inner is None else not inner
    subjects = _Subjects(local, state, sized)
    names = subjects.of(test)
    if names is None or not all(name in state and (_structure(state[name]) or (
            name in sized and isinstance(state[name], (list, tuple)))) for name in names):
        return None
    value = evaluate(test, state)
    if subjects.length(test) and isinstance(value, (list, tuple, int)) and not isinstance(value, bool):
        value = bool(value)  # ``if parts:``, ``if len(parts):``: the test is the value's truth
    return value if isinstance(value, bool) else None


def type_test_outcomes(test: cst.BaseExpression, states: list[dict[str, Any]], local: frozenset[str],
                       evaluate: Callable[[cst.BaseExpression, dict[str, Any]], Any],
                       sized: frozenset[str] = frozenset()) -> list[bool | None] | None:
    """Per state, the value its type tests give ``test`` (True/False), or None where they do
    not decide it (see the module note): a state whose value is decided takes only that
    branch. None where no state's is. ``evaluate`` gives an expression's value in a state
    (any non-bool for one it could not evaluate); ``sized``: names whose length tests are
    type tests (``hcfg.path_lengths``)."""
    outcomes = [_outcome(test, state, local, evaluate, sized) for state in states]
    return outcomes if any(o is not None for o in outcomes) else None


def decided_type_test(test: cst.BaseExpression, states: list[dict[str, Any]], local: frozenset[str],
                      evaluate: Callable[[cst.BaseExpression, dict[str, Any]], Any],
                      sized: frozenset[str] = frozenset()) -> bool | None:
    """The value of ``test`` where it is the same in every state (``type_test_outcomes``):
    every call takes that branch, so the ``if`` is dropped. None otherwise."""
    outcomes = type_test_outcomes(test, states, local, evaluate, sized)
    return outcomes[0] if outcomes and outcomes[0] is not None and len(set(outcomes)) == 1 else None


__all__ = ["TypeTestEvaluator", "decided_type_test", "type_test_outcomes"]
