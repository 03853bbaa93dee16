"""The slow part of the real-world corpus runs with ``make test-slow`` (``-m slow``) or
``DYCL_SLOW=1`` (``DYCL_SLOW=1 python -m pytest tests/realworld``); the fast subset always runs.
Only this folder's cases are affected."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: a long real-world case; runs only with DYCL_SLOW=1")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("DYCL_SLOW") == "1" or config.getoption("markexpr") == "slow":
        return
    here = Path(__file__).parent
    skip = pytest.mark.skip(reason="slow real-world case: run with make test-slow or DYCL_SLOW=1")
    for item in items:
        if "slow" in item.keywords and here in Path(item.path).parents:
            item.add_marker(skip)
