"""dycl's own messages: the ``dycl`` logger and its children (``dycl.compile``, ...).

Assumes nothing about the application's logging set-up and changes none of it: the
``dycl`` logger gets a ``NullHandler`` (the library convention), so nothing is printed
unless the application configures logging, e.g.
``logging.basicConfig(level=logging.INFO)`` or
``logging.getLogger("dycl").setLevel(logging.DEBUG)`` with a handler of its own.
Levels: DEBUG for each stage and sub-DNN, INFO for what a user may want to know once
per compile (the exporter dycl chose, a compile-cache hit), WARNING only where a
Python warning would be noise (warnings that ask for action stay ``warnings.warn``).
``DYCL_DUMP=DIR`` (the stages' results as files) is separate and unchanged.
"""

from __future__ import annotations

import logging

ROOT = "dycl"
logging.getLogger(ROOT).addHandler(logging.NullHandler())


def get_logger(name: str = "") -> logging.Logger:
    """The ``dycl`` logger, or its child ``dycl.<name>``."""
    return logging.getLogger(f"{ROOT}.{name}" if name else ROOT)


__all__ = ["ROOT", "get_logger"]
