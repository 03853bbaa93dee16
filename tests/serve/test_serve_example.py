"""``notebooks/serve_per_sample.py`` runs as the README documents it: ``build``
compiles and saves, then ``serve`` — in a process where importing torch or dycl
fails — serves the saved artifact and prints responses equal to eager, batched.
Skipped without the serve extra; slow (a compile and a Ray start)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("ray.serve", reason="Ray Serve is not installed (the serve extra): run `make test-serve`, "
                                        "or pip install -c constraints.txt -e '.[serve]'")

EXAMPLE = Path(__file__).resolve().parents[2] / "notebooks" / "serve_per_sample.py"
WITHOUT_TORCH = ("import runpy, sys; sys.modules['torch'] = None; sys.modules['dycl'] = None; "
                 "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')")


def _run(*args: str) -> str:
    done = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.mark.slow
def test_build_then_serve_without_torch(tmp_path):
    assert "saved" in _run(str(EXAMPLE), "build", str(tmp_path))
    assert (tmp_path / "artifact" / "host.py").is_file()

    printed = _run("-c", WITHOUT_TORCH, str(EXAMPLE), "serve", str(tmp_path))
    found = re.search(r"32 concurrent requests -> batches of \[([\d, ]+)\]; max \|served - eager alone\| = (\S+);"
                      r".*imported in the replica: no", printed)
    assert found, printed
    sizes = [int(size) for size in found.group(1).split(",")]
    assert sum(sizes) == 32 and max(sizes) > 1, sizes
    assert float(found.group(2)) <= 1e-4
