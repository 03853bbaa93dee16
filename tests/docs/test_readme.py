"""The README and docs/ say what is true: the example runs, the first screen is the first
steps, paths stay inside the repository, the artifact's file list is what ``save`` writes,
and the commands shown are commands dycl and make accept (issue 31, point 9)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import torch

import dycl
from dycl.cli import _parser
from tests.artifact.models import warm_start

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
FIRST_SCREEN = 45  # lines


def test_readme_usage_example_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "README has no python example"
    namespace: dict = {}
    exec(compile(blocks[0], str(README), "exec"), namespace)  # noqa: S102 - our own README
    assert namespace["report"].eta == 0.0
    assert (tmp_path / "build" / "sdn" / "host.py").is_file()


def test_the_first_screen_is_the_two_commands_one_example_and_where_to_go_next():
    first = "\n".join(README.read_text().splitlines()[:FIRST_SCREEN])
    assert "make demo" in first and "make test" in first
    assert first.count("```python") == 1
    assert "## Where to go next" in README.read_text().split("\n## Why")[0]
    assert len(README.read_text().splitlines()) < 150  # the long sections live in docs/


def test_every_path_named_is_inside_the_repository_and_exists():
    for page in [README, *DOCS]:
        text = page.read_text()
        assert "../" not in text, f"{page.name} points outside the repository"
        for link in re.findall(r"\]\(([^)#]+)\)", text):
            assert link.startswith("http") or (page.parent / link).exists(), f"{page.name}: {link}"
        named = set(re.findall(r"`((?:docs|notebooks|benchmarks|dycl|models|tests)/[\w./-]+\.(?:md|py|ipynb))`", text))
        missing = [path for path in named if not (ROOT / path).exists()]
        assert not missing, f"{page.name} names files that do not exist: {missing}"


def _artifact_files_claimed() -> tuple[set[str], str]:
    text = (ROOT / "docs" / "usage.md").read_text()
    paragraph = text[text.index("`compiled.save(dir)` writes a directory"):].split("\n\n")[0]
    return set(re.findall(r"`([\w.]+\.(?:py|json|dot|md|txt|bin))`", paragraph)), paragraph


@pytest.mark.parametrize("model", ["sdn_vgg19", "warm_start"])
def test_the_artifact_file_list_is_what_save_writes(model, tmp_path, compiled_zoo):
    claimed, paragraph = _artifact_files_claimed()
    assert "only where" in paragraph.split("`constants.bin`")[1][:40]  # said to be conditional
    if model == "sdn_vgg19":
        compiled = compiled_zoo("models.sdn_vgg19").compiled  # saving changes nothing: shared
    else:  # a constant initial state, hoisted into constants.bin
        compiled = dycl.compile(warm_start(), torch.randn(1, 4))
    assert (compiled.manifest.constants is not None) == (model == "warm_start")
    written = {p.name for p in compiled.save(tmp_path / model).iterdir()}
    onnx = {name for name in written if name.endswith(".onnx")}
    assert onnx and len(onnx) == len({e.file for e in compiled.manifest.sub_dnns.values()})
    expected = claimed - {"constants.bin"} | ({"constants.bin"} if compiled.manifest.constants else set())
    assert written - onnx == expected


def _commands(prefix: str) -> list[list[str]]:
    found = []
    for page in [README, *DOCS]:
        for block in re.findall(r"```sh\n(.*?)```", page.read_text(), flags=re.S):
            for line in block.splitlines():
                line = line.split("  #")[0].strip()
                if line.startswith(prefix):
                    found.append(shlex.split(line)[len(shlex.split(prefix)):])
    return found


def test_every_dycl_command_shown_is_accepted_by_the_cli():
    commands = _commands("python -m dycl ")
    assert len(commands) >= 5
    for args in commands:
        _parser().parse_args(args)  # argparse exits with status 2 on an unknown option or command


def test_every_make_target_shown_exists():
    targets = set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), flags=re.M))
    shown = [args[0] for args in _commands("make ")]
    assert {"demo", "test"} <= set(shown) and set(shown) <= targets
