"""The legacy hook-based ``torch.nn.utils.weight_norm``, refused at the line that calls the module.

``weight_norm(nn.Conv1d(...))`` (fairseq, HiFi-GAN, WaveNet vocoders) registers a ``WeightNorm``
forward pre-hook, a callable instance that recomputes ``weight = g * v / ||v||`` and stores it on
the module before every call. dycl cannot read such a hook as code, so it is refused; this module
makes the refusal useful: it names the user's line that calls the module (its parent's forward
mentioning the attribute that holds it) and says how to write the same model so that it compiles.

Assumes: the module is reached from its parent as ``self.<name>`` (or ``self.<list>[i]``); where no
such line is found, the parent's ``forward`` definition is named instead (None without source).
"""

from __future__ import annotations

import inspect
import re

import torch
from dycl.rewriter.errors import SourceLocation, UnsupportedError
from torch.nn.utils.weight_norm import WeightNorm

_HINT = ("use torch.nn.utils.parametrizations.weight_norm (which dycl compiles, the weight guard watching "
         "original0/original1), or for inference fold the weight first: torch.nn.utils.remove_weight_norm(module)")


def is_legacy_weight_norm(hook_function: object) -> bool:
    """Whether a forward pre-hook is the one ``torch.nn.utils.weight_norm`` registers."""
    return isinstance(hook_function, WeightNorm)


def legacy_weight_norm_error(model: torch.nn.Module, prefix: str) -> UnsupportedError:
    """The refusal for the weight-normed submodule ``prefix`` of ``model``, at the line calling it."""
    module = model.get_submodule(prefix)
    return UnsupportedError(f"the legacy torch.nn.utils.weight_norm on submodule {prefix!r} "
                            f"({type(module).__qualname__}): its forward pre-hook WeightNorm recomputes and stores "
                            "the weight on every call, which dycl does not compile", _call_site(model, prefix), _HINT)


def _call_site(model: torch.nn.Module, prefix: str) -> SourceLocation | None:
    """The first line of the parent's forward that mentions ``self.<attribute>`` holding ``prefix``."""
    parts = prefix.split(".")
    while len(parts) > 1 and parts[-1].isdigit():  # an item of a ModuleList/Sequential: the container's name
        parts.pop()
    attribute, parent = parts[-1], model.get_submodule(".".join(parts[:-1]))
    try:
        forward = inspect.unwrap(type(parent).forward)
        lines, first = inspect.getsourcelines(forward)
        path = inspect.getsourcefile(forward)
    except (OSError, TypeError):
        return None
    if path is None:
        return None
    mention = re.compile(rf"\bself\.{re.escape(attribute)}\b")
    for offset, text in enumerate(lines):
        if mention.search(text) and not text.lstrip().startswith("#"):
            return SourceLocation(path, first + offset)
    return SourceLocation(path, first)
