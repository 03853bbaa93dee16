"""The host emitter on hand-built HCFGs (no frontend, no backend): the generated
``_forward`` of a diamond, an exit, host operations that read globals and torch's
run-time checks; each host module is run with fake sub-DNNs that record the path."""

from __future__ import annotations

import math
import textwrap
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from dycl.hcfg.annotate import annotate
from dycl.hcfg.optimize import hoist_constants
from dycl.hcfg.trace import Examples
from dycl.hostgen.emit import CallSpec, HostCodegen
from dycl.rewriter.errors import UnsupportedError

from tests.hcfg.graphs import cond, diamond, graph, host, ret, sub

# what a backend's runtime snippet defines; never called here
FAKE_RUNTIME = """
def runtime_options(**options):
    return options


def load_executable(data, entry, options=None):
    raise NotImplementedError
"""


def single_calls(hcfg) -> dict[int, CallSpec]:
    return {s.index: CallSpec({(): s.name}) for s in hcfg.sub_dnns}


def host_model(source: str, executables: dict):
    namespace: dict = {"__name__": "host"}
    exec(compile(source, "host.py", "exec", dont_inherit=True), namespace)  # noqa: S102 - the emitted host under test
    # the emitter under test reads only the manifest's inputs; a full Manifest is tests/manifest's
    return namespace["Model"](executables, SimpleNamespace(inputs=(), written_inputs=()))


class Recorder:
    """Fake sub-DNNs: each appends its name to ``path`` and returns ``function(*inputs)``."""

    def __init__(self) -> None:
        self.path: list[str] = []

    def __call__(self, name: str, function):
        def executable(*inputs):
            self.path.append(name)
            return function(*inputs)

        return executable


def test_a_diamond_becomes_an_if_around_two_calls():
    hcfg = diamond()
    lines = HostCodegen(hcfg, single_calls(hcfg), FAKE_RUNTIME).block(hcfg.body, 2)
    assert "\n".join(lines) == textwrap.indent(textwrap.dedent("""\
        a, = self._call[0](x)  # model.py:2
        if n > 0:  # model.py:3
            y, = self._call[1](a)  # model.py:4
        else:
            y, = self._call[2](x)  # model.py:6
        return y  # model.py:7"""), " " * 8)


def test_the_emitted_diamond_runs_the_sub_dnns_of_the_branch_the_condition_picks():
    hcfg = diamond()
    source = HostCodegen(hcfg, single_calls(hcfg), FAKE_RUNTIME).emit()
    recorder = Recorder()
    model = host_model(source, {"subdnn_0": recorder("0", lambda x: (x + 1,)),
                                "subdnn_1": recorder("1", lambda a: (a * 3,)),
                                "subdnn_2": recorder("2", lambda x: (x - 1,))})
    paths = set()
    for n in (-1, 0, 2, 5):
        recorder.path.clear()
        x = np.random.default_rng(n + 9).normal(size=(2, 3))
        np.testing.assert_allclose(model(x, n), (x + 1) * 3 if n > 0 else x - 1)
        paths.add(tuple(recorder.path))
    assert paths == {("0", "1"), ("0", "2")}


def test_an_exit_on_one_branch_and_the_end_that_returns_none():
    hcfg = annotate(graph(
        ("x", "n"),
        sub(0, "a = x * 2", at=2),
        cond(0, "n > 3", then=(ret("a", at=4),), at=3),
        host("n = n + 1", at=5),
        cond(1, "n > 0", then=(sub(1, "b = a + 1", at=7), host("print(b.shape)", at=8)), at=6)))
    codegen = HostCodegen(hcfg, single_calls(hcfg), FAKE_RUNTIME)
    forward = "\n".join(codegen.block(hcfg.body, 2))
    assert "return a  # model.py:4" in forward and "n = n + 1  # model.py:5" in forward
    recorder = Recorder()
    model = host_model(codegen.emit(), {"subdnn_0": recorder("0", lambda x: (x * 2,)),
                                        "subdnn_1": recorder("1", lambda a: (a + 1,))})
    seen = {}
    for n in (5, 1, -3):
        recorder.path.clear()
        result = model(np.ones(2), n)
        seen[tuple(recorder.path)] = result
    assert set(seen) == {("0",), ("0", "1")}
    assert seen[("0",)] is None  # n = -3 falls off the end: forward() returns None
    np.testing.assert_allclose(model(np.ones(2), 5), np.full(2, 2.0))  # the exit


