"""Generated hosts of zoo models, built from the runtime modules and the ``HostProgram``: the
same results as eager on inputs over several paths, in process and in a torch-free process
from the saved artifact; the sub-DNNs the host calls are the ones its program's line map
says (coverage's record against the executables actually called); the saved host rebuilds
the same program from its own table."""

from __future__ import annotations

import importlib
import warnings
from contextlib import contextmanager

import pytest
from dycl.hcfg.levers import Levers
from dycl.hostgen.program import HostProgram

import dycl
from dycl.harness.coverage import HostCoverage, host_program
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch

ATOL = 1e-4


@contextmanager
def _recording(host, called: list[int]):
    """Make every sub-DNN of ``host`` append its index to ``called`` when it runs; put the
    host's own executables back on leaving."""

    def wrap(index, executable):
        def run(*args):
            called.append(index)
            return executable(*args)

        return run

    calls, variants_before = dict(host._call), {index: dict(v) for index, v in host._variants.items()}
    for index in list(host._call):
        host._call[index] = wrap(index, host._call[index])
    for index, variants in host._variants.items():
        for key in list(variants):
            variants[key] = wrap(index, variants[key])
    try:
        yield
    finally:
        host._call.update(calls)
        for index, variants in host._variants.items():
            variants.update(variants_before[index])


@pytest.mark.parametrize("name", ["models.ranet", "models.sdn_vgg19"])
def test_zoo_hosts_match_eager_and_call_what_their_program_says(name, tmp_path):
    warnings.simplefilter("ignore")
    zoo = importlib.import_module(name)
    model, example = zoo.build()
    # the host form: its sub-DNN calls are recorded (the one graph "auto" may pick has one)
    compiled = dycl.compile(model, example, optimize=Levers(single_graph="off"))
    inputs = [zoo.sample(seed) for seed in range(24)]
    assert assert_equivalent(model, compiled, inputs, min_paths=3, atol=ATOL) >= 3
    program = host_program(compiled)
    recorder = HostCoverage(compiled._host, program)
    called: list[int] = []
    traces = set()
    with _recording(compiled._host, called):
        for x in inputs:
            called.clear()
            _, trace = recorder.record(compiled, x)
            assert trace.ran == frozenset(called) and len(called) == len(set(called))
            traces.add(trace.outcomes)
    assert len(traces) >= 3  # host paths
    artifact = compiled.save(tmp_path / "zoo")
    loaded = dycl.load(artifact)
    assert HostProgram.of_model(type(loaded._host), loaded.host_source) == program
    report = run_host_without_torch(artifact, model, inputs, ATOL)
    assert report["problems"] == [] and report["checked"] == len(inputs)
