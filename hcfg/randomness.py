"""Which statements may draw random numbers, read from their text alone.

Constant hoisting (``hcfg.optimize``) computes an output once at compile time;
a statement that samples (``torch.randn``, ``x.cauchy_()``, ``F.dropout``) gives
a new value on every eager call, so its result must stay in the compiled graph.

Note: what counts as visible. ``may_be_random`` is False only when every call in
the statement is visible: a method of a local value (``h.expand(2, 4)``), a
builtin (``len``), or a function reached through a library module name
(``torch.zeros``, ``F.pad``, ``math.sqrt``); and no called name looks like a
sampler (``_SAMPLERS``, matched inside the name: ``randn_like``,
``log_normal_``) or comes from ``torch.nn.init``. A call of a submodule or a
helper (``self.noise()``, ``sample()``) may hide ``torch.randn`` and counts as
random. Wrongly random costs a hoisting; wrongly deterministic would return one
fixed sample forever — so every doubt answers True.

Assumes: the library names in ``_LIBRARIES`` are the modules they usually are.
"""

from __future__ import annotations

import builtins

import libcst as cst
from dycl.rewriter.walk import descendants

_SAMPLERS = ("rand", "normal", "bernoulli", "multinomial", "dropout", "poisson", "uniform", "exponential", "cauchy",
             "geometric", "rrelu", "gumbel", "sample", "fractional", "shuffle", "choice", "seed")
_LIBRARIES = frozenset({"torch", "F", "nn", "functional", "math", "np", "numpy", "operator"})


def may_be_random(stmt: cst.CSTNode, locals_: frozenset[str]) -> bool:
    """Whether running ``stmt`` may draw random numbers (see the module note)."""
    return any(isinstance(node, cst.Call) and _random_call(node.func, locals_) for node in descendants(stmt))


def _random_call(func: cst.BaseExpression, locals_: frozenset[str]) -> bool:
    path: list[str] = []
    root = func
    while isinstance(root, (cst.Attribute, cst.Subscript, cst.Call)):
        if isinstance(root, cst.Attribute):
            path.append(root.attr.value)
            root = root.value
        else:
            root = root.func if isinstance(root, cst.Call) else root.value
    if not isinstance(root, cst.Name):
        return True
    names = [root.value, *reversed(path)]
    if "init" in names[1:] or any(word in name.lower() for name in names for word in _SAMPLERS):
        return True
    if isinstance(func, cst.Name):
        return not (hasattr(builtins, func.value) and func.value not in locals_)
    return root.value not in locals_ and root.value not in _LIBRARIES


__all__ = ["may_be_random"]
