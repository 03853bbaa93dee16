"""Decorated top-level forwards around and of Hugging Face LMs (issues 27/28).

A user's decoding loop whose ``forward`` carries decorators (``@torch.no_grad()``, one that
strips the prompt from the result, one that reads a keyword) compiles with its wrappers
inlined (``rewriter.decorated_entry``) and agrees with eager, KV cache crossing every
step. A whole ``LlamaForCausalLM`` called with ``use_cache=True`` is compiled through its
own decorators (``@deprecate_kwarg``, ``@can_return_tuple``) and returns its
``DynamicCache`` inside the ``ModelOutput`` (``dycl.model.records``).
"""

from __future__ import annotations

import functools

import pytest
import torch
from torch import nn

import dycl
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch
from tests.realworld.decoder_corpus import VOCAB, prompts

tf = pytest.importorskip("transformers", reason="the real-world corpus needs `pip install -e .[realworld]`")


def new_tokens_only(fn):
    """Post-processing on the tensor: drop the prompt from what the loop returns."""
    @functools.wraps(fn)
    def wrapper(self, input_ids, *args, **kwargs):
        out = fn(self, input_ids, *args, **kwargs)
        return out[:, input_ids.shape[1]:]
    return wrapper


def _llama():
    return tf.LlamaForCausalLM(tf.LlamaConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=37, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64))


class DecoratedDecoder(nn.Module):
    """Greedy decoding with a KV cache, its forward decorated as people decorate inference code."""

    def __init__(self, lm: nn.Module, max_new_tokens: int, eos_token_id: int) -> None:
        super().__init__()
        self.lm = lm
        self.max_new_tokens = max_new_tokens
        self.eos_token_id = eos_token_id

    @torch.no_grad()
    @new_tokens_only
    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        out = self.lm(input_ids, use_cache=True)
        past = out.past_key_values
        next_token = out.logits[:, -1].argmax(-1, keepdim=True)
        generated = [next_token]
        for _ in range(self.max_new_tokens - 1):
            if next_token.item() == self.eos_token_id:
                break
            out = self.lm(next_token, past_key_values=past, use_cache=True)
            past = out.past_key_values
            next_token = out.logits[:, -1].argmax(-1, keepdim=True)
            generated.append(next_token)
        return torch.cat([input_ids, *generated], dim=-1)


def _stopping_token(lm: nn.Module, inputs: list[torch.Tensor], steps: int) -> int:
    """A token that some prompts' continuations reach before their last step, and not all."""
    free = DecoratedDecoder(lm, steps, eos_token_id=-1).eval()
    runs = [free(ids)[0].tolist() for ids in inputs]
    counts: dict[int, int] = {}
    for run in runs:
        for token in set(run[:-1]):
            counts[token] = counts.get(token, 0) + 1
    return max(counts, key=lambda token: (counts[token] < len(runs), counts[token]))


@pytest.mark.slow
def test_a_decorated_kv_cache_decoding_loop_agrees_with_eager(tmp_path):
    """Before: refused at ``@new_tokens_only`` (a decorated root forward)."""
    torch.manual_seed(0)
    lm = _llama().eval()
    inputs = prompts(8, 5)
    model = DecoratedDecoder(lm, max_new_tokens=4, eos_token_id=_stopping_token(lm, inputs, 4)).eval()
    compiled = dycl.compile(model, inputs[0], dynamic={"input_ids": {1: "prompt"}})
    inputs += prompts(2, 8, seed=4) + prompts(2, 2, seed=5)
    assert assert_equivalent(model, compiled, inputs, min_paths=2, atol=0.0) >= 2  # stops after other step counts
    assert len({compiled(ids).shape[1] for ids in inputs}) >= 2
    report = run_host_without_torch(compiled.save(tmp_path / "kv"), model, inputs, atol=0.0)
    assert report == {"checked": len(inputs), "problems": [], "torch_loaded": False}


def _mixtral():
    config = tf.MixtralConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=1, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, num_local_experts=4, num_experts_per_tok=2)
    config._experts_implementation = "batched_mm"
    return tf.MixtralForCausalLM(config)


@pytest.mark.parametrize(("build", "output"),
                         [(_llama, "CausalLMOutputWithPast"), (_mixtral, "MoeCausalLMOutputWithPast")],
                         ids=["LlamaForCausalLM", "MixtralForCausalLM"])
def test_a_whole_lm_returning_its_cache_compiles_through_its_decorators(build, output):
    """Before: refused at ``@can_return_tuple`` ('decorated with ...'), then at the returned
    ``DynamicCache``. Now its decorators are compiled as callees and the cache is returned as a
    record (``dycl.model.records``; the loop feeding it back: ``test_lm_cache_boundary.py``)."""
    torch.manual_seed(0)
    lm = build().eval()
    compiled = dycl.compile(lm, (torch.randint(0, VOCAB, (2, 5)),), kwargs={"use_cache": True})
    for seed in range(3):
        ids = torch.randint(0, VOCAB, (2, 5), generator=torch.Generator().manual_seed(seed))
        with torch.no_grad():
            want, got = lm(ids, use_cache=True), compiled(ids, use_cache=True)
        assert type(got).__name__ == output and isinstance(got.past_key_values, tf.DynamicCache)
        torch.testing.assert_close(got.logits, want.logits, atol=1e-4, rtol=0)
        for mine, theirs in zip(got.past_key_values.layers, want.past_key_values.layers, strict=True):
            torch.testing.assert_close(mine.keys, theirs.keys, atol=1e-4, rtol=0)
            torch.testing.assert_close(mine.values, theirs.values, atol=1e-4, rtol=0)
