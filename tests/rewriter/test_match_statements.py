"""``match`` on values compiles (issue 27): golden snippets of ``rewriter.match_statements``
and the eager-equivalence check, in process and through the torch-free host."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest
import torch
import torch.nn as nn
from dycl.rewriter.match_statements import lower_match_statements

import dycl
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch

ATOL = 1e-5


def _lowered(source: str) -> str:
    definition = cst.parse_module(textwrap.dedent(source)).body[0]
    return cst.Module([lower_match_statements(definition)]).code


def _same(actual: str, expected: str) -> None:
    assert actual == textwrap.dedent(expected).lstrip("\n").rstrip(" "), actual


def test_value_cases_become_an_if_chain_on_the_subject_evaluated_once():
    _same(_lowered("""
        def forward(self, x):
            match int(x.sum() > 0):
                case 1:
                    x = x * 2
                case 2 | 3:
                    x = -x
                case _:
                    x = x + 1
            return x
        """), """
        def forward(self, x):
            match_subject = int(x.sum() > 0)
            if match_subject == 1:
                x = x * 2
            else:
                if (match_subject == 2) or (match_subject == 3):
                    x = -x
                else:
                    x = x + 1
            return x
        """)


def test_a_capture_binds_the_subject_and_a_guard_joins_the_test():
    _same(_lowered("""
        def forward(self, x):
            match self.mode:
                case None:
                    return x
                case "relu" if x.mean() > 0:
                    return x.relu()
                case other:
                    return x * other
        """), """
        def forward(self, x):
            match_subject = self.mode
            if match_subject is None:
                return x
            else:
                if (match_subject == "relu") and (x.mean() > 0):
                    return x.relu()
                else:
                    other = match_subject
                    return x * other
        """)


def test_sequence_and_class_patterns_are_left_for_the_refusal():
    source = """
        def forward(self, x):
            match x.shape:
                case (a, b):
                    return x
            return x
        """
    _same(_lowered(source), source)


class Router(nn.Module):
    """Routes on a bucket computed from data and on a mode name chosen from data, with ``match``."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        mode = "sharpen" if x.mean() > 0 else "smooth"
        match int(x.sum() > 0) + int(x.max() > 1.5):
            case 2:
                h = self.fc(x)
            case 1:
                h = x * 0.5
            case _:
                h = torch.tanh(x)
        match mode:
            case "sharpen":
                return h * 2
            case "smooth" | "flat":
                return h.clamp(-0.5, 0.5)
        return h


@pytest.mark.parametrize("backend", ["onnxruntime", "torch"])
def test_match_on_data_compiles_and_agrees(backend, tmp_path):
    torch.manual_seed(0)
    model = Router().eval()
    generator = torch.Generator().manual_seed(1)
    inputs = [torch.randn(2, 4, generator=generator) * s + s for s in (0.1, -1, 2, 3, -2, 0.5, 1.5, -0.3)]
    compiled = dycl.compile(model, inputs[0], backend=backend)
    assert compiled.stats["conditions"] >= 3
    assert assert_equivalent(model, compiled, inputs, atol=ATOL) >= 3
    if backend == "onnxruntime":
        report = run_host_without_torch(compiled.save(tmp_path / "net"), model, inputs, ATOL)
        assert report == {"checked": len(inputs), "problems": [], "torch_loaded": False}
