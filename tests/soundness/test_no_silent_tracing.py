"""No silent tracing: code that dycl exports as one graph never bakes in a
value the example happened to have (issue 14, item 6).

Each model is written the way people write PyTorch code: ``.data`` in a test,
``.item()`` in a branch-free helper, a branching function in an installed
package, a submodule whose ``forward`` takes ``**kwargs``. Each either agrees
with eager on inputs that take at least two counted paths (in-process and in a
torch-free host) or is refused at compile time with the file:line that made the
data-dependent decision.
"""

from __future__ import annotations

import contextlib
import inspect
from pathlib import Path

import pytest
import torch
from dycl.rewriter import inline, user_code
from torch import nn

import dycl
from dycl.backends import onnx_export
from dycl.harness.paths import model_source_files, record_path
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch
from tests.soundness import libpkg

ATOL = 1e-5


def _inputs(n: int = 20, width: int = 4, seed: int = 0) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [3 * torch.randn(1, width, generator=generator) for _ in range(n)]


def _agrees(model: nn.Module, inputs: list[torch.Tensor], tmp_path: Path, min_paths: int = 2) -> int:
    compiled = dycl.compile(model, inputs[0])
    paths = assert_equivalent(model, compiled, inputs, min_paths=min_paths, atol=ATOL)
    host = run_host_without_torch(compiled.save(tmp_path / "artifact"), model, inputs, ATOL)
    assert host["checked"] == len(inputs) and not host["problems"], host
    return paths


def _line_of(function, marker: str) -> int:
    lines, first = inspect.getsourcelines(function)
    return first + next(i for i, line in enumerate(lines) if marker in line)


# -- Tensor.data in a test (the DyCL authors' BlockDrop: `if action.data.sum() == 0:`) ---------------------------

class DataGate(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.g = nn.Linear(4, 1)
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)

    def forward(self, x):
        h = self.a(x)
        action = (self.g(h) > 0).float()
        if action.data.sum() == 0:  # LOST INPUT
            return self.b(h)
        return h * 2


def _data_gate() -> DataGate:
    torch.manual_seed(0)
    return DataGate().eval()


def test_data_in_a_test_agrees_in_process_and_in_the_host(tmp_path):
    assert _agrees(_data_gate(), _inputs(), tmp_path) == 2


def test_a_lost_input_is_refused_naming_the_statement(monkeypatch):
    """Without the ``.data`` → ``detach()`` export, the tracer cuts the condition
    sub-DNN off its input: the check after export must refuse it, not run it."""
    monkeypatch.setattr(onnx_export, "_DataAsDetach", contextlib.nullcontext)
    model = _data_gate()
    with pytest.raises(dycl.UnsupportedError, match="computes without its input") as info:
        dycl.compile(model, _inputs()[0])
    assert info.value.location.path == __file__
    assert info.value.location.line == _line_of(DataGate.forward, "# LOST INPUT")


def test_a_dropped_input_whose_shape_only_is_read_is_fine():
    """The exporter may drop an input the statements read only the shape of."""
    class ShapeOnly(nn.Module):
        def forward(self, x, y):
            z = x + y.shape[0]
            if z.sum() > 0:
                return z * 2
            return z

    model = ShapeOnly().eval()
    compiled = dycl.compile(model, (torch.randn(3, 4), torch.randn(3, 4)), dynamic=False)
    inputs = [(torch.randn(3, 4) + shift, torch.randn(3, 4)) for shift in (-3.0, 3.0, 0.0, 1.0)]
    assert assert_equivalent(model, compiled, inputs) == 2


class ViewAs(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x, like):
        h = self.fc(x).view_as(like)
        if h.sum() > 0:
            return h * 2
        return h


def test_an_input_read_only_for_its_shape_by_view_as_is_fine():
    torch.manual_seed(4)
    model = ViewAs().eval()
    compiled = dycl.compile(model, (torch.randn(1, 4), torch.randn(2, 2)), dynamic=False)
    inputs = [(x, torch.randn(2, 2)) for x in _inputs(seed=4)]
    assert assert_equivalent(model, compiled, inputs, atol=ATOL) == 2


# -- .item() in a branch-free helper -------------------------------------------------------------------------

def normalized(x):
    scale = x.abs().max().item()  # ITEM
    return x / scale


class ItemHelper(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        h = normalized(self.fc(x))
        if h.sum() > 0:
            h = h * 3
        return h


def test_item_in_a_branch_free_helper_is_moved_to_the_host(tmp_path):
    torch.manual_seed(1)
    model = ItemHelper().eval()
    inputs = _inputs(seed=1)
    compiled = dycl.compile(model, inputs[0])
    assert ".item()" in compiled.host_source  # the helper was inlined and its .item() runs on the host
    assert _agrees(model, inputs, tmp_path) == 2


# -- a branching function in an installed package --------------------------------------------------------------

@pytest.fixture
def libpkg_is_a_library(monkeypatch):
    """Make dycl treat ``tests/soundness/libpkg`` as an installed package (opaque library code)."""
    monkeypatch.setattr(user_code, "_LIBRARY_PATHS", (*user_code._LIBRARY_PATHS, str(Path(libpkg.__file__).parent)))
    inline.is_user_code.cache_clear()
    assert not inline.is_user_code(libpkg.route)
    yield
    inline.is_user_code.cache_clear()


class LibraryRouter(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.experts = nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 4)])

    def forward(self, x):
        return libpkg.route(self.fc(x), self.experts)


