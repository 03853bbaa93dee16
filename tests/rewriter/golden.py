"""What the golden before/after tests of rewriter passes compare: a pass's output for a model's
``forward`` and the expected text, both without location comments or surrounding indentation."""

from __future__ import annotations

import textwrap

import torch.nn as nn

from dycl import rewriter


def after(model: nn.Module, pass_name: str) -> str:
    """The root function's body after ``pass_name``, without location comments."""
    result = rewriter.rewrite(model, debug=True)
    sources = [src for name, qualname, src in result.trace
               if name == pass_name and qualname == f"{type(model).__qualname__}.forward"]
    assert sources, f"no trace for {pass_name}"
    return result.locations.strip(sources[-1]).strip() + "\n"


def golden(text: str) -> str:
    """``text`` as a golden snippet: dedented, one trailing newline."""
    return textwrap.dedent(text).strip() + "\n"
