"""Data-dependent Python decisions made while a sub-DNN runs.

A sub-DNN is exported as one fixed graph, so every Python value it computes
from tensor *values* is frozen at the example's value: ``bool(t)`` (an ``if``
on a tensor inside a library function or an opaque helper), ``t.item()``,
``int(t)``/``float(t)``, ``range(t)`` (``__index__``), ``t.tolist()``,
``t.numpy()``, ``torch.equal``. The builder already moves such conversions out
of the statements it sees (``HCFGBuilder.split_conversions``); what remains
happens inside code dycl did not rewrite.

``DecisionRecorder`` is a ``TorchFunctionMode`` that watches one sub-DNN's run on
an example and records each such read with the Python frame that asked for it
(the innermost frame outside torch: the user's or the library's file:line).
It records and never raises, so the code runs exactly as in eager mode (a
library's ``try``/``except`` cannot swallow the finding); the caller decides. A read made
in an installed library also records the library functions on the stack between the code
that entered the mode and the read (``Decision.library_code``): what dycl follows to rewrite
that decision (``dycl.model.library_decisions``); the refusal carries them
(``FrozenDecisionError``).

Shape reads (``x.size(0)``, iterating a tensor) are not value reads in eager
mode; while the TorchScript exporter traces, shapes are tensors, and the same
recorder run around the export sees ``range(x.shape[0])`` (``__index__``) too
(``dycl.backends.onnx_export``).

Note: why reads of values from data are followed into torch. Around an export the
recorder ignores torch's own reads (torch reads shape tensors for its own checks),
but a number the host computed from data (``i = int(x.mean() > 0)``) enters the
export as a 0-d tensor, and torch's code may be the one that reads it:
``self.heads[i]`` reads it in ``ModuleList.__getitem__`` (``operator.index``),
``f"head{i}"`` in ``Tensor.__format__`` (``.item()``). So the recorder takes
``sources`` (those tensors) and follows them through every torch function: a read
of a source or of a value computed from one (not of its shape) is recorded as
``from_data`` whoever makes it, user, library or torch.
"""

from __future__ import annotations

import os
import sys
import types
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch
from dycl.hcfg.traced_shapes import reads_only_shapes
from dycl.rewriter.errors import SourceLocation, UnsupportedError
from dycl.rewriter.user_code import followable, library_callers
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten

#: Tensor methods and torch functions that hand a tensor's value to Python
VALUE_READS = frozenset({"__bool__", "item", "__int__", "__float__", "__index__", "__complex__", "tolist",
                         "numpy", "__array__", "__contains__", "equal", "allclose", "is_nonzero",
                         "__format__"})
#: what a value computed from a source keeps of it: its shape only (``hcfg.decisions`` note)
_SHAPE_ONLY = frozenset({"size", "dim", "numel", "nelement", "ndimension", "__len__", "stride"})

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_THIS_FILE = __file__
#: a module that sets this global to True is dycl's stand-in for the code that calls it (``SizeNumbers``):
#: a read it makes is said to be made at its caller's line
SEEN_AT_CALLER = "DYCL_DECISIONS_SEEN_AT_CALLER"


@dataclass(frozen=True)
class Decision:
    """One tensor value read by Python: ``what`` (``bool()``, ``.item()``, ...) at ``where``;
    ``shape_only``: read while the TorchScript tracer ran, of a value computed from
    shapes and constants only (``hcfg.traced_shapes``); ``library_code``: where ``where``
    is an installed library's line, the library functions on the stack that lead to it."""

    what: str
    where: SourceLocation | None
    from_data: bool = False
    shape_only: bool = False
    library_code: frozenset[types.CodeType] = frozenset()


class FrozenDecisionError(UnsupportedError):
    """A refused read of a tensor value inside a traced graph; ``library_code``: the library
    functions that lead to it (``Decision.library_code``), which a compile may follow."""

    def __init__(self, construct: str, location: SourceLocation | None, hint: str = "",
                 library_code: frozenset[types.CodeType] = frozenset()) -> None:
        super().__init__(construct, location, hint)
        self.library_code = library_code