class LibraryChoice(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gate = nn.Linear(4, 3)
        self.heads = nn.Parameter(torch.randn(3, 4))

    def forward(self, x):
        return libpkg.scale_by_best(x, self.gate, self.heads)


@pytest.mark.parametrize("model_class", [LibraryRouter, LibraryChoice])
def test_a_data_dependent_decision_in_a_library_is_followed_not_traced(libpkg_is_a_library, model_class, tmp_path):
    """The library function that decides is rewritten like user code (``dycl.model.library_decisions``):
    every expert the inputs pick agrees with eager, never the example's one frozen in a graph."""
    torch.manual_seed(2)
    model = model_class().eval()
    inputs = _inputs(seed=2)
    with torch.no_grad():
        if model_class is LibraryRouter:  # eager takes two paths through the library
            files = model_source_files(model) | {libpkg.__file__}
            assert len({record_path(model, x, files=files)[1] for x in inputs}) == 2
        else:  # and picks several experts
            assert len({int(model.gate(x).argmax()) for x in inputs}) >= 2
    _agrees(model, inputs, tmp_path, min_paths=1)  # the paths lie in the library: counted above


def test_the_same_function_as_user_code_is_inlined(tmp_path):
    """Outside the library paths the router is user code: inlined, two paths."""
    torch.manual_seed(2)
    model = LibraryRouter().eval()
    inputs = _inputs(seed=2)
    compiled = dycl.compile(model, inputs[0])
    assert compiled.stats["conditions"] == 1
    files = model_source_files(model) | {libpkg.__file__}
    with torch.no_grad():
        for x in inputs:
            torch.testing.assert_close(compiled(x), model(x), atol=ATOL, rtol=0)
        assert len({record_path(model, x, files=files)[1] for x in inputs}) == 2


# -- **kwargs / *args callees ------------------------------------------------------------------------------------

class KwargsGate(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 1)

    def forward(self, x, *extra, **kwargs):
        scale = kwargs.get("scale", 2.0)
        if self.fc(x).sum() > 0:
            return x * scale + len(extra)
        return x - 1


class KwargsModel(nn.Module):
    def __init__(self, call: str) -> None:
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.gate = KwargsGate()
        self.call = call

    def forward(self, x):
        h = self.a(x)
        if self.call == "plain":
            h = self.gate(h)
        elif self.call == "keyword":
            h = self.gate(h, scale=3.0)
        else:
            h = self.gate(h, 1, 2, scale=0.5)
        return h + 1


@pytest.mark.parametrize("call", ["plain", "keyword", "extra"])
def test_a_kwargs_callee_is_inlined_with_its_branch(call, tmp_path):
    torch.manual_seed(3)
    model = KwargsModel(call).eval()
    inputs = _inputs(seed=3)
    compiled = dycl.compile(model, inputs[0])
    assert compiled.stats["conditions"] == 1
    assert _agrees(model, inputs, tmp_path) == 2


class DynamicKwargs(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.gate = KwargsGate()

    def forward(self, x):
        h = self.a(x)
        return self.gate(h, scale=h.mean())


def test_a_kwargs_callee_with_a_tensor_keyword_agrees_or_is_refused():
    torch.manual_seed(3)
    model = DynamicKwargs().eval()
    inputs = _inputs(seed=3)
    try:
        compiled = dycl.compile(model, inputs[0])
    except dycl.UnsupportedError as error:
        assert "dict" in str(error)
    else:
        assert assert_equivalent(model, compiled, inputs, atol=ATOL) == 2


# -- warnings: nothing filtered globally, the exporter's deprecation visible -------------------------------------

def test_compiling_leaves_the_warning_filters_alone_and_logs_the_exporter_choice(caplog):
    import logging
    import warnings

    before = list(warnings.filters)
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.INFO, logger="dycl"):
        warnings.simplefilter("always")
        dycl.compile(_data_gate(), _inputs()[0])
    assert warnings.filters == before
    # dycl's own exporter choice is nothing the user can act on: logged, not warned (issue 31, point 5)
    assert not [w for w in caught if "TorchScript-based" in str(w.message)]
    assert any("TorchScript-based torch.onnx exporter" in r.getMessage() and r.name == "dycl.export"
               for r in caplog.records)


class LibraryPerSample(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        h = libpkg.per_sample(x, self.fc)
        if h.sum() > 0:
            return h * 2
        return h


def test_a_library_loop_over_a_symbolic_batch_is_pinned_to_the_traced_sizes(libpkg_is_a_library):
    """``for i in range(x.shape[0])`` in a library traced at batch 1 would run once for every
    batch: the graph is pinned to the batches it was traced at (1, and 2 from the other-size
    graph), with a warning at the library's line (issue 27: specialise, not refuse); any
    other batch is refused by name, never answered by the wrong graph."""
    model = LibraryPerSample().eval()
    files = model_source_files(model) | {libpkg.__file__}
    with torch.no_grad():
        paths = {record_path(model, torch.randn(b, 4), files=files)[1] for b in (1, 2, 3)}
    assert len(paths) == 3
    line = _line_of(libpkg.per_sample, "# DECISION")
    with pytest.warns(dycl.SpecialisationWarning, match=rf"libpkg.*:{line}: .*batch == 1"):
        compiled = dycl.compile(model, torch.randn(1, 4))
    generator = torch.Generator().manual_seed(0)
    inputs = [torch.randn(b, 4, generator=generator) * s for b in (1, 2) for s in (1.0, -1.0)]
    assert assert_equivalent(model, compiled, inputs, min_paths=2, atol=ATOL) == 2
    with pytest.raises(ValueError, match=r"\(batch == 1\).*got batch = 3"):
        compiled(torch.randn(3, 4))
