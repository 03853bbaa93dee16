"""``python -m dycl.fuzz --levers``: every program compiled with the named levers."""

from __future__ import annotations

import pytest
from dycl.hcfg.levers import Levers

from dycl.fuzz.__main__ import levers_of, main


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


def test_the_campaign_compiles_with_the_levers(monkeypatch, tmp_path, capsys):
    seen = []

    def run_campaign(n, seed, backends, out_dir, regressions, compile_fn, **options):
        seen.append(compile_fn.keywords)
        raise SystemExit(0)

    monkeypatch.setattr("dycl.fuzz.__main__.run_campaign", run_campaign)
    with pytest.raises(SystemExit):
        main(["--n", "1", "--levers", "single_graph=on", "--out", str(tmp_path)])
    assert seen == [{"optimize": Levers(single_graph="on")}]
