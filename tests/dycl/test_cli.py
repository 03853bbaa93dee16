"""The command line: errors that say what to do, checks before compiling, options of the API."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time

import pytest

from dycl.cli import COVERAGE_EXIT, main


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dycl", *args], capture_output=True, text=True, timeout=300)


def test_version_and_help_with_examples_for_every_command(capsys):
    with pytest.raises(SystemExit):
        main(["--version"])
    assert capsys.readouterr().out.strip() == "dycl 0.1.0"
    for command in ("compile", "check", "show", "zoo"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        text = capsys.readouterr().out
        assert "examples:\n  python -m dycl " + command in text
        options = [line.split()[0] for line in text.splitlines() if line.startswith("  -")]
        helpless = [line for line in text.splitlines() if line.startswith("  --") and len(line.split()) == 1]
        assert options and not helpless, f"{command}: options without help text: {helpless}"


def test_debug_is_accepted_after_the_subcommand():
    completed = run("check", "models.no_such_model", "--debug")
    assert completed.returncode == 1 and "Traceback" in completed.stderr


def test_unsupported_error_is_printed_whole(capsys):
    assert main(["check", "tests.dycl.factories:unsupported_model", "-n", "2"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("dycl: error: UnsupportedError: dycl cannot compile a try statement whose body raises")
    assert "factories.py:" in err and "|         try:" in err and "\nhint: " in err


def test_backend_torch_with_out_fails_before_compiling(tmp_path, capsys):
    start = time.perf_counter()
    assert main(["compile", "models.blockdrop", "--backend", "torch", "--out", str(tmp_path / "x")]) == 1
    assert time.perf_counter() - start < 2.0
    assert "backend 'torch' runs only in-process and cannot be saved with --out" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_a_non_empty_output_directory_is_refused_unless_force(tmp_path, capsys):
    out = tmp_path / "net"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    start = time.perf_counter()
    assert main(["compile", "tests.dycl.factories:exit_model", "--out", str(out)]) == 1
    assert time.perf_counter() - start < 2.0
    assert "is not empty: pass --force" in capsys.readouterr().err
    assert main(["compile", "tests.dycl.factories:exit_model", "--out", str(out), "--force"]) == 1
    assert "holds no dycl artifact (no manifest.json)" in capsys.readouterr().err
    assert (out / "notes.txt").read_text() == "mine"

    artifact = tmp_path / "artifact"
    assert main(["compile", "tests.dycl.factories:exit_model", "--out", str(artifact)]) == 0
    (artifact / "subdnn_99.onnx").write_bytes(b"stale")  # as if listed by an older manifest
    manifest = json.loads((artifact / "manifest.json").read_text())
    manifest["sub_dnns"]["subdnn_99"] = {"file": "subdnn_99.onnx"}
    (artifact / "manifest.json").write_text(json.dumps(manifest))
    assert main(["compile", "tests.dycl.factories:exit_model", "--out", str(artifact)]) == 1
    assert main(["compile", "tests.dycl.factories:exit_model", "--out", str(artifact), "--force"]) == 0
    assert not (artifact / "subdnn_99.onnx").exists()


def test_output_path_that_is_a_file(tmp_path, capsys):
    target = tmp_path / "file"
    target.write_text("")
    assert main(["compile", "tests.dycl.factories:exit_model", "--out", str(target)]) == 1
    assert "is a file, not a directory" in capsys.readouterr().err


def test_api_options_reach_compile(tmp_path, capsys):
    out = tmp_path / "static"
    assert main(["compile", "tests.dycl.factories:exit_model", "--out", str(out), "--dynamic", "none",
                 "--no-optimize"]) == 0
    assert json.loads((out / "manifest.json").read_text())["inputs"][0]["shape"] == [1, 4]
    out = tmp_path / "named"
    assert main(["compile", "tests.dycl.factories:exit_model", "--out", str(out), "--dynamic",
                 '{"x": {"1": "features"}}']) == 0
    shape = json.loads((out / "manifest.json").read_text())["inputs"][0]["shape"]
    assert shape[0] == "batch" and shape[1] in ("features", 4)  # named, or proved static by shape propagation
    capsys.readouterr()
    assert main(["compile", "tests.dycl.factories:exit_model", "--out", str(tmp_path / "o"),
                 "--backend-option", "jobs=2"]) == 1
    assert "backend 'onnxruntime' takes no options" in capsys.readouterr().err
    assert main(["compile", "tests.dycl.factories:exit_model", "--out", str(tmp_path / "o"), "--dynamic", "x"]) == 1
    assert "--dynamic 'x': expected batch, all, none or a JSON object" in capsys.readouterr().err


def test_show_reads_data_files_only_and_draws_svg_and_png_only_where_asked(tmp_path, capsys, monkeypatch):
    out = tmp_path / "net"
    assert main(["compile", "tests.dycl.factories:exit_model", "--out", str(out)]) == 0

    def never(*args, **kwargs):
        raise AssertionError("show executed host.py")

    monkeypatch.setattr("dycl.artifact.host_module.load_host_module", never)
    host = (out / "host.py").read_text()
    (out / "host.py").write_text("raise SystemExit('host.py was executed')\n")
    assert main(["show", str(out)]) == 1  # a changed host.py fails the check; nothing runs
    assert "host.py" in capsys.readouterr().err
    (out / "host.py").write_text(host)
    assert main(["show", str(out)]) == 0
    text = capsys.readouterr().out
    assert "input      x: float32 [batch, 4]" in text and "sub-DNNs   2 variants in 2 files" in text
    assert not list(out.glob("hcfg.svg")) + list(out.glob("hcfg.png"))  # nothing written unless asked
    pictures = tmp_path / "pictures"
    pictures.mkdir()
    assert main(["show", str(out), "--picture", str(pictures / "a.svg"), "--picture", str(pictures / "a.png")]) == 0
    assert (pictures / "a.svg").read_text().lstrip().startswith(("<?xml", "<svg"))
    assert (pictures / "a.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_check_warns_about_one_sided_conditions_and_require_coverage_fails(capsys):
    args = ["check", "tests.dycl.factories:rare_exit_model", "-n", "8", "--no-traced", "--repeat", "1"]
    assert main(args) == 0
    captured = capsys.readouterr()
    assert "conditions, both outcomes   0 of 1" in captured.out
    assert "dycl: warning: condition 0 at factories.py:" in captured.err
    assert "its true branch was not checked" in captured.err
    assert main([*args, "--require-coverage", "--json"]) == COVERAGE_EXIT
    captured = capsys.readouterr()
    result = json.loads(captured.out.strip().splitlines()[-1])
    assert result["both_outcomes"] == 0 and result["conditions_total"] == 1 and result["warnings"]
    assert "--require-coverage" in captured.err


def test_a_sequential_factory_compiles_to_one_sub_dnn_with_its_input(tmp_path, capsys):
    out = tmp_path / "seq"
    assert main(["compile", "tests.dycl.factories:sequential_model", "--out", str(out)]) == 0
    assert "1 sub-DNNs (1 compiled), 0 conditions" in capsys.readouterr().out
    manifest = json.loads((out / "manifest.json").read_text())
    assert [spec["name"] for spec in manifest["inputs"]] == ["input"]


@pytest.mark.parametrize(("factory", "message"), [
    ("function_model", "TypeError: dycl.compile takes an nn.Module, got a function: wrap the code in a module"),
    ("list_example_model", "TypeError: the example input is a list: pass a tuple"),
    ("model_only", "ValueError: tests.dycl.factories.model_only() must return (model, example_input), got Linear"),
])
def test_factory_mistakes_are_named_before_compiling(factory, message, tmp_path, capsys):
    assert main(["compile", f"tests.dycl.factories:{factory}", "--out", str(tmp_path / "o")]) == 1
    assert capsys.readouterr().err.startswith(f"dycl: error: {message}")


def test_check_reports_latency_by_blocks_beside_interleaved_with_machine_and_date(capsys):
    args = ["check", "tests.dycl.factories:exit_model", "-n", "4", "--no-traced", "--repeat", "1", "--json"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "median latency compiled" in out and "by blocks: compiled" in out  # both methods
    assert re.search(r"timed on .+ CPUs.+; \d{4}-\d\d-\d\d \d\d:\d\d UTC", out)  # machine and date
    result = json.loads(out.strip().splitlines()[-1])
    assert result["compiled_blocks_ms"] > 0 and result["eager_blocks_ms"] > 0
    assert main([*args[:-2], "0"]) == 0  # --repeat 0: neither method runs
    assert "by blocks" not in capsys.readouterr().out
