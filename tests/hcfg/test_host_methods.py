"""Tensor methods the host evaluates on numpy arrays (``hcfg.host_methods``): every entry of
the table computes on an array what torch computes on the tensor; a model whose example leaves
``t.amax(-1)`` to the host (the branch that reads it is not the example's, where ``t`` is empty)
compiles and agrees with eager in process and as a torch-free host on inputs taking both
branches; a tensor method numpy lacks is refused at the user's line, never a host AttributeError."""

from __future__ import annotations

import inspect

import libcst as cst
import numpy as np
import pytest
import torch
from dycl.hcfg.host_methods import host_tensor_method
from torch import nn

import dycl
from dycl.harness.host_agreement import assert_agrees_in_process_and_as_host

_CALLS = ["t.amax(-1)", "t.amax(0)", "t.amax(dim=1, keepdim=True)", "t.amin(-1)", "t.amin(1, True)",
          "t.amin(dim=0)", "t.max()", "t.min()", "t.sum()", "t.any()", "t.all()", "t.tolist()"]


def _host_form(source: str) -> str:
    call = cst.parse_expression(source)
    refused: list[str] = []
    new = host_tensor_method(call, lambda e: isinstance(e, cst.Name) and e.value == "t", refused.append)
    assert not refused, refused
    return cst.Module([]).code_for_node(new)


@pytest.mark.parametrize("source", _CALLS)
def test_each_translation_computes_what_torch_computes(source):
    generator = torch.Generator().manual_seed(3)
    for tensor in (torch.randn(3, 4, generator=generator), torch.randint(-3, 3, (2, 5), generator=generator),
                   torch.randn(3, 4, generator=generator) > 0):
        expected = eval(source, {"t": tensor})  # noqa: S307 - the table's own expressions
        actual = eval(_host_form(source), {"t": tensor.numpy()})  # noqa: S307
        expected = expected if isinstance(expected, list) else np.asarray(expected)
        # sum adds float32 in another order: equal to rounding, exact elsewhere
        assert np.allclose(np.asarray(actual), np.asarray(expected), rtol=1e-6, atol=0), (source, tensor)
        assert np.asarray(actual).shape == np.asarray(expected).shape


@pytest.mark.parametrize("source", ["t.max(0)", "t.amax(-1, out=o)", "t.softmax(-1)", "t.sum(-1)", "t.argmax()"])
def test_a_method_without_a_checked_translation_is_refused(source):
    refused: list[str] = []
    host_tensor_method(cst.parse_expression(source), lambda e: True, refused.append)
    assert refused == [source[2:].split("(")[0]]


class Peak(nn.Module):
    """The largest positive prefix value, as a user writes a guard before a reduction."""

    def forward(self, x):
        h = x * 2
        k = int((h > 0).sum())
        top = h[:, :k]
        if top.numel() > 0 and top.max() > 0.5:
            return top.amax(-1) + 1, h.sum(-1)
        return h.sum(-1), h[:, 0]


def test_amax_left_to_the_host_agrees_with_eager(tmp_path):
    generator = torch.Generator().manual_seed(4)
    # the example has no positive value: top is empty, the branch reading top.amax(-1) is not its
    inputs = [-torch.rand(2, 5, generator=generator) - 0.1] + [
        torch.randn(2, 5, generator=generator) * (i % 3) for i in range(14)]
    assert_agrees_in_process_and_as_host(Peak().eval(), inputs, tmp_path, 1e-5)
    top = [(x * 2)[:, :int((x > 0).sum())] for x in inputs]
    branches = {bool(t.numel() > 0 and t.max() > 0.5) for t in top}
    assert len(branches) == 2


class Unknown(nn.Module):
    def forward(self, x):
        k = int((x > 0).sum())
        top = x[:, :k]
        if top.numel() > 0:
            return top.median(-1).values
        return x.sum(-1)


def test_a_host_method_numpy_lacks_is_refused_at_the_users_line():
    with pytest.raises(dycl.UnsupportedError) as caught:
        dycl.compile(Unknown().eval(), -torch.rand(2, 5) - 0.1, progress=False)
    line = inspect.getsourcelines(Unknown.forward)[1]
    assert f"test_host_methods.py:{line + 4}" in str(caught.value)
    assert ".median(" in str(caught.value)
