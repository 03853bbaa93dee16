"""The TVM backend on small models: symbolic dimensions, Python scalars, list
variants, inputs the exporter drops, the three schedule levels, parallel builds
with progress, and MetaSchedule tuning cached on disk."""

from __future__ import annotations

import ast
import io
import warnings

import numpy as np
import pytest
import torch
import torch.nn as nn
from dycl.hostgen.manifest import Port, SubDNNEntry

import dycl
from dycl.backends import get_backend
from dycl.backends.tvm import SCHEDULES, BuildJob, TvmBackend, TvmOptions, compile_onnx
from dycl.backends.tvm.specialized import MAGIC
from dycl.compiler import compile_model
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch
from tests.nets import Decoder

ATOL = 1e-4


def test_the_host_runtime_imports_neither_torch_nor_dycl():
    imported = set()
    for node in ast.walk(ast.parse(TvmBackend.runtime)):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    assert imported <= {"hashlib", "importlib", "json", "numpy", "os", "sys", "tempfile", "threading", "tvm"}, imported


def test_get_backend_passes_options_to_tvm_only():
    backend = get_backend("tvm", tune_trials=3, schedule="dlight", jobs=None)
    assert isinstance(backend, TvmBackend)
    assert backend.options.tune_trials == 3 and backend.options.schedule == "dlight"
    with pytest.raises(ValueError, match="takes no options"):
        get_backend("onnxruntime", tune_trials=3)
    with pytest.raises(ValueError, match="unknown TVM schedule"):
        TvmBackend(schedule="fast")


def test_compile_passes_backend_options_through():
    model = nn.Linear(4, 4).eval()
    compiled = dycl.compile(model, torch.ones(1, 4), backend="tvm", schedule="none", build_cache=False)
    assert compiled.stats["backend"]["build_cache_hits"] == 0
    with pytest.raises(ValueError, match="backend 'onnxruntime' takes no options, got \\['tune_trials'\\]"):
        dycl.compile(model, torch.ones(1, 4), tune_trials=3)


class Widening(nn.Module):
    """After the join ``x`` is (1, 8) on one path and (1, 4) on the other: the
    sub-DNN after it gets a symbolic dimension; ``steps`` is a Python int."""

    def forward(self, x):
        steps = 0
        if x.sum() > 0:
            x = torch.cat([x, x * 2], dim=1)
            steps += 1
        return x.sum(dim=1) * 2 + x.mean(), x, steps


