"""Models compiled with backend="tvm" equal eager PyTorch, in-process and through
the saved host.py in a process where torch cannot be imported: a selection of
the rewriter suite's models (all of them with DYCL_TVM_ALL_CASES=1) and four
zoo models (one in the default run; η = 0 and δ ≤ −4 on 100 inputs, as the ONNX Runtime zoo test asks).

Built libraries are cached under $DYCL_CACHE/tvm/builds (default
~/.cache/dycl), so a second run only loads them.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
import warnings
from pathlib import Path

import pytest

import dycl
from dycl.harness import check
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "rewriter"))

import rewrite_checks  # noqa: E402
import test_calls  # noqa: E402
import test_exits  # noqa: E402
import test_loops  # noqa: E402
import test_python_values  # noqa: E402
import test_static_lookups  # noqa: E402

MODULES = [test_loops, test_exits, test_static_lookups, test_calls, test_python_values]
ALL_CASES = [(module, name) for module in MODULES for name, function in sorted(vars(module).items())
             if name.startswith("test_") and callable(function) and "check(" in inspect.getsource(function)]
# loops, early exits, tensor breaks, Python scalars crossing sub-DNNs, list variants, submodules
SELECTED = {
    "test_loops.test_nested_module_list_loops",
    "test_loops.test_range_start_stop_step",
    "test_exits.test_while_true_with_counter_and_tensor_breaks",
    "test_exits.test_early_return_in_nested_if",
    "test_calls.test_submodule_with_control_flow_in_module_list_loop",
    "test_python_values.test_item_int_bool_float_on_tensors",
    "test_python_values.test_list_append_under_data_dependent_branch",
    "test_python_values.test_tuple_return_mixing_tensors_and_ints",
}
CASES = ALL_CASES if os.environ.get("DYCL_TVM_ALL_CASES") else [
    (module, name) for module, name in ALL_CASES if f"{module.__name__}.{name}" in SELECTED]
ATOL = 1e-4


def tvm_check(tmp_path: Path):
    def check_model(model, inputs, min_paths: int = 2):
        checked = rewrite_checks.check(model, inputs, min_paths=min_paths)
        inputs = list(inputs)
        compiled = dycl.compile(model.eval(), inputs[0], backend="tvm")
        assert assert_equivalent(model, compiled, inputs, min_paths=min_paths, atol=ATOL) >= min_paths
        report = run_host_without_torch(compiled.save(tmp_path / "artifact"), model, inputs, ATOL)
        assert report == {"checked": len(inputs), "problems": [], "torch_loaded": False}, report
        return checked

    return check_model


def test_the_selection_exists():
    assert len(CASES) == len(SELECTED) or len(CASES) == len(ALL_CASES)


@pytest.mark.parametrize(("module", "name"), CASES, ids=[f"{m.__name__}.{n}" for m, n in CASES])
def test_rewriter_model_on_tvm_equals_eager(module, name, monkeypatch, tmp_path):
    monkeypatch.setattr(module, "check", tvm_check(tmp_path))
    getattr(module, name)()


# The default run keeps the captioner (a decoding loop, outputs of several lengths; ~7 s); the
# other three (15-30 s each on 2 cores, more with TVM's build cache cold) run with `make test-slow`.
ZOO_MODELS = [pytest.param("models.sdn_vgg19", marks=pytest.mark.slow), "models.caption_resnext",
              pytest.param("models.skipnet_ff", marks=pytest.mark.slow),
              pytest.param("models.translation", marks=pytest.mark.slow)]


@pytest.mark.parametrize("name", ZOO_MODELS)
def test_zoo_model_on_tvm_is_consistent_with_eager(name, tmp_path):
    warnings.simplefilter("ignore")
    zoo = importlib.import_module(name)
    model, example = zoo.build()
    compiled = dycl.compile(model, example, backend="tvm")
    inputs = [zoo.sample(seed) for seed in range(100)]
    report = check(model, compiled, inputs, postprocess=zoo.postprocess, traced=False)
    assert report.eta == 0.0, report
    assert report.delta <= -4.0, report
    assert report.paths >= 3, report
    host = run_host_without_torch(compiled.save(tmp_path / "artifact"), model, inputs[:20], ATOL)
    assert host == {"checked": 20, "problems": [], "torch_loaded": False}, host
