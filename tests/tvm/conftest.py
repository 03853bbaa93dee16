"""TVM is an optional extra (``pip install 'dycl[tvm]'``; ``make`` installs it with
the dev set): without it every test here is reported as skipped, with that reason."""

from __future__ import annotations

import importlib.util

import pytest

REASON = "the TVM backend needs the extra: pip install 'dycl[tvm]'"
MISSING = importlib.util.find_spec("tvm") is None


class _Skipped(pytest.Module):
    def collect(self):
        pytest.skip(REASON, allow_module_level=True)


def pytest_pycollect_makemodule(module_path, parent):
    if MISSING:
        return _Skipped.from_parent(parent, path=module_path)
    return None
