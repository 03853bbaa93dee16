"""Installing: TVM is an extra with a clear error when missing; nothing generic is
installed at top level (checked for real, non-editable, by the slow test)."""

from __future__ import annotations

import subprocess
import sys
import venv
from pathlib import Path

import pytest
import torch

import dycl

ROOT = Path(__file__).resolve().parents[2]


def test_tvm_backend_without_tvm_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "tvm", None)  # what an install without the extra looks like
    with pytest.raises(ImportError, match=r"pip install 'dycl\[tvm\]'"):
        dycl.compile(torch.nn.Linear(4, 4).eval(), torch.ones(1, 4), backend="tvm")


def test_tvm_tests_are_skipped_with_the_reason_when_tvm_is_missing(tmp_path):
    script = ("import sys, pytest; sys.modules['tvm'] = None; "
              "sys.exit(pytest.main(['-q', '-rs', '-p', 'no:cacheprovider', 'tests/tvm/test_tvm_backend.py']))")
    completed = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert completed.returncode in (0, 5), completed.stdout[-2000:]  # 5: nothing ran
    assert "the TVM backend needs the extra: pip install 'dycl[tvm]'" in completed.stdout
    assert " passed" not in completed.stdout and "1 skipped" in completed.stdout


@pytest.mark.slow
def test_a_real_install_puts_nothing_generic_at_top_level(tmp_path):
    """``pip install --no-deps .`` (not editable) into a fresh venv that sees the
    dependencies of this one: dycl imports, ``models``/``rewriter``/``hcfg``/``hostgen`` do not."""
    environment = tmp_path / "venv"
    venv.create(environment, with_pip=True, system_site_packages=False)
    python = environment / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True).stdout.strip()
    before = {path.name for path in Path(site).iterdir()}
    install = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps",
                              str(ROOT)], capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert install.returncode == 0, install.stderr[-3000:]
    added = sorted(path.name for path in Path(site).iterdir() if path.name not in before)
    assert added == ["dycl", "dycl-0.1.0.dist-info"], added
    packages = sorted(path.name for path in (Path(site) / "dycl").iterdir() if (path / "__init__.py").exists())
    assert {"rewriter", "hcfg", "hostgen", "backends"} <= set(packages)
    assert (Path(site) / "dycl" / "hostgen" / "artifact_check.py").exists()
