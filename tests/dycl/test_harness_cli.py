"""The harness measures what Eq. 1 defines; the CLI wraps it with clear errors."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import torch
import torch.nn as nn

import dycl
from dycl.cli import main
from dycl.harness import check, log_error, max_abs_error


class Exit(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 3)
        self.b = nn.Linear(4, 3)

    def forward(self, x):
        out = self.a(x)
        if out.max() > 0.5:
            return out
        return self.b(x)


def test_max_abs_error_and_log_error():
    assert math.isclose(max_abs_error(torch.ones(2), torch.ones(2) + 1e-3), 1e-3, rel_tol=1e-3)
    assert max_abs_error((torch.ones(2), 3), (torch.ones(2), 3)) == 0.0
    assert max_abs_error(torch.ones(3), torch.ones(4)) == math.inf
    assert log_error(0.0) == -10.0
    assert log_error(math.inf) == math.inf


def test_check_reports_zero_eta_for_dycl_and_failure_of_the_traced_baseline():
    torch.manual_seed(0)
    model = Exit().eval()
    inputs = [torch.randn(1, 4) * 2 for _ in range(60)]
    compiled = dycl.compile(model, inputs[0])
    report = check(model, compiled, inputs)
    assert report.n == 60 and report.paths == 2
    assert report.eta == 0.0 and report.delta <= -5
    assert report.traced_eta is not None and report.traced_eta > 0
    assert report.traced_delta > report.delta
    assert report.eager_ms > 0 and report.compiled_ms > 0
    assert set(report.to_json()) >= {"eta", "delta", "paths", "traced_eta", "traced_delta", "eager_ms", "compiled_ms"}


def test_check_json_last_line(capsys):
    assert main(["check", "models.ranet", "-n", "12", "--json", "--repeat", "1"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    result = json.loads(last)
    assert result["eta"] == 0.0 and result["paths"] >= 2
    assert {"eta", "delta", "paths", "traced_eta", "traced_delta", "eager_ms", "compiled_ms"} <= set(result)


def test_compile_and_show(tmp_path, capsys):
    assert main(["compile", "models.sdn_vgg19", "--out", str(tmp_path / "vgg")]) == 0
    assert "6 conditions" in capsys.readouterr().out
    assert main(["show", str(tmp_path / "vgg"), "--picture", str(tmp_path / "vgg.png")]) == 0
    out = capsys.readouterr().out
    assert "backend    onnxruntime" in out and "x: float32 [batch, 3, 32, 32]" in out  # batch: symbolic
    assert (tmp_path / "vgg.png").stat().st_size > 1000


def test_factory_model_spec(tmp_path, capsys):
    assert main(["check", "tests.dycl.factories:exit_model", "-n", "10", "--no-traced"]) == 0
    assert "inconsistent rate η         0.00" in capsys.readouterr().out


def test_errors_are_one_line_unless_debug():
    completed = subprocess.run([sys.executable, "-m", "dycl", "check", "models.no_such_model"],
                               capture_output=True, text=True)
    assert completed.returncode == 1
    assert completed.stderr.strip() == ("dycl: error: ValueError: cannot import 'models.no_such_model': "
                                        "No module named 'models.no_such_model'")
    debug = subprocess.run([sys.executable, "-m", "dycl", "--debug", "check", "models.no_such_model"],
                           capture_output=True, text=True)
    assert "Traceback" in debug.stderr
