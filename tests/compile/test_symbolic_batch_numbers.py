"""Issue 27: a Python int computed from the symbolic batch inside code exported as one
graph stays symbolic where the graph serves every batch size: ``len(x)`` inside a
submodule's forward (the DyCL authors' SDN blocks: ``torch.zeros([len(x), classes])``)
and a start-token batch built by list repetition (``torch.LongTensor([[start]] * n)``).
Each model compiles on a batch-1 example without a ``SpecialisationWarning`` and agrees
with eager at batch 1, 2 and 5, in process and through the torch-free host."""

from __future__ import annotations

import warnings

import libcst as cst
import pytest
import torch
from torch import nn

import dycl
from dycl.export.opaque_lengths import traced_len, traced_module_lengths
from dycl.export.size_numbers import SizeNumbers, size_calls
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch

BATCHES = (1, 2, 5)


class Block(nn.Module):
    """A conv block; without an exit head it hands back an empty score buffer of its own."""

    def __init__(self, cin: int, cout: int, classes: int, head: bool) -> None:
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU())
        self.classes = classes
        self.head = nn.Linear(cout, classes) if head else None
        if not head:
            self.forward = self.no_exit

    def forward(self, x):
        out = self.conv(x)
        return out, torch.tensor(1), self.head(out.mean((2, 3)))

    def no_exit(self, x):
        return self.conv(x), torch.tensor(0), torch.zeros([len(x), self.classes])


class NewZerosBlock(nn.Module):
    def __init__(self, width: int, classes: int) -> None:
        super().__init__()
        self.fc = nn.Linear(width, width)
        self.classes = classes

    def forward(self, h):
        scores = h.new_zeros(h.size(0), self.classes)
        scores[:, 0] = h.sum(1)
        return torch.relu(self.fc(h)), scores


class EarlyExitNet(nn.Module):
    """Stops at the first head whose mean confidence passes the threshold."""

    def __init__(self, threshold: float = 0.3) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([Block(3, 8, 4, False), Block(8, 8, 4, True), Block(8, 8, 4, False),
                                     Block(8, 8, 4, True)])
        self.tail = NewZerosBlock(8, 4)
        self.last = nn.Linear(8, 4)
        self.threshold = threshold

    def forward(self, x):
        for block in self.blocks:
            x, has_exit, scores = block(x)
            if has_exit:  # noqa: SIM102 - nested as people write it
                if scores.softmax(1).max(1).values.mean() > self.threshold:
                    return scores
        h, extra = self.tail(x.mean((2, 3)))
        return self.last(h) + extra


def _inputs(shape: tuple[int, ...]) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(3)
    return [torch.randn(batch, *shape, generator=generator) * scale for batch in BATCHES for scale in (0.1, 1, 4, 9)]


def _compile_without_specialising(model: nn.Module, example: torch.Tensor) -> dycl.CompiledModel:
    with warnings.catch_warnings():
        warnings.simplefilter("error", dycl.SpecialisationWarning)
        return dycl.compile(model, example)


def test_len_of_the_batch_inside_a_submodule_stays_symbolic(tmp_path):
    torch.manual_seed(0)
    model = EarlyExitNet().eval()
    forwards = [vars(block).get("forward") for block in model.blocks]
    compiled = _compile_without_specialising(model, torch.randn(1, 3, 8, 8))
    assert all(vars(block).get("forward") is f for block, f in zip(model.blocks, forwards))  # the model's own
    inputs = _inputs((3, 8, 8))
    assert assert_equivalent(model, compiled, inputs, min_paths=2, atol=1e-5) >= 2
    assert {x.shape[0] for x in inputs} == set(BATCHES)
    report = run_host_without_torch(compiled.save(tmp_path / "exits"), model, inputs, atol=1e-5)
    assert report == {"checked": len(inputs), "problems": [], "torch_loaded": False}


class Captioner(nn.Module):
    """Greedy decoding from a <start> token per image, until every caption has ended."""

    def __init__(self, vocab: int = 12, width: int = 8, start: int = 1, end: int = 2, steps: int = 4) -> None:
        super().__init__()
        self.encoder = nn.Linear(6, width)
        self.embed = nn.Embedding(vocab, width)
        self.cell = nn.GRUCell(width, width)
        self.head = nn.Linear(width, vocab)
        self.word_map = {"<start>": start, "<end>": end}
        self.steps = steps

    def forward(self, features):
        hidden = torch.tanh(self.encoder(features))
        prev_words = torch.LongTensor([[self.word_map["<start>"]]] * features.size(0))
        seqs = prev_words
        for _ in range(self.steps):
            hidden = self.cell(self.embed(prev_words).squeeze(1), hidden)
            prev_words = self.head(hidden).argmax(-1, keepdim=True)
            seqs = torch.cat([seqs, prev_words], dim=1)
            if (prev_words == self.word_map["<end>"]).all():
                break
        return seqs