class Unused(nn.Module):
    """One path ignores ``y`` (the exporter drops the input), the other passes ``x`` through."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x, y):
        h = self.fc(x)
        if h.sum() > 0:
            return h * 2, x
        if bool(y.max() > 0.5):
            return h + y, x * 3
        return h - y, x


def _signed(count: int, seed: int, width: int = 4) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [(torch.rand(1, width, generator=generator) + 0.1) * (1 if i % 2 else -1) for i in range(count)]


def _check_saved(compiled, model, inputs, tmp_path):
    report = run_host_without_torch(compiled.save(tmp_path / "artifact"), model, inputs, ATOL)
    assert report == {"checked": len(inputs), "problems": [], "torch_loaded": False}


def test_symbolic_dimensions_and_python_scalars(tmp_path):
    model = Widening().eval()
    compiled = dycl.compile(model, torch.ones(1, 4), backend="tvm")
    symbolic = [dim for entry in compiled.manifest["sub_dnns"].values() for port in entry["inputs"]
                for dim in port["shape"] if isinstance(dim, str)]
    assert symbolic and compiled.manifest["backend"] == "tvm"
    inputs = _signed(20, 0)
    assert assert_equivalent(model, compiled, inputs, min_paths=2, atol=ATOL) == 2
    _check_saved(compiled, model, inputs, tmp_path)


def test_dropped_inputs_and_passed_through_outputs(tmp_path):
    torch.manual_seed(0)
    model = Unused().eval()
    inputs = [(x, torch.rand(1, 4) * 0.6) for x in _signed(30, 1)]
    compiled = dycl.compile(model, inputs[0], backend="tvm")
    assert assert_equivalent(model, compiled, inputs, min_paths=2, atol=ATOL) >= 2
    x, y = (a.numpy() for a in inputs[3])
    first = compiled.run_numpy(x, y)
    first[0][...] = 7.0  # outputs are the caller's: changing one changes nothing inside
    assert not np.array_equal(compiled.run_numpy(x, y)[0], first[0])
    _check_saved(compiled, model, inputs, tmp_path)


def test_list_lengths_get_one_variant_each(tmp_path):
    torch.manual_seed(1)
    model = Decoder().eval()
    generator = torch.Generator().manual_seed(0)
    inputs = [torch.randn(1, 4, generator=generator) * 2 for _ in range(30)]
    compiled = dycl.compile(model, inputs[0], backend="tvm")
    assert compiled.stats["variants"] > compiled.stats["sub_dnns"]
    assert assert_equivalent(model, compiled, inputs, min_paths=3, atol=ATOL) >= 3
    _check_saved(compiled, model, inputs, tmp_path)


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.b = nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=2)
        self.fc = nn.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        y = torch.relu(self.bn(self.a(x)))
        y = torch.relu(self.b(y)) + nn.functional.max_pool2d(y, 2)
        return (torch.softmax(self.fc(y.flatten(1)), -1), y.mean(dim=(2, 3)))


def _onnx(model: nn.Module, example: torch.Tensor, outputs: tuple[str, ...] = ("p:out", "m:out")) -> bytes:
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (example,), buffer, dynamo=False, opset_version=17, input_names=["x"],
                          output_names=list(outputs))
    return buffer.getvalue()


def _entry(outputs: tuple[str, ...]) -> SubDNNEntry:
    """The manifest entry of a library with one float32 input ``x`` (shapes are not read at run time)."""
    return SubDNNEntry("library.so", "0" * 64, (Port("x", "tensor", "float32", ()),),
                       tuple(Port(name, "tensor", "float32", ()) for name in outputs))


def _run(library: bytes, *arrays: np.ndarray) -> list[np.ndarray]:
    return TvmBackend().executable(library, _entry(("p:out", "m:out")), None)(*arrays)


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_every_schedule_level_computes_the_same(schedule, tmp_path):
    torch.manual_seed(0)
    model = ConvNet().eval()
    x = torch.randn(1, 3, 16, 16)
    options = TvmOptions.from_env(schedule=schedule, cache_dir=str(tmp_path), build_cache=False)
    (library,), _ = compile_onnx([BuildJob("net", _onnx(model, x), ("x",))], options)
    with torch.no_grad():
        expected = [t.numpy() for t in model(x)]
    for got, want in zip(_run(library, x.numpy()), expected):
        np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-5)


class GatedConvNet(ConvNet):
    """ConvNet plus a bool output (a kernel that must stay scalar)."""

    def forward(self, x):
        p, m = super().forward(x)
        return p, m, p.max(dim=-1).values > 0.2


def test_dycl_schedules_reach_every_kernel_with_work():
    """A rule that raises hands its kernel to the next rule or leaves it serial: still
    correct, but several times slower (a TVM API slip once sent every convolution of
    the zoo to the plain parallel-loop rule, 6x slower), so look at the kernels."""
    from dycl.backends.tvm.lowering import import_onnx, prepare
    from dycl.backends.tvm.options import target_of
    from dycl.backends.tvm.schedules import apply_schedules

    torch.manual_seed(0)
    model = GatedConvNet().eval()
    onnx_bytes = _onnx(model, torch.randn(1, 3, 16, 16), ("p:out", "m:out", "g:out"))
    target = target_of(TvmOptions.from_env())
    scheduled = apply_schedules(prepare(import_onnx(onnx_bytes, ["x"]), target), target, "dycl")
    kernels = {gv.name_hint: func.script() for gv, func in scheduled.functions_items()
               if type(func).__name__ == "PrimFunc"}
    convolutions = [name for name in kernels if "conv2d" in name]
    assert len(convolutions) == 2, sorted(kernels)
    for name in convolutions:  # register-tiled (an accumulator in "local" memory); the grouped one is too small
        assert '"local"' in kernels[name] and "T.vectorized" in kernels[name], name  # to parallelize
    parallel = [name for name, text in kernels.items() if "T.parallel" in text]
    assert len(parallel) >= 2 and any("conv2d" in name for name in parallel), parallel
    assert sum("T.vectorized" in text for text in kernels.values()) >= len(kernels) - 3, sorted(kernels)


def test_a_matmul_with_many_rows_packs_its_weight_panels(tmp_path):
    """With more rows than one register tile, the tiled reduction copies the weight's
    column panel into a contiguous buffer (``*_global``) reused by every row tile, and
    still computes the matmul."""
    from dycl.backends.tvm.lowering import import_onnx, prepare
    from dycl.backends.tvm.options import target_of
    from dycl.backends.tvm.schedules import apply_schedules

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 96), nn.ReLU()).eval()
    x = torch.randn(8, 64)
    onnx_bytes = _onnx(model, x, ("y:out",))
    target = target_of(TvmOptions.from_env())
    scheduled = apply_schedules(prepare(import_onnx(onnx_bytes, ["x"]), target), target, "dycl")
    (matmul,) = [func.script() for gv, func in scheduled.functions_items() if "matmul" in gv.name_hint]
    assert "_global = T.sblock_alloc_buffer" in matmul and '"local"' in matmul, matmul
    options = TvmOptions.from_env(cache_dir=str(tmp_path), build_cache=False)
    (library,), _ = compile_onnx([BuildJob("linear", onnx_bytes, ("x",))], options)
    with torch.no_grad():
        expected = model(x).numpy()
    got = TvmBackend().executable(library, _entry(("y:out",)), None)(x.numpy())[0]
    np.testing.assert_allclose(got, expected, atol=1e-5, rtol=1e-5)


def test_compile_many_builds_in_parallel_processes_with_progress(tmp_path):
    torch.manual_seed(0)
    model = Decoder().eval()
    result = compile_model(model, torch.randn(1, 4), backend="torch")
    modules = list(result.modules.values())
    backend = TvmBackend(jobs=2, cache_dir=str(tmp_path), build_cache=True)
    finished: list[str] = []
    compiled = backend.compile_many(modules, [m.variant for m in modules], progress=finished.append)
    assert [c.file for c in compiled] == [f"{m.variant.name}.so" for m in modules]
    assert [c.stats["specialized"] for c in compiled].count(True) == backend.last_stats["specialized"]
    libraries = [c.data for c in compiled]
    assert sorted(finished) == sorted(m.variant.name for m in modules)
    # a variant with a symbolic batch: its example-shaped build and its generic one, in one file
    specialized = [data for data in libraries if data.startswith(MAGIC)]
    assert len(specialized) == backend.last_stats["specialized"] >= 1
    assert all(data[:4] == b"\x7fELF" for data in libraries if not data.startswith(MAGIC))
    for data in specialized:
        assert data.count(b"\x7fELF") >= 2 and data[data.index(b"\n", len(MAGIC)) + 1:][:4] == b"\x7fELF"
    assert backend.last_stats["build_cache_hits"] == 0
    again = TvmBackend(jobs=2, cache_dir=str(tmp_path), build_cache=True)
    assert [c.data for c in again.compile_many(modules, [m.variant for m in modules])] == libraries
    assert again.last_stats["build_cache_hits"] == len(modules) + len(specialized)


def test_tuning_records_are_cached_and_reused(tmp_path):
    # DLight's CPU rules leave this matmul almost as slow as no schedule, so even
    # a few MetaSchedule trials win and the tuned schedule is kept.
    torch.manual_seed(0)
    model = nn.Linear(128, 128).eval()
    x = torch.randn(32, 128)
    job = BuildJob("linear", _onnx(model, x, ("y:out",)), ("x",))
    options = TvmOptions.from_env(schedule="dlight", tune_trials=4, cache_dir=str(tmp_path))
    (first,), stats = compile_onnx([job], options)
    assert stats["tuning"]["kernels"] == 1, stats
    assert stats["tuning"]["improved"], stats
    assert len(list((tmp_path / "tuning").glob("*.json"))) == 1
    (second,), stats = compile_onnx([job], options)
    assert stats["tuning"]["kernels"] == 0, stats  # nothing left to tune: the record was reused
    entry = _entry(("y:out",))
    with torch.no_grad():
        expected = model(x).numpy()
    for library in (first, second):
        np.testing.assert_allclose(TvmBackend().executable(library, entry, None)(x.numpy())[0], expected,
                                   atol=1e-4, rtol=1e-4)


def test_compiling_twice_without_the_cache_gives_identical_artifacts(tmp_path):
    """LLVM code generation is deterministic: the libraries, and so the manifest's checksums, match."""
    first = dycl.compile(Widening().eval(), torch.ones(1, 4), backend="tvm", build_cache=False).save(tmp_path / "one")
    second = dycl.compile(Widening().eval(), torch.ones(1, 4), backend="tvm", build_cache=False).save(tmp_path / "two")
    for name in ("host.py", "manifest.json"):
        assert (first / name).read_bytes() == (second / name).read_bytes(), name


