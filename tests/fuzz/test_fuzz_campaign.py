"""A fixed-seed campaign on both backends: no inconsistencies, no errors, enough diverse paths.

Features with a known dycl bug (``KNOWN_BUGS``, each with a regression test in
tests/fuzz_regressions/) are left out until they are fixed; at present there are none.
"""

from __future__ import annotations

import re
from pathlib import Path

from dycl.fuzz.__main__ import main
from dycl.fuzz.campaign import run_campaign
from dycl.fuzz.generator import KNOWN_BUGS


def test_one_hundred_programs_on_both_backends(tmp_path: Path):
    lines: list[str] = []
    summary = run_campaign(100, 2024, ["torch", "onnxruntime"], tmp_path / "out", tmp_path / "regressions",
                           exclude=frozenset(KNOWN_BUGS), echo=lines.append)
    report = "\n".join(lines + [summary.line()])
    assert summary.programs == 100
    assert summary.inconsistencies == 0 and summary.errors == 0 and summary.unsupported == 0, report
    assert summary.share_many_paths >= 0.2, report


def test_command_line_summary(tmp_path: Path, capsys):
    status = main(["--n", "3", "--seed", "4", "--backend", "torch", "--exclude", "known", "--out", str(tmp_path),
                   "--regressions", str(tmp_path / "regressions")])
    last = capsys.readouterr().out.strip().splitlines()[-1]
    pattern = (r"fuzz: 3 programs, 0 inconsistencies, 0 compile errors, 0 unsupported, \d+ discarded, "
               r"\d+\.\d% with >=3 paths \(seed 4, backends torch, \d+\.\d s\)")
    assert status == 0 and re.fullmatch(pattern, last), last
    assert list(tmp_path.glob("Fuzz_s4_p*.py"))
