"""The slow part of the real-world corpus runs only with ``DYCL_SLOW=1``
(``DYCL_SLOW=1 python -m pytest tests/realworld``); the fast subset always runs."""

from __future__ import annotations

import os

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: a long real-world case; runs only with DYCL_SLOW=1")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("DYCL_SLOW") == "1":
        return
    skip = pytest.mark.skip(reason="slow real-world case: run with DYCL_SLOW=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
