"""Golden snippets: hooks that write state, written out at the call of their module
(``rewriter.written_hooks``), and the attribute writes a hook spells as calls
(``rewriter.attribute_updates``). Their equivalence with eager, in process and through the host,
is tested in ``tests/state/test_hooks_with_state.py``."""

from __future__ import annotations

import libcst as cst
import torch
import torch.nn as nn
from dycl.rewriter.attribute_updates import attribute_updates

from tests.rewriter.golden import after, golden


def count_calls(module, args, output):
    module.calls += 1


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.fc.calls = 0
        self.fc.register_forward_pre_hook(lambda m, args: (args[0] * 2,))
        self.fc.register_forward_hook(count_calls)

    def forward(self, x):
        h = torch.relu(self.fc(x))
        if h.mean() > 0:
            return h
        return -h


def test_hooks_written_out_around_forward_and_inlined():
    assert after(Net(), "inline") == golden("""
        args = (x,)
        hook_result = ((args[0] * 2,))
        hook_args = (x,) if hook_result is None else hook_result if isinstance(hook_result, tuple) else (hook_result,)
        (hook_arg,) = hook_args
        hook_out = self.fc.forward(hook_arg)
        args_1 = (hook_arg,)
        self.fc.calls += 1
        hook_result_1 = None
        hook_out_1 = hook_out if hook_result_1 is None else hook_result_1
        out = hook_out_1
        h = torch.relu(out)
        if h.mean() > 0:
            return h
        return -h
    """)


def test_a_hook_returning_none_leaves_the_output():
    assert after(Net(), "constprop") == golden("""
        args = (x,)
        hook_result = ((args[0] * 2,))
        hook_args = (x,) if hook_result is None else hook_result if isinstance(hook_result, tuple) else (hook_result,)
        (hook_arg,) = hook_args
        hook_out = self.fc.forward(hook_arg)
        self.fc.calls += 1
        hook_out_1 = hook_out
        out = hook_out_1
        h = torch.relu(out)
        if h.mean() > 0:
            return h
        return -h
    """)


def _updated(source: str) -> str:
    definition = cst.parse_module(golden(source)).body[0]
    return cst.Module([attribute_updates(definition, "m")]).code


def test_setattr_and_dict_update_of_the_receiver_become_assignments():
    assert _updated("""
        def hook(m, i, o):
            setattr(m, "last", o.detach())
            return m.__dict__.update(peak=o.max(), seen=True)
    """) == golden("""
        def hook(m, i, o):
            m.last = o.detach()
            m.peak = o.max()
            m.seen = True
            return None
    """)


def test_other_calls_stay():
    source = """
        def hook(m, i, o):
            setattr(other, "last", o)
            m.__dict__.update({"last": o})
            m.__dict__.update(a=m.b, b=o)
            return setattr(m, name, o)
    """
    assert _updated(source) == golden(source)
