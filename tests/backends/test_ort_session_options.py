"""The ONNX Runtime host's session options: pool threads spin only while a run lasts
(``session.force_spinning_stop``), and only where the manifest says so for the sub-DNN
(``SubDNNEntry.spin``) or the ablation's ``DYCL_ORT_SPIN=run`` asks; ``DYCL_ORT_SPIN=off`` never."""

from __future__ import annotations

from dycl.backends import ort_runtime


def test_sessions_do_not_spin_by_default(monkeypatch):
    monkeypatch.delenv("DYCL_ORT_SPIN", raising=False)
    options = ort_runtime.session_options_for(ort_runtime.runtime_options(threads=2))
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    assert options.intra_op_num_threads == 2


def test_spinning_within_a_run_is_an_opt_in(monkeypatch):
    monkeypatch.setenv("DYCL_ORT_SPIN", "run")
    options = ort_runtime.session_options_for(ort_runtime.runtime_options(threads=2))
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "1"
    assert options.get_session_config_entry("session.force_spinning_stop") == "1"


def test_a_sub_dnn_the_compile_chose_spinning_for_spins_within_runs(monkeypatch):
    monkeypatch.delenv("DYCL_ORT_SPIN", raising=False)
    options = ort_runtime.session_options_for(ort_runtime.runtime_options(threads=2), spin=True)
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "1"
    assert options.get_session_config_entry("session.force_spinning_stop") == "1"


def test_spinning_off_overrides_the_compiles_choice(monkeypatch):
    monkeypatch.setenv("DYCL_ORT_SPIN", "off")
    options = ort_runtime.session_options_for(ort_runtime.runtime_options(threads=2), spin=True)
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