def test_symbolic_batch_and_image_size_from_one_compile(tmp_path):
    """Dims named by ``dynamic=`` (and expressions of them, after a stride-2 conv) are
    symbolic in the Relax functions: one build serves every batch and image size."""
    from dycl.harness import check
    from tests.dynamic.nets import ShapeBranchCNN

    model = ShapeBranchCNN().eval()
    compiled = dycl.compile(model, torch.randn(1, 3, 32, 32), backend="tvm",
                            dynamic={"x": {0: "batch", 2: "h", 3: "w"}})
    generator = torch.Generator().manual_seed(0)
    inputs = [torch.randn(batch, 3, size, size, generator=generator)
              for size in (24, 32, 48, 64) for batch in (1, 3) for _ in range(3)]
    report = check(model, compiled, inputs, traced=False)
    assert report.eta == 0.0 and report.delta <= -4 and report.paths >= 4, report.table()
    _check_saved(compiled, model, inputs[::4], tmp_path)


def test_tuning_says_which_kernels_keep_the_default_schedules(tmp_path):
    """MetaSchedule measures fixed shapes: with the batch dim symbolic and no build for the
    example's shapes nothing is tuned, and the user is told; with that build (the default)
    its kernels are tuned."""
    model = nn.Linear(4, 4).eval()
    with pytest.warns(UserWarning, match="kernels have symbolic dims and keep the default schedules"):
        compiled = dycl.compile(model, torch.ones(1, 4), backend="tvm", tune_trials=2, cache_dir=str(tmp_path),
                                specialize=False)
    tuning = compiled.stats["backend"]["tuning"]
    assert tuning["kernels"] == 0 and tuning["symbolic_untuned"] >= 1, tuning
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        compiled = dycl.compile(model, torch.ones(1, 4), backend="tvm", tune_trials=2, cache_dir=str(tmp_path))
    tuning = compiled.stats["backend"]["tuning"]
    assert tuning["kernels"] >= 1 and compiled.stats["backend"]["specialized"] == 1, tuning


