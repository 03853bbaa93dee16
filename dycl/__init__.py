"""dycl: compile PyTorch networks with data-dependent control flow.

This release holds the program rewriter; compilation (``dycl.compile``),
the standalone host and the harness build on it.
"""

from rewriter import RewrittenFunction, rewrite
from rewriter.errors import SourceLocation, UnsupportedError

__version__ = "0.1.0"

__all__ = ["UnsupportedError", "SourceLocation", "RewrittenFunction", "rewrite", "__version__"]
