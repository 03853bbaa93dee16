"""Hugging Face decoder LMs (``tests/realworld/decoder_corpus.py``) compile unmodified and
agree with eager, in-process and as a torch-free host: at the example's shapes, with a
symbolic batch and sequence length (the decoding step's one token included), inside a
user-written greedy decoding loop, and after the deprecated ``torch.onnx.symbolic_helper``
shim was imported first (as torchvision does wherever transformers finds it installed).
Needs the ``realworld`` extra. Slow cases run with ``make test-slow`` or ``DYCL_SLOW=1``."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch

import dycl
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch
from tests.realworld.corpus import run_case
from tests.realworld.decoder_corpus import GreedyDecoder, decoder_cases, decoder_lms, frequent_token, prompts

pytest.importorskip("transformers", reason="the decoder LMs need `pip install -e .[realworld]`")

FAST = {"LlamaForCausalLM (static)", "OPTForCausalLM (static)"}
CASES = decoder_cases()


def test_every_decoder_lm_of_the_issue_is_in_the_corpus():
    assert {c.name for c in CASES} >= {f"{name}{kind}" for name in (
        "LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "PhiForCausalLM", "GemmaForCausalLM",
        "GPTNeoXForCausalLM", "OPTForCausalLM") for kind in ("", " (static)")}


@pytest.mark.parametrize("case", [pytest.param(c, marks=[] if c.name in FAST else [pytest.mark.slow], id=c.name)
                                  for c in CASES])
def test_decoder_lm_agrees_with_eager(case, tmp_path):
    """Static: four calls at the example's shapes. Symbolic batch and sequence: six shapes,
    among them (2, 1) and (1, 1), where transformers' attention and mask code decide
    differently in Python (is_causal, expanding position ids): the host picks the graph
    traced for those sizes."""
    outcome = run_case(case, tmp_path)
    assert outcome.status == "pass", f"{outcome.status}: {outcome.detail}"
    calls = 4 if case.dynamic is False else 6
    assert outcome.checked == calls and outcome.host_checked == calls


@pytest.mark.slow
@pytest.mark.parametrize("name", ["LlamaForCausalLM", "GPTNeoXForCausalLM"])
def test_a_greedy_decoding_loop_around_the_lm_agrees_with_eager(name, tmp_path):
    """The loop stops at the end-of-sequence token: prompts stop after different numbers
    of steps. Compiled with a symbolic prompt length, called on prompts of the example's
    length and of others."""
    torch.manual_seed(0)
    lm = decoder_lms(layers=1)[name]().eval()
    inputs = prompts(8, 5)
    model = GreedyDecoder(lm, max_new_tokens=3, eos_token_id=frequent_token(lm, inputs, 3)).eval()
    compiled = dycl.compile(model, inputs[0], dynamic={"input_ids": {1: "prompt"}})
    inputs += prompts(2, 8, seed=4) + prompts(2, 2, seed=5)
    paths = assert_equivalent(model, compiled, inputs, min_paths=2)
    assert paths >= 2
    report = run_host_without_torch(compiled.save(tmp_path / "greedy"), model, inputs, atol=0.0)
    assert report == {"checked": len(inputs), "problems": [], "torch_loaded": False}


_SHIM_THEN_LM = """
import torch.onnx.symbolic_helper  # torchvision/ops/_register_onnx_ops.py, imported by transformers
from torch.onnx import symbolic_opset11
import torch
import transformers as tf
import dycl
assert not hasattr(torch.onnx.symbolic_helper, "_type_utils"), "the shim no longer replaces the module"

torch.manual_seed(0)
lm = tf.LlamaForCausalLM(tf.LlamaConfig(vocab_size=61, hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                                        num_key_value_heads=2, intermediate_size=37, use_cache=False)).eval()
compiled = dycl.compile(lm, kwargs={"input_ids": torch.randint(0, 61, (2, 7))}, dynamic=False)
for seed in range(3):
    ids = torch.randint(0, 61, (2, 7), generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        assert torch.allclose(compiled(input_ids=ids).logits, lm(input_ids=ids).logits, atol=1e-4), seed
print("AGREED")
"""


@pytest.mark.slow
def test_a_decoder_lm_compiles_after_the_deprecated_onnx_shim_was_imported_first(tmp_path):
    """In a fresh process, so that the import order is real: Llama's export needs dycl's
    translations of torch.diff and cumsum (transformers' packed-sequence check), which
    crashed with "torch.onnx.symbolic_helper has no attribute _type_utils". (Without
    transformers, tests/compile/test_import_order_and_batch.py checks the same.)"""
    script = tmp_path / "shim_first.py"
    script.write_text(textwrap.dedent(_SHIM_THEN_LM))
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "AGREED" in result.stdout