def test_symbolic_sub_dnns_also_run_a_build_for_the_example_shapes(tmp_path):
    model = Widening().eval()
    compiled = dycl.compile(model, torch.ones(1, 4), backend="tvm")
    assert compiled.stats["backend"]["specialized"] == compiled.stats["unique_compiled"]
    calls = {"static": 0, "generic": 0}

    def counted(run, kind):
        def call(*args):
            calls[kind] += 1
            return run(*args)
        return call

    for executable in {id(e): e for e in compiled._host._call.values()}.values():
        for kind in calls:
            setattr(executable, kind, counted(getattr(executable, kind), kind))
    generator = torch.Generator().manual_seed(4)
    inputs = [torch.randn(batch, 4, generator=generator) for batch in (1, 3, 1, 2, 1, 5) for _ in range(4)]
    assert assert_equivalent(model, compiled, inputs, min_paths=2, atol=ATOL) == 2
    assert calls["static"] >= 12 and calls["generic"] >= 12, calls
    _check_saved(compiled, model, inputs, tmp_path)


def test_compile_returns_a_compiled_variant_per_variant(tmp_path):
    """``TvmBackend.compile_many`` as the compiler calls it: one ``CompiledVariant`` per
    variant (a library file named by the variant, its guards, whether it was specialized),
    and the compiled model equals eager over both exits, in process and saved."""
    from dycl.backends.base import CompiledVariant
    from tests.compile.test_typed_handoffs import EarlyExitMLP, _samples, _stage_results

    torch.manual_seed(0)
    model = EarlyExitMLP().eval()
    options = {"cache_dir": str(tmp_path / "cache"), "jobs": 2}
    stage = _stage_results(model, torch.randn(2, 10), backend="tvm", backend_options=options)
    assert set(stage.variants) == {v.name for v in stage.ported.variants} and len(stage.variants) >= 2
    for variant in stage.ported.variants:
        made = stage.variants[variant.name]
        assert isinstance(made, CompiledVariant) and made.file == f"{variant.name}.so" and made.guards == ()
        symbolic = any(isinstance(d, str) for p in (*variant.inputs, *variant.outputs) for d in p.shape)
        assert made.stats["specialized"] is symbolic
        assert made.data.startswith(MAGIC) if symbolic else made.data[:4] == b"\x7fELF"
    compiled = dycl.compile(model, torch.randn(2, 10), backend="tvm", **options)
    inputs = _samples(8)
    assert assert_equivalent(model, compiled, inputs, min_paths=2, atol=1e-4) == 2
    report = run_host_without_torch(compiled.save(tmp_path / "artifact"), model, inputs, 1e-4)
    assert report["problems"] == [] and report["checked"] == len(inputs)
