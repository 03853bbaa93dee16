"""Compile once, call with other batch sizes and image sizes (issue 8)."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import dycl
import dycl.compiler
from dycl.harness import check
from tests.dynamic.nets import PerSampleCondition, ShapeBranchCNN, TwoInputs

SIZES = (24, 32, 48, 64)
BATCHES = (1, 2, 7, 16)


@pytest.fixture
def no_compilation(monkeypatch):
    """After this fixture, any export or dycl compile raises. ONNX Runtime sessions of the graphs
    the compile exported may still be made: the host makes a sub-DNN's symbolic session on its first
    call at a size other than the example's (at load, the one fixed to the example's sizes) and
    specialized ones for sizes that recur (``dycl.backends.ort_runtime``)."""

    def refuse(*args, **kwargs):
        raise AssertionError("something was compiled after dycl.compile returned")

    monkeypatch.setattr(torch.onnx, "export", refuse)
    monkeypatch.setattr(dycl.compiler, "compile_model", refuse)
    monkeypatch.setattr(torch, "compile", refuse)


@pytest.fixture(scope="module")
def cnn():
    model = ShapeBranchCNN().eval()
    compiled = dycl.compile(model, torch.randn(1, 3, 32, 32), dynamic={"x": {0: "batch", 2: "h", 3: "w"}})
    return model, compiled


def images(batch: int, size: int, count: int, seed: int = 0) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed * 1000 + batch * 100 + size)
    return [torch.randn(batch, 3, size, size, generator=generator) for _ in range(count)]


def test_manifest_records_symbolic_dims(cnn):
    _, compiled = cnn
    assert compiled.manifest["inputs"][0]["shape"] == ["batch", 3, "h", "w"]
    assert compiled.manifest["dynamic_dims"] == {"batch": [["x", 0]], "h": [["x", 2]], "w": [["x", 3]]}
    ports = {name: entry for name, entry in compiled.manifest["sub_dnns"].items()}
    shapes = [port["shape"] for entry in ports.values() for port in entry["outputs"]]
    # the first conv keeps every symbolic dim by name; the stride-2 conv's output is an expression of h
    assert ["batch", 8, "h", "w"] in shapes
    assert ["batch", 8, "(((h - 1)//2)) + 1", "(((w - 1)//2)) + 1"] in shapes
    # channels and classes are proven static
    assert all(isinstance(port["shape"][1], int) for entry in ports.values() for port in entry["outputs"]
               if len(port["shape"]) > 1)


def test_cnn_with_shape_branch_runs_every_image_size(cnn, no_compilation):
    model, compiled = cnn
    inputs = [x for size in SIZES for x in images(1, size, 6)]
    report = check(model, compiled, inputs, traced=False)
    assert report.eta == 0.0 and report.delta <= -4, report.table()
    assert report.paths >= 4, report.table()  # width branch x data branch


def test_classifier_runs_every_batch_size(cnn, no_compilation):
    model, compiled = cnn
    inputs = [x for batch in BATCHES for x in images(batch, 32, 4, seed=1)]
    report = check(model, compiled, inputs, postprocess=lambda out: tuple(out.argmax(-1).tolist()), traced=False)
    assert report.eta == 0.0 and report.delta <= -4, report.table()
    assert report.paths >= 3, report.table()  # batch == 1 or not, x data branch
    for x in images(16, 48, 1, seed=2):  # batch and size at once
        torch.testing.assert_close(compiled(x), model(x), atol=1e-4, rtol=0)


def test_shape_conditions_are_evaluated_by_the_host(cnn):
    _, compiled = cnn
    forward = compiled.host_source[compiled.host_source.index("def _forward"):]
    assert "if x.shape[-1] > 24:" in forward
    assert "if x.shape[0] == 1:" in forward  # x.size(0) made numpy-compatible


def test_host_validates_rank_static_dims_and_equal_symbols(cnn):
    _, compiled = cnn
    with pytest.raises(ValueError, match=r"expected rank 4 \(shape \[batch, 3, h, w\]\), got rank 3"):
        compiled.run_numpy(np.zeros((3, 32, 32), np.float32))
    with pytest.raises(ValueError, match=r"expected shape \[batch, 3, h, w\], got \[1, 4, 32, 32\]"):
        compiled.run_numpy(np.zeros((1, 4, 32, 32), np.float32))
    model = TwoInputs().eval()
    two = dycl.compile(model, (torch.randn(2, 4), torch.randn(2, 4)))
    assert [spec["shape"] for spec in two.manifest["inputs"]] == [["batch", 4], ["batch", 4]]
    x, y = torch.randn(5, 4), torch.randn(5, 4)
    torch.testing.assert_close(two(x, y), model(x, y), atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match=r"input 'y': dimension 0 is 'batch', expected 5 as in input 'x'"):
        two.run_numpy(np.zeros((5, 4), np.float32), np.zeros((3, 4), np.float32))


def test_static_compile_keeps_todays_behaviour():
    model = ShapeBranchCNN().eval()
    compiled = dycl.compile(model, torch.randn(1, 3, 32, 32), dynamic=False)
    assert compiled.manifest["inputs"][0]["shape"] == [1, 3, 32, 32]
    assert compiled.manifest["dynamic_dims"] == {}
    x = torch.randn(1, 3, 32, 32)
    torch.testing.assert_close(compiled(x), model(x), atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match=r"expected shape \[1, 3, 32, 32\], got \[2, 3, 32, 32\]"):
        compiled(torch.randn(2, 3, 32, 32))


def test_default_makes_only_the_batch_dim_symbolic():
    model = ShapeBranchCNN().eval()
    compiled = dycl.compile(model, torch.randn(1, 3, 32, 32))
    assert compiled.manifest["inputs"][0]["shape"] == ["batch", 3, 32, 32]
    x = torch.randn(3, 3, 32, 32)
    torch.testing.assert_close(compiled(x), model(x), atol=1e-5, rtol=0)


@pytest.mark.parametrize("spec", ["every", {"z": {0: "b"}}, {"x": {4: "d"}}, {"x": {1: "not a name"}}, 3.5])
def test_bad_dynamic_specs_are_rejected(spec):
    with pytest.raises(ValueError, match="dynamic"):
        dycl.compile(ShapeBranchCNN().eval(), torch.randn(1, 3, 32, 32), dynamic=spec)


def test_a_condition_ambiguous_over_a_batch_raises_clearly():
    model = PerSampleCondition().eval()
    batch = torch.randn(3, 4)
    with pytest.raises(RuntimeError, match="ambiguous"):
        model(batch)
    # by default dycl finds that eager fails at another batch and keeps the batch static (issue 31)
    with pytest.warns(dycl.SpecialisationWarning, match="fails at batch 2"):
        compiled = dycl.compile(model, torch.randn(1, 4))
    x = torch.randn(1, 4)
    torch.testing.assert_close(compiled(x), model(x), atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match=r"expected shape \[1, 4\], got \[3, 4\]"):
        compiled(batch)
    # a batch the user names symbolic stays symbolic: the host then names the ambiguous condition
    compiled = dycl.compile(model, torch.randn(1, 4), dynamic={"x": {0: "batch"}})
    torch.testing.assert_close(compiled(x), model(x), atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match=r"condition at test_dynamic_shapes.py|nets.py:\d+ is an array of shape \[3\]"):
        compiled(batch)


def test_saved_artifact_serves_every_size(cnn, tmp_path):
    model, compiled = cnn
    loaded = dycl.load(compiled.save(tmp_path / "cnn"))
    for x in images(2, 24, 1) + images(1, 64, 1):
        torch.testing.assert_close(loaded(x), model(x), atol=1e-4, rtol=0)


def resized(sample, seed: int, size: int) -> torch.Tensor:
    return F.interpolate(sample(seed), size=(size, size), mode="bilinear", align_corners=False)


@pytest.fixture(scope="module", params=["skipnet_ff", "caption_resnext", "caption_googlenet"])
def zoo_model(request):
    """A zoo model compiled once on its 32x32 example with symbolic batch, height and width."""
    module = importlib.import_module(f"models.{request.param}")
    model, example = module.build()
    compiled = dycl.compile(model, example, dynamic={0: {2: "h", 3: "w"}})
    return module, model, compiled


def test_zoo_models_compiled_at_32_run_every_image_size(zoo_model, no_compilation):
    module, model, compiled = zoo_model
    assert compiled.manifest["inputs"][0]["shape"] == ["batch", 3, "h", "w"]
    inputs = [resized(module.sample, seed, size) for size in SIZES for seed in range(3)]
    report = check(model, compiled, inputs, postprocess=module.postprocess, traced=False)
    assert report.eta == 0.0 and report.delta <= -4, report.table()
    assert report.paths >= 4, report.table()


def test_translation_runs_every_source_length(no_compilation_after_translation):
    module, model, compiled = no_compilation_after_translation
    assert compiled.manifest["inputs"][0]["shape"] == ["batch", "src_len"]
    generator = torch.Generator().manual_seed(8)
    lengths = (3, 4, 5, 7, 9, 10, 12, 16, 21, 27, 33, 40)  # 10 is the example's
    inputs = [torch.randint(3, module.VOCAB_SIZE, (1, length), generator=generator) for length in lengths]
    report = check(model, compiled, inputs, postprocess=module.postprocess, traced=False)
    assert report.eta == 0.0 and report.delta <= -4, report.table()
    assert report.paths >= 5, report.table()
    assert len({module.postprocess(model(x)) for x in inputs}) > 6  # the translations differ


@pytest.fixture
def no_compilation_after_translation(translation, no_compilation):
    return translation


@pytest.fixture(scope="module")
def translation():
    module = importlib.import_module("models.translation")
    model, example = module.build()
    return module, model, dycl.compile(model, example, dynamic={"src": {1: "src_len"}})