def test_a_host_operation_that_reads_globals_gets_them_in_the_host():
    def round_up(value, multiple):
        return multiple * math.ceil(value / multiple)

    hcfg = annotate(graph(("x", "n"), host("s = math.sqrt(n)", at=2), host("m = round_up(n, 8)", at=3),
                          sub(0, "y = x * s + m", at=4), ret("y", at=5)))
    source = HostCodegen(hcfg, single_calls(hcfg), FAKE_RUNTIME,
                         globals={"math": math, "round_up": round_up, "torch": torch}).emit()
    assert "import math" in source and "def round_up(value, multiple):" in source
    model = host_model(source, {"subdnn_0": lambda m, s, x: (x * s + m,)})
    np.testing.assert_allclose(model(np.ones(2), 9), np.full(2, 3.0 + 16))


def test_a_host_operation_that_needs_torch_is_refused_at_its_line():
    hcfg = annotate(graph(("n",), host("k = torch.tensor(n)", at=2), ret("k", at=3)))
    with pytest.raises(UnsupportedError, match="'torch'") as caught:
        HostCodegen(hcfg, {}, FAKE_RUNTIME, globals={"torch": torch}).emit()
    assert caught.value.location is not None and caught.value.location.line == 2


def test_torch_checks_become_host_checks_that_raise_the_same_error():
    hcfg = annotate(graph(("x", "n"), host("torch._check(n > 0)", at=2),
                          host("torch._check_index(n < 10, lambda: 'too far')", at=3),
                          sub(0, "y = x * n", at=4), ret("y", at=5)))
    source = HostCodegen(hcfg, single_calls(hcfg), FAKE_RUNTIME, globals={"torch": torch}).emit()
    assert "if not (n > 0):  # model.py:2" in source
    model = host_model(source, {"subdnn_0": lambda n, x: (x * n,)})
    np.testing.assert_allclose(model(np.ones(2), 3), np.full(2, 3.0))
    with pytest.raises(RuntimeError, match=r"torch._check\(n > 0\) failed"):
        model(np.ones(2), 0)
    with pytest.raises(IndexError):
        model(np.ones(2), 12)


def test_list_inputs_pick_a_variant_by_length_and_scalar_outputs_become_python_numbers():
    hcfg = annotate(graph(("xs",), sub(0, "y = torch.stack(xs)", "k = y.sum()", at=2), host("m = k + 1", at=4),
                          ret("(y, m)", at=5)))
    calls = {0: CallSpec({(2,): "subdnn_0_2", (3,): "subdnn_0_3"}, list_inputs=("xs",), scalar_outputs=("k",))}
    codegen = HostCodegen(hcfg, calls, FAKE_RUNTIME)
    forward = "\n".join(codegen.block(hcfg.body, 2))
    assert "k, y = self._variant(0, (len(xs),))(*xs)  # model.py:2\n        k = k.item()" in forward
    recorder = Recorder()

    def stack(*xs):
        y = np.stack(xs)
        return np.asarray(y.sum()), y

    model = host_model(codegen.emit(), {"subdnn_0_2": recorder("2", stack), "subdnn_0_3": recorder("3", stack)})
    for length in (2, 3):
        y, m = model([np.ones(2)] * length)
        assert y.shape == (length, 2) and m == 2 * length + 1 and type(m) is float
    assert recorder.path == ["2", "3"]
    with pytest.raises(ValueError, match="compiled for list lengths"):
        model([np.ones(2)] * 4)


def test_a_hoisted_constant_is_read_from_the_models_constants():
    hcfg = annotate(graph(("x",), sub(0, "h = torch.ones(2) * 4", "y = x + h", at=2), ret("(y, h)", at=4)))
    hoisted, constants = hoist_constants(hcfg, {0: Examples(outputs=[(torch.ones(2) * 4, None)])})
    assert list(constants) == ["h@0"] and hoisted.sub_dnns[0].inputs == ("x",)
    source = HostCodegen(hoisted, single_calls(hoisted), FAKE_RUNTIME, uses_constants=True).emit()
    assert "h = _constants['h@0']  # model.py:2" in source
    namespace: dict = {}
    exec(compile(source, "host.py", "exec", dont_inherit=True), namespace)  # noqa: S102 - the emitted host under test
    model = namespace["Model"]({"subdnn_0": lambda x: (x + 4,)}, SimpleNamespace(inputs=(), written_inputs=()),
                               {"h@0": np.full(2, 4.0)})
    y, h = model(np.ones(2))
    np.testing.assert_allclose(y, np.full(2, 5.0))
    np.testing.assert_allclose(h, np.full(2, 4.0))
