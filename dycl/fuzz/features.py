"""Which features of ``generator.FEATURES`` a program uses, read off the program itself.

Features are recognised in the rendered source (and the program's flags for what the
source does not show, such as train mode), so the answer stays right for a program the
shrinker has cut down, and a campaign can report the share of programs using each one.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from dycl.fuzz.program import Program, render_classes

_WRITE = r"\[[^\]\n]*\]\s*(?:[-+*]?=)(?!=)"
_SOURCE_PATTERNS = {
    "item-arith": r"x - x\.mean\(\)\.item\(\) \* 0\.5",
    "list-read": r"outs\[0\] \* 0\.1|outs\[-1\]\[:1\]",
    "int-counter": r"n \+= int\(",
    "batch-resize": r"torch\.cat\(\[x, x \* 0\.5\], 0\)\[:3\]|x = x\[:1\]",
    "dict-mutation": rf"\b(?:cfg|opts)(?:\.(?:update|setdefault|pop|clear)\(|{_WRITE}| \|= )|del (?:cfg|opts)\[",
    "list-mutation": (rf"\b(?:vals|view)(?:\.(?:append|extend|insert|pop|remove|clear|sort|reverse)\(|{_WRITE}"
                      r"| \+= )|del (?:vals|view)\["),
    "set-mutation": r"\bseen(?:\.(?:add|discard)\(| \|= )",
    "alias": rf"^\s*(?:view = vals|opts = cfg)$(?s:.*)\b(?:view|opts)(?:\.\w+\(|{_WRITE}| \|= | \+= )",
    "item-write": rf"\b(?:cfg|opts|vals|view){_WRITE}",
    "del": r"^\s*del ",
    "self-container": r"self\.(?:table|config|stats|history)\b",
    "buffer-update": r"self\.(?:count|running)\.\w+_\(|out=self\.|self\.count \+= |buf\.\w+_\(",
    "swapped-forward": r"self\.forward = ",
    "kwargs-callee": r"\*\*kwargs\):",
    "decorator": r"^\s*@(?:halve|squash)$",
    "tensor-data": r"\.data\.",
}
_FLAGS: dict[str, Callable[[Program], bool]] = {
    "item-return": lambda p: "item" in p.returns,
    "list-return": lambda p: "outs" in p.returns,
    "nested-exit": lambda p: p.gate_body is not None and p.gate_inner is not None,
    "train-mode": lambda p: p.train,
    "library": lambda p: bool(p.library),
}


def program_features(program: Program) -> frozenset[str]:
    """The names of the features ``program`` uses."""
    source = render_classes(program)
    found = {name for name, pattern in _SOURCE_PATTERNS.items() if re.search(pattern, source, re.MULTILINE)}
    return frozenset(found | {name for name, used in _FLAGS.items() if used(program)})
