"""``python -m dycl.fuzz --levers``: every program compiled with the named levers."""

from __future__ import annotations

import pytest
from dycl.hcfg.levers import Levers

import dycl
from dycl.fuzz.__main__ import levers_of, main
from dycl.fuzz.campaign import run_campaign
from dycl.fuzz.loader import forget, import_file


def test_levers_are_read_by_name_and_value():
    assert levers_of("") is None
    assert levers_of("single_graph=on") == Levers(single_graph="on")
    assert levers_of("merge_into_producers=false, reuse_identical=off") == Levers(
        merge_into_producers=False, reuse_identical=False)


@pytest.mark.parametrize("text, message", [("nope=1", "unknown lever 'nope'"),
                                           ("reuse_identical=maybe", "takes true or false"),
                                           ("single_graph=sometimes", "single_graph must be one of")])
def test_an_unknown_lever_or_value_is_refused_by_name(text, message):
    with pytest.raises(ValueError, match=message):
        levers_of(text)


def test_the_campaign_is_run_with_the_levers(monkeypatch, tmp_path):
    seen = []

    def run_campaign(n, seed, backends, out_dir, regressions, **options):
        seen.append(options["levers"])
        raise SystemExit(0)

    monkeypatch.setattr("dycl.fuzz.__main__.run_campaign", run_campaign)
    with pytest.raises(SystemExit):
        main(["--n", "1", "--levers", "single_graph=on", "--out", str(tmp_path)])
    assert seen == [Levers(single_graph="on")]


def test_programs_and_their_regression_files_compile_with_the_levers(tmp_path, monkeypatch):
    """The campaign compiles every program with ``optimize=levers``, and a failure's regression
    file does too (its ``LEVERS``), so that it reproduces what needed them."""
    levers = Levers(single_graph="on", reuse_identical=False)
    asked = []

    def compile_recording(model, example, backend="torch", **options):
        asked.append(options.get("optimize"))
        return lambda *args: model(*args) * 0  # wrong on every input that is not all zeros

    monkeypatch.setattr(dycl, "compile", compile_recording)
    summary = run_campaign(1, 9, ["torch"], tmp_path / "out", tmp_path / "regressions", compile_fn=compile_recording,
                           echo=lambda line: None, levers=levers, max_shrinks=1)
    assert summary.failures and set(asked) == {levers}
    written = summary.failures[0].regression
    assert f"LEVERS = {levers!r}" in written.read_text()
    module = import_file(written)
    try:
        asked.clear()
        with pytest.raises(AssertionError, match="inconsistent|error"):
            module.__dict__[next(n for n in dir(module) if n.startswith("test_fuzz_"))]()
        assert asked and set(asked) == {levers}
    finally:
        forget(module)
