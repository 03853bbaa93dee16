"""Whether a module call kept as one graph may read a state slot held by it or one of its submodules.

A call that dycl keeps as a call is traced into a sub-DNN: whatever module state it reads is
read once, at compile time. A state slot (``rewriter.state_table``) that such a call may read
makes the model refused (``rewriter.state_threading``). ``graph_may_read`` proves the common case
where it cannot: a plain attribute (``self.fc.calls``, set in ``__init__`` or by a hook) that no
code of the traced modules names, as ``nn.Linear.forward`` names only ``weight`` and ``bias``.

Guarantees: True (may read) for a submodule, and for an attribute whose name occurs among the
names loaded by any function of the modules' classes (their whole method resolution order but
``nn.Module`` itself), of their traced hooks, of functions set on the instances, or of the
functions outside torch that those name as globals; also where such code reads attributes by a
computed name (``getattr``, ``__dict__``, ``vars``) or, for a parameter or buffer, iterates over
them (``parameters()``, ``state_dict()``...). Assumes: the
traced code reaches module attributes only through those classes' functions and the hooks.
"""

from __future__ import annotations

import types
from collections.abc import Iterator

import torch
from dycl.rewriter.code_names import DYNAMIC_ACCESS, names_reached
from dycl.rewriter.hooks import forward_hooks

#: what reaches parameters and buffers without naming them
_ITERATION = frozenset({"_parameters", "_buffers", "parameters", "buffers", "named_parameters", "named_buffers",
                        "state_dict", "_apply", "apply", "_named_members"})


def graph_may_read(module: torch.nn.Module, owner: torch.nn.Module, attribute: str,
                   untraced: frozenset[int] = frozenset()) -> bool:
    """Whether tracing ``module(...)`` may read ``owner.attribute`` (``owner``: ``module`` or inside it);
    ``untraced``: ids of the modules whose hooks are written out, not traced (``rewriter.written_hooks``)."""
    if attribute in owner._modules:
        return True
    names = names_reached(function for inner in module.modules()
                          for function in _functions(inner, id(inner) in untraced))
    registered = attribute in owner._parameters or attribute in owner._buffers
    return attribute in names or bool(names & (DYNAMIC_ACCESS | (_ITERATION if registered else frozenset())))


def _functions(module: torch.nn.Module, hooks_untraced: bool) -> Iterator[types.FunctionType]:
    for cls in type(module).__mro__:
        if cls in (torch.nn.Module, object):
            continue
        for member in vars(cls).values():
            member = getattr(member, "__func__", member)  # staticmethod, classmethod
            if isinstance(member, property):
                yield from (f for f in (member.fget, member.fset) if isinstance(f, types.FunctionType))
            elif isinstance(member, types.FunctionType):
                yield member
    for member in vars(module).values():  # a forward set on the instance
        member = getattr(member, "__func__", member)
        if isinstance(member, types.FunctionType):
            yield member
    for hook in [] if hooks_untraced else forward_hooks(module):
        if isinstance(hook.target, types.FunctionType):
            yield hook.target


__all__ = ["graph_may_read"]
