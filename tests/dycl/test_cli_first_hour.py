"""The command line as a new user meets it (issue 31): outside the checkout, mistakes
named before any work, progress and noise while timing. Run through ``subprocess``."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dycl", *args], capture_output=True, text=True, timeout=300,
                          cwd=cwd or ROOT, env={**os.environ, **(env or {})})


def test_outside_the_checkout_a_zoo_model_gets_a_hint(tmp_path):
    done = run("check", "models.sdn_vgg19", "-n", "2", cwd=tmp_path)
    assert done.returncode == 1
    [line] = done.stderr.strip().splitlines()
    assert "No module named 'models'" in line and "models/ folder of dycl's checkout" in line
    assert "path/to/net.py:build" in line and not list(tmp_path.iterdir())


def test_a_file_path_names_a_factory_from_anywhere(tmp_path):
    net = tmp_path / "net.py"
    net.write_text("import torch\n\n"
                   "class Net(torch.nn.Module):\n"
                   "    def forward(self, x):\n"
                   "        if x.sum() > 0:\n"
                   "            return x * 2\n"
                   "        return -x\n\n"
                   "def build():\n"
                   "    return Net().eval(), torch.randn(1, 3)\n")
    done = run("check", f"{net}:build", "-n", "4", "--no-traced", "--repeat", "1", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "inconsistent rate η         0.00" in done.stdout


def test_zoo_rejects_unknown_models_before_any_work():
    start = time.perf_counter()
    done = run("zoo", "--models", "sdn_vgg19,nosuch", "-n", "1")
    assert done.returncode == 1
    assert "unknown zoo model(s) nosuch" in done.stderr and "sdn_vgg19" not in done.stdout
    assert time.perf_counter() - start < 60  # rejected at once, not after checking sdn_vgg19


def test_show_refuses_an_unsupported_picture_format_by_name(tmp_path):
    out = tmp_path / "net"
    assert run("compile", "tests.dycl.factories:exit_model", "--out", str(out)).returncode == 0
    done = run("show", str(out), "--picture", str(tmp_path / "early.txt"))
    assert done.returncode == 1
    [line] = done.stderr.strip().splitlines()
    assert "cannot draw early.txt: supported picture formats are .svg, .png" in line
    assert "CalledProcessError" not in done.stderr


def test_check_shows_progress_while_timing_when_asked():
    done = run("check", "tests.dycl.factories:exit_model", "-n", "3", "--no-traced", "--repeat", "1", "--progress")
    assert done.returncode == 0, done.stderr
    assert "[dycl] timing eager vs compiled" in done.stderr and "[dycl] checking eager vs compiled" in done.stderr
    quiet = run("check", "tests.dycl.factories:exit_model", "-n", "3", "--no-traced", "--repeat", "1")
    assert "[dycl]" not in quiet.stderr  # not a terminal and not asked: no bars


def test_check_profile_prints_the_time_of_each_sub_dnn():
    done = run("check", "tests.dycl.factories:exit_model", "-n", "4", "--no-traced", "--repeat", "1", "--profile")
    assert done.returncode == 0, done.stderr
    table = done.stdout[done.stdout.index("time per sub-DNN over 4 calls"):].splitlines()
    assert table[1].split()[:3] == ["sub-DNN", "calls", "total"]
    rows = [line.split() for line in table[2:]]
    assert rows[-1][0] == "host" and len(rows) >= 2
    assert all(int(row[1]) >= 1 and float(row[2]) >= 0 for row in rows[:-1])  # calls, total ms per sub-DNN
