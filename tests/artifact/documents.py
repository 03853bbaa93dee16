"""Editing a parsed ``manifest.json`` for the validation tests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def set_field(document: dict[str, Any], path: Sequence[Any], value: Any) -> None:
    """Set the field at ``path`` (keys and list indices) to ``value``; ``KeyError`` as value deletes it."""
    *parents, last = path
    for key in parents:
        document = document[key]
    if value is KeyError:
        del document[last]
    else:
        document[last] = value
