"""GPT-2 called without an attention mask (issue 15): transformers then detects packed
sequences with ``torch.diff`` and ``(diff != 1).cumsum(-1)`` behind ``not is_tracing(...)``.
At the example's shapes it compiles and agrees with eager, in-process and as a torch-free
host; with a symbolic batch and sequence length the library compares shapes in Python
(``if batch_size != position_ids.shape[0]``), which the host checks (``dycl.export.shape_guards``),
with a second graph traced at a batch of 1 for the calls the first one does not cover."""

from __future__ import annotations

import pytest
import torch
from dycl.hcfg.levers import Levers

import dycl
from dycl.harness.testing_host import Call
from tests.realworld.corpus import Case, run_case

tf = pytest.importorskip("transformers", reason="the real-world corpus needs `pip install -e .[realworld]`")


def _gpt2():
    return tf.GPT2LMHeadModel(tf.GPT2Config(vocab_size=99, n_embd=32, n_layer=2, n_head=2, n_positions=64,
                                            use_cache=False))


def _calls(model, args, kwargs):
    generator = torch.Generator().manual_seed(8)
    return [Call((), {"input_ids": torch.randint(0, 99, (2, 7), generator=generator)}) for _ in range(4)]


@pytest.mark.slow
def test_gpt2_without_a_mask_agrees_at_the_example_shapes(tmp_path):
    case = Case("GPT2LMHeadModel static", "transformers",
                lambda: (_gpt2(), (), {"input_ids": torch.randint(0, 99, (2, 7))}), _calls, dynamic=False)
    outcome = run_case(case, tmp_path)
    assert outcome.status == "pass", outcome.detail
    assert outcome.checked == 4 and outcome.host_checked == 4


@pytest.mark.slow
def test_gpt2_without_a_mask_and_symbolic_shapes_agrees_at_a_batch_of_one_too():
    model = _gpt2().eval()
    # the guards read below are the host form's sub-DNN entries: "auto" may keep the one graph by timing
    compiled = dycl.compile(model, kwargs={"input_ids": torch.randint(0, 99, (2, 7))},
                            dynamic={"input_ids": {0: "batch", 1: "seq"}}, optimize=Levers(single_graph="off"))
    guarded = [entry for entry in compiled.manifest.sub_dnns.values() if entry.guards]
    assert any("masking_utils.py:" in guard.where for entry in guarded for guard in entry.guards)
    assert any(entry.otherwise for entry in guarded)
    generator = torch.Generator().manual_seed(9)
    for size in ((1, 5), (2, 7), (3, 12), (1, 2)):
        ids = torch.randint(0, 99, size, generator=generator)
        assert torch.allclose(compiled(input_ids=ids).logits, model(input_ids=ids).logits, atol=1e-4)
