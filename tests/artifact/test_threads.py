"""Every host is thread-safe: 8 threads x 300 calls give the single-threaded
results (which equal eager) on the in-process model, on the saved ONNX Runtime
host with every host setting, and on the TVM host. The inputs take both paths
with three batch sizes, so that per-call state (IOBinding shapes, VM registers)
shared between threads would show."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

import dycl
from dycl.harness.testing import assert_equivalent
from tests.artifact.hammer import hammer_host
from tests.artifact.models import gate, gate_inputs

ATOL = 1e-5


def test_in_process_model_from_eight_threads():
    model, inputs = gate(), gate_inputs()
    compiled = dycl.compile(model, inputs[0], threads=2)
    assert assert_equivalent(model, compiled, inputs, min_paths=2, atol=ATOL) == 2
    single = [compiled(x) for x in inputs]
    wrong = []

    def worker(k: int) -> int:
        for i in range(300):
            j = (i * 7 + k * 13) % len(inputs)
            logits, steps = compiled(inputs[j])
            if steps != single[j][1] or not torch.equal(logits, single[j][0]):
                wrong.append((k, i, j))
        return 300

    assert _calls_from_threads(worker, 8) == 2400  # an exception in a worker is raised here
    assert wrong == []


def _calls_from_threads(worker, threads: int) -> int:
    """Run ``worker(k)`` on ``threads`` threads at once; the sum of their results, or the
    first exception a worker raised (``Future.result`` re-raises it in the test's thread)."""
    with ThreadPoolExecutor(max_workers=threads) as pool:
        futures = [pool.submit(worker, k) for k in range(threads)]
        return sum(future.result() for future in futures)


def test_an_exception_in_a_worker_thread_fails_the_test():
    def worker(k: int) -> int:
        if k == 3:
            raise RuntimeError("worker 3 failed")
        return 1

    with pytest.raises(RuntimeError, match="worker 3 failed"):
        _calls_from_threads(worker, 8)


SETTINGS = {
    "default": ({}, {}),
    "IOBinding": ({"DYCL_ORT_CALL": "iobinding"}, {}),
    "sessions created on first call": ({"DYCL_ORT_LOAD": "lazy"}, {}),
    "lazy IOBinding": ({"DYCL_ORT_LOAD": "lazy", "DYCL_ORT_CALL": "iobinding"}, {}),
    "one global pool": ({}, {"shared_pool": True}),
    "one thread per session": ({}, {"threads": 1}),
}


@pytest.fixture(scope="module")
def ort_artifact(tmp_path_factory):
    model, inputs = gate(), gate_inputs()
    return dycl.compile(model, inputs[0]).save(tmp_path_factory.mktemp("threads") / "net")


@pytest.mark.parametrize("setting", sorted(SETTINGS))
def test_onnxruntime_host_from_eight_threads(setting, ort_artifact):
    env, options = SETTINGS[setting]
    report = hammer_host(ort_artifact, gate(), gate_inputs(), ATOL, env=env, options=options)
    assert report == {"calls": 2400, "wrong": 0, "first": [], "near_eager": True}


def test_tvm_host_from_eight_threads(tmp_path):
    pytest.importorskip("tvm", reason="the TVM backend needs the extra: pip install 'dycl[tvm]'")
    model, inputs = gate(), gate_inputs()
    compiled = dycl.compile(model, inputs[0], backend="tvm")  # kernels come from the build cache after one run
    assert assert_equivalent(model, compiled, inputs, min_paths=2, atol=ATOL) == 2
    report = hammer_host(compiled.save(tmp_path / "net"), model, inputs, ATOL)
    assert report == {"calls": 2400, "wrong": 0, "first": [], "near_eager": True}
