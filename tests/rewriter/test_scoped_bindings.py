"""A context variable set before a ``try`` and reset in its ``finally`` (``rewriter.scoped_bindings``).

transformers' ``@capture_outputs`` binds its dict of collected outputs this way around the
model's forward. The block compiles to its body, each ``get()`` inside it reading the bound
object, and the ``set``/``reset`` pair is gone from the compiled program; where the source does
not prove the binding (a handler, a token that escapes, the value rebound), the block is left
as written.
"""

from __future__ import annotations

import contextvars
import textwrap

import libcst as cst
import pytest
from dycl.rewriter.scoped_bindings import SCOPED_READ, fold_scoped_bindings, is_scoped_variable
from golden import after, golden
from rewrite_checks import build, randn_inputs
from test_containers import check_compiled
from torch import nn

from dycl import rewriter

_collector: contextvars.ContextVar = contextvars.ContextVar("collector", default=None)


class _Wrapped:
    """A wrapper around a ContextVar (as transformers' ``CompileableContextVar``)."""

    def __init__(self) -> None:
        self.context_var = contextvars.ContextVar("wrapped", default=None)

    def get(self):
        return self.context_var.get()

    def set(self, value):
        return self.context_var.set(value)

    def reset(self, token):
        self.context_var.reset(token)


_wrapped = _Wrapped()


class CollectsThroughAContextVar(nn.Module):
    """Features collected through a context variable bound around the blocks, as a library's
    output capturing does; the sum of what was collected decides a branch."""

    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(8, 8) for _ in range(2)])
        self.head = nn.Linear(8, 4)

    def forward(self, x):
        collected = []
        token = _collector.set(collected)
        try:
            for block in self.blocks:
                x = block(x)
                _collector.get().append(x)
        finally:
            _collector.reset(token)
        if collected[0].sum() > 0:
            return self.head(x)
        return self.head(collected[0]) * 2


class WrappedVariable(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        seen = []
        token = _wrapped.set(seen)
        try:
            h = self.fc(x)
            _wrapped.get().append(h)
        finally:
            _wrapped.reset(token)
        if seen[0].mean() > 0:
            return h * 2
        return -h


def _folded(source: str, fn_globals: dict) -> str:
    definition = cst.parse_module(textwrap.dedent(source)).body[0]
    return cst.Module(body=[fold_scoped_bindings(definition, fn_globals)[0]]).code


def test_the_binding_becomes_its_body_with_each_get_the_bound_object():
    before = '''
    def forward(self, x):
        collected = {"hidden": []}
        token = _collector.set(collected)
        try:
            y = self.fc(x)
            _collector.get()["hidden"].append(y)
        finally:
            _collector.reset(token)
        return y
    '''
    assert _folded(before, {"_collector": _collector}) == golden('''
    def forward(self, x):
        collected = {"hidden": []}
        y = self.fc(x)
        collected["hidden"].append(y)
        return y
    ''')


def test_a_binding_the_source_does_not_prove_is_left_as_written():
    fn_globals = {"_collector": _collector}
    handler = '''
    def forward(self, x):
        token = _collector.set(seen)
        try:
            y = x
        except ValueError:
            y = -x
        finally:
            _collector.reset(token)
        return y
    '''
    escaping_token = handler.replace("except ValueError:\n            y = -x\n        ", "").replace(
        "return y", "return y, token")
    rebound = handler.replace("except ValueError:\n            y = -x\n        ", "").replace(
        "y = x", "seen = []\n            y = x")
    passed_on = handler.replace("except ValueError:\n            y = -x\n        ", "").replace(
        "y = x", "y = run(_collector, x)")
    for source in (handler, escaping_token, rebound, passed_on):
        assert _folded(source, fn_globals) == golden(source), source
    local = handler.replace("except ValueError:\n            y = -x\n        ", "")
    assert _folded(local, {}) == golden(local)  # not a global: nothing proves what it is


def test_scoped_variables_are_context_vars_and_their_wrappers():
    assert is_scoped_variable(_collector) and is_scoped_variable(_wrapped)
    assert not is_scoped_variable({}) and not is_scoped_variable(nn.Linear(2, 2))


def test_the_set_and_reset_are_gone_from_the_rewritten_forward():
    source = after(build(CollectsThroughAContextVar), "constprop")
    assert "_collector" not in source and "token" not in source


def test_outputs_collected_through_a_context_variable_agree_with_eager(tmp_path):
    inputs = randn_inputs(2, 8, count=20, seed=3)
    assert check_compiled(build(CollectsThroughAContextVar), inputs, 2, tmp_path) == 2


def test_a_wrapped_context_variable_agrees_with_eager(tmp_path):
    inputs = randn_inputs(2, 8, count=20, seed=5)
    assert check_compiled(build(WrappedVariable), inputs, 2, tmp_path) == 2


def _doubled_while_collecting(module, args, output):
    return output * 2 if _collector.get() is not None else output


class ReadsInAHelper(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def _step(self, x):
        h = self.fc(x)
        _collector.get().append(h)
        return h

    def forward(self, x):
        seen = []
        token = _collector.set(seen)
        try:
            h = self._step(x)
        finally:
            _collector.reset(token)
        if seen[0].sum() > 0:
            return h
        return -h


def test_a_read_of_the_folded_variable_outside_its_block_is_refused():
    """A helper reading the variable, and a hook on a submodule reading it (as transformers'
    output-capturing hooks do; this one changes the output while the variable is bound), would
    see its value outside the block: refused, named."""
    with pytest.raises(rewriter.UnsupportedError) as caught:
        rewriter.rewrite(build(ReadsInAHelper))
    assert SCOPED_READ in str(caught.value) and "_step" in str(caught.value)
    model = build(CollectsThroughAContextVar)
    model.blocks[0].register_forward_hook(_doubled_while_collecting)
    with pytest.raises(rewriter.UnsupportedError) as caught:
        rewriter.rewrite(model)
    assert SCOPED_READ in str(caught.value) and "_doubled_while_collecting" in str(caught.value)
