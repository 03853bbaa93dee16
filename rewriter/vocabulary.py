"""Method and attribute names that the rewriter, the HCFG builder and the
backends classify the same way: which calls change a container, which reads
of a tensor see only its metadata; and how a dtype is named.

Guarantees: strings only — no torch, no libcst imports — so every package (hostgen
included) may import it. Each set is what Python or torch defines, not what
one user of it needs; a user that needs less says so where it subtracts.
"""

from __future__ import annotations

from typing import Any

# -- containers ------------------------------------------------------------------------------------

LIST_MUTATORS = frozenset({"append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse"})
DICT_MUTATORS = frozenset({"update", "setdefault", "popitem", "pop", "clear"})
SET_MUTATORS = frozenset({"add", "discard", "remove", "pop", "clear", "update", "difference_update",
                          "intersection_update", "symmetric_difference_update"})
#: Every method of a list, dict or set that changes it.
CONTAINER_MUTATORS = LIST_MUTATORS | DICT_MUTATORS | SET_MUTATORS
#: The special methods behind ``c[k] = v``, ``del c[k]`` and the in-place operators.
IN_PLACE_SPECIAL_METHODS = frozenset({"__setitem__", "__delitem__", "__iadd__", "__imul__", "__ior__", "__iand__",
                                      "__isub__", "__ixor__"})
MUTATING_METHODS = CONTAINER_MUTATORS | IN_PLACE_SPECIAL_METHODS
#: Mutators whose receiver keeps the argument itself (not only its elements).
STORING_METHODS = frozenset({"append", "insert", "setdefault", "add", "__setitem__", "__iadd__"})
#: Mutators whose receiver keeps the argument's elements.
COPYING_METHODS = frozenset({"extend", "update"})
#: Methods of a container that neither change nor keep it (their result may share its elements).
READING_METHODS = frozenset({"get", "keys", "values", "items", "copy", "index", "count", "__len__", "__contains__",
                             "__getitem__", "union", "intersection", "difference", "symmetric_difference",
                             "issubset", "issuperset", "isdisjoint"})
#: Container mutators that ``torch.Tensor`` also has, as methods returning a new tensor
#: (``t.add(1)``, ``t.sort()``): on a value that may be a tensor they are no write.
TENSOR_NAMESAKES = frozenset({"add", "sort"})

# -- tensor metadata -------------------------------------------------------------------------------

TENSOR_SHAPE_ATTRIBUTES = frozenset({"shape", "ndim"})
TENSOR_SHAPE_METHODS = frozenset({"size", "dim", "numel", "ndimension"})
TENSOR_TYPE_ATTRIBUTES = frozenset({"dtype", "device"})
TENSOR_FLAG_ATTRIBUTES = frozenset({"requires_grad", "is_cuda"})
#: Attributes of a tensor that do not depend on its values.
TENSOR_METADATA_ATTRIBUTES = TENSOR_SHAPE_ATTRIBUTES | TENSOR_TYPE_ATTRIBUTES | TENSOR_FLAG_ATTRIBUTES
#: Methods of a tensor whose result does not depend on its values.
TENSOR_METADATA_METHODS = TENSOR_SHAPE_METHODS


# -- dtypes ------------------------------------------------------------------------------------------


def dtype_name(dtype: Any) -> str:
    """A ``torch.dtype``'s name as manifests and ports write it (``float32``), without importing torch."""
    return str(dtype).removeprefix("torch.")
