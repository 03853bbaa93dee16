"""``save`` writes a whole new directory beside the target and swaps it in: the
target holds the old model or the new one, never a mix or stale files, even when
the saving process is killed; a directory that is not an artifact is not replaced."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import dycl
from dycl.harness.testing import assert_equivalent
from tests.artifact.models import gate, gate_inputs, warm_start

ROOT = Path(__file__).resolve().parents[2]


def _listing(directory: Path) -> dict[str, str]:
    return {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in sorted(directory.iterdir())}


def test_saving_over_an_artifact_leaves_no_stale_files(tmp_path):
    first, second = gate(), warm_start()
    big = dycl.compile(first, torch.randn(1, 4))
    small = dycl.compile(second, torch.randn(1, 4))
    assert len(big.manifest["sub_dnns"]) > len(small.manifest["sub_dnns"])
    target = big.save(tmp_path / "net")
    assert (target / "subdnn_3.onnx").exists()
    assert small.save(target) == target
    assert _listing(target) == _listing(small.save(tmp_path / "fresh"))
    assert not (target / "subdnn_3.onnx").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fresh", "net"]  # no staging directories left
    assert assert_equivalent(second, dycl.load(target), [torch.randn(1, 4) for _ in range(12)], atol=1e-5) == 2


def test_refuses_to_replace_what_is_not_an_artifact(tmp_path):
    compiled = dycl.compile(gate(), torch.randn(1, 4))
    documents = tmp_path / "documents"
    documents.mkdir()
    (documents / "thesis.tex").write_text("years of work")
    with pytest.raises(FileExistsError, match="is not a dycl artifact"):
        compiled.save(documents)
    assert _listing(documents) == {"thesis.tex": hashlib.sha256(b"years of work").hexdigest()}
    (tmp_path / "a_file").write_text("x")
    with pytest.raises(FileExistsError, match="is not a directory"):
        compiled.save(tmp_path / "a_file")
    (tmp_path / "empty").mkdir()
    assert assert_equivalent(gate(), dycl.load(compiled.save(tmp_path / "empty")), gate_inputs(), atol=1e-5) == 2


_KILLER = r'''
import hashlib, json, os, signal, sys, time
from pathlib import Path
from dycl.artifact import write_artifact

old, new, target = (Path(p) for p in sys.argv[1:4])
def files(directory):
    return {p.name: p.read_bytes() for p in directory.iterdir()}
old_files = files(old)
new_files = {**files(new), "weights-padding.bin": os.urandom(1 << 20) * 48}  # a slow save
outcomes = []
for delay in [0, 0.001, 0.003, 0.006, 0.01, 0.02, 0.04, 0.08, 0.16, 0.3, 1.5]:
    write_artifact(target, old_files)
    child = os.fork()
    if child == 0:
        write_artifact(target, new_files)
        os._exit(0)
    time.sleep(delay)
    os.kill(child, signal.SIGKILL)
    os.waitpid(child, 0)
    listing = ({p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in target.iterdir()}
               if target.exists() else None)
    siblings = sorted(p.name for p in target.parent.iterdir() if p.name != target.name)
    outcomes.append({"delay": delay, "listing": listing, "siblings": siblings})
    for name in siblings:  # what a killed save leaves beside the target
        import shutil
        shutil.rmtree(target.parent / name)
expected = {name: {n: hashlib.sha256(d).hexdigest() for n, d in f.items()} for name, f in
            (("old", old_files), ("new", new_files))}
print(json.dumps({"outcomes": outcomes, "expected": expected}))
'''


def test_a_killed_save_leaves_the_old_model_or_the_new_one(tmp_path):
    old = dycl.compile(gate(), torch.randn(1, 4)).save(tmp_path / "old")
    new = dycl.compile(warm_start(), torch.randn(1, 4)).save(tmp_path / "new")
    target = tmp_path / "deploy" / "net"
    target.parent.mkdir()
    completed = subprocess.run([sys.executable, "-c", _KILLER, str(old), str(new), str(target)], cwd=ROOT,
                               capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    report = json.loads(completed.stdout.strip().splitlines()[-1])
    seen = []
    for outcome in report["outcomes"]:
        matches = [name for name, listing in report["expected"].items() if outcome["listing"] == listing]
        assert matches, f"killed after {outcome['delay']} s: neither the old nor the new model: {outcome}"
        seen.append((matches[0], bool(outcome["siblings"])))
    assert ("old", True) in seen, f"no kill landed while the new model was being written: {seen}"
    assert ("new", False) in seen, seen