def _describe(name: str) -> str:
    dunder = {"__bool__": "bool()", "__int__": "int()", "__float__": "float()", "__index__": "an index (range(), "
              "list index, shape argument)", "__complex__": "complex()", "__array__": "numpy.asarray()",
              "__contains__": "`in`", "__format__": "format() (an f-string)"}
    return dunder.get(name, f".{name}()" if name in {"item", "tolist", "numpy"} else f"torch.{name}()")


def _caller(inside_torch: bool) -> SourceLocation | None:
    """The innermost frame that is neither torch nor this module; None if the read
    is torch's own (its immediate caller is in torch) and ``inside_torch`` is False."""
    frame = sys._getframe(2)
    while frame is not None:
        path = frame.f_code.co_filename
        if path.startswith(_TORCH_DIR) and not inside_torch:
            return None
        if (not path.startswith(_TORCH_DIR) and path != _THIS_FILE
                and frame.f_globals.get(SEEN_AT_CALLER) is not True):
            return SourceLocation(path, frame.f_lineno)
        frame = frame.f_back
    return None


class DecisionRecorder(TorchFunctionMode):
    """Records every tensor value that Python code reads while the mode is active.

    ``inside_torch=False`` ignores reads made by torch's own code: while an exporter
    traces, torch reads tensors for its own bookkeeping (and shapes are tensors then),
    except reads of ``sources`` and of values computed from them (see the module note)."""

    def __init__(self, inside_torch: bool = True, sources: Iterable[torch.Tensor] = ()) -> None:
        super().__init__()
        self.inside_torch = inside_torch
        self.decisions: list[Decision] = []
        # (tensor, its version, the bool it gave): kept alive so that ids are not reused
        self._decided: list[tuple[torch.Tensor, int, bool]] = []
        self._from_data: weakref.WeakValueDictionary[int, torch.Tensor] = weakref.WeakValueDictionary()
        self._follow(sources)
        self._outer: types.FrameType | None = None  # the frame that entered the mode

    def __enter__(self):
        self._outer = sys._getframe(1)
        return super().__enter__()

    def __exit__(self, *exc_info):
        self._outer = None  # no frame kept alive past the run
        return super().__exit__(*exc_info)

    def _follow(self, values: Iterable) -> None:
        for value in values:
            if isinstance(value, torch.Tensor):
                self._from_data[id(value)] = value

    def _reads_data(self, args: tuple, kwargs: dict) -> bool:
        leaves, _ = tree_flatten((args, kwargs))
        return any(isinstance(a, torch.Tensor) and self._from_data.get(id(a)) is a for a in leaves)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        from_data = bool(self._from_data) and self._reads_data(args, kwargs)
        if name not in VALUE_READS or not any(isinstance(a, torch.Tensor) for a in args):
            result = func(*args, **kwargs)
        else:
            where = _caller(self.inside_torch or from_data)
            result = func(*args, **kwargs)
            if ((where is not None or self.inside_torch or from_data)
                    and not self._repeats_a_decision(name, args[0], result)):
                self.decisions.append(Decision(_describe(name), where, from_data, reads_only_shapes(args[0]),
                                               self._library_code(where)))
            if name == "__bool__" and isinstance(args[0], torch.Tensor):
                self._decided.append((args[0], args[0]._version, bool(result)))
        if from_data and name not in _SHAPE_ONLY and not _is_shape(func):
            self._follow(tree_flatten(result)[0])
        return result

    def _library_code(self, where: SourceLocation | None) -> frozenset[types.CodeType]:
        if where is None or self._outer is None or not followable(where.path):
            return frozenset()
        return library_callers(sys._getframe(2), self._outer)

    def _repeats_a_decision(self, name: str, tensor: Any, result: Any) -> bool:
        """Whether ``tensor.item()`` reads a bool this recorder already saw decided by
        ``bool()`` of the same, unchanged tensor (transformers' ``is_causal = q_len > 1
        and ...`` then ``is_causal.item()`` while tracing): no new decision."""
        if name != "item" or not isinstance(result, bool):
            return False
        return any(seen is tensor and version == tensor._version and outcome == result
                   for seen, version, outcome in self._decided)


def _is_shape(func) -> bool:
    """``Tensor.shape`` (a property read: its ``__get__``)."""
    return getattr(func, "__name__", "") == "__get__" and getattr(getattr(func, "__self__", None),
                                                                  "__name__", "") == "shape"