def test_a_start_token_list_repeated_by_the_batch_stays_symbolic(tmp_path):
    torch.manual_seed(0)
    model = Captioner().eval()
    with torch.no_grad():  # make <end> likely, so that captions stop after different numbers of steps
        model.head.bias[2] += 0.8
    compiled = _compile_without_specialising(model, torch.randn(1, 6))
    inputs = _inputs((6,))
    assert assert_equivalent(model, compiled, inputs, min_paths=2) >= 2
    report = run_host_without_torch(compiled.save(tmp_path / "captioner"), model, inputs, atol=0.0)
    assert report == {"checked": len(inputs), "problems": [], "torch_loaded": False}


def _rewritten(source: str, numbers: set[str]) -> str:
    statement = cst.parse_module(source).body[0]
    namespace = {"torch": torch}
    local = {"x", "n", "words", "items"}
    return cst.Module([size_calls(statement, namespace, local, set(numbers), "sizes")]).code


def test_golden_a_list_repeated_by_a_size_goes_to_repeat_list():
    assert _rewritten("words = torch.LongTensor([[1]] * x.size(0))\n", set()) == (
        "words = sizes.repeat_list(torch.LongTensor, [[1]], x.size(0))\n")
    assert _rewritten("words = torch.tensor(n * [2, 3], dtype=torch.long)\n", {"n"}) == (
        "words = sizes.repeat_list(torch.tensor, [2, 3], n, dtype=torch.long)\n")
    # a count that reads no size, a list not written out, a constructor that is not torch's: as written
    for kept in ("words = torch.LongTensor([[1]] * 3)\n", "words = torch.LongTensor(items * x.size(0))\n",
                 "words = list([[1]] * x.size(0))\n"):
        assert _rewritten(kept, set()) == kept


@pytest.mark.parametrize("constructor, items, options", [
    (torch.LongTensor, [[4]], {}), (torch.tensor, [1.5, -2.0], {}), (torch.tensor, [[1, 2], [3, 4]], {}),
    (torch.as_tensor, ([7],), {"dtype": torch.int32})])
def test_repeat_list_equals_python_list_repetition(constructor, items, options):
    sizes = SizeNumbers(None)
    for count in (1, 2, 3, 6):
        expected = constructor(items * count, **options)
        for given in (count, torch.tensor(count)):  # a Python count, and the 0-d tensor the trace hands it
            actual = sizes.repeat_list(constructor, items, given, **options)
            assert actual.dtype == expected.dtype and torch.equal(actual, expected), (count, given)


def test_golden_a_call_of_a_submodule_that_reads_len_goes_to_its_stand_in():
    model = EarlyExitNet().eval()
    statements = [cst.parse_module(code).body[0] for code in (
        "x, has_exit, scores = self.blocks[0](x)\n",  # forward = no_exit, which reads len
        "x, has_exit, scores = self.blocks[1](x)\n",  # forward reads no len: kept
        "x, has_exit, scores = self.blocks[2](x)\n",
        "y = blocks(x)\n")]  # a local variable: not resolved
    namespace: dict = {}
    out = traced_module_lengths(statements, namespace, {"x", "blocks", "self"}, ("self", model))
    assert [cst.Module([s]).code for s in out] == [
        "x, has_exit, scores = _dycl_traced_len_0(x)\n", "x, has_exit, scores = self.blocks[1](x)\n",
        "x, has_exit, scores = _dycl_traced_len_1(x)\n", "y = blocks(x)\n"]
    stand_in = namespace["_dycl_traced_len_0"]
    assert stand_in is not model.blocks[0] and stand_in.conv is model.blocks[0].conv  # same parameters
    x = torch.randn(3, 3, 8, 8)
    for got, expected in zip(stand_in(x), model.blocks[0](x)):  # outside a trace: the same as the original
        assert torch.equal(got, expected)
    assert traced_len([1, 2]) == 2 and traced_len(x) == 3 and type(traced_len(x)) is int
