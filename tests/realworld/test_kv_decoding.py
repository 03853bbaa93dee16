"""Greedy decoding with a KV cache around Hugging Face LMs (issue 28): the loop users write
before they learn ``generate()``, feeding one token per step with ``past_key_values`` and
taking ``out.past_key_values`` back. transformers 5's ``DynamicCache`` (a list of
``DynamicLayer`` holding key and value tensors) crosses every sub-DNN boundary as a state
object (``hcfg.state_objects``), the ``ModelOutput`` holding it as a mapping; grouped-query
attention's ``enable_gqa`` step is translated for ONNX. Prompts stop at the end-of-sequence
token after different numbers of one-token steps (paths): in process and as a torch-free host."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import dycl
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch
from tests.realworld.decoder_corpus import VOCAB, prompts

tf = pytest.importorskip("transformers", reason="the real-world corpus needs `pip install -e .[realworld]`")


class CachedGreedyDecoder(nn.Module):
    """Greedy decoding with a KV cache: the prompt once, then one token per step."""

    def __init__(self, lm: nn.Module, max_new_tokens: int, eos_token_id: int) -> None:
        super().__init__()
        self.lm = lm
        self.max_new_tokens = max_new_tokens
        self.eos_token_id = eos_token_id

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


def _llama():
    return tf.LlamaForCausalLM(tf.LlamaConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=37, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64))


def _mixtral():
    # "batched_mm": each token's experts gathered and run as one batched matmul; the default
    # (grouped_mm, torch.histc) and the eager loop over experts are MoE work of issue 28's first bullet
    config = tf.MixtralConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=1, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, num_local_experts=4, num_experts_per_tok=2)
    config._experts_implementation = "batched_mm"
    return tf.MixtralForCausalLM(config)


def _eos_stopping_some(lm: nn.Module, inputs: list[torch.Tensor], steps: int) -> int:
    """A token that ends some of the prompts' greedy continuations early and not others."""
    free = CachedGreedyDecoder(lm, steps, eos_token_id=-1).eval()
    with torch.no_grad():
        runs = [free(ids)[0, ids.shape[1]:].tolist() for ids in inputs]
    counts = {}
    for run in runs:
        for token in set(run[:-1]):
            counts[token] = counts.get(token, 0) + 1
    return max(counts, key=lambda token: (counts[token] < len(runs), counts[token]))


@pytest.mark.slow
@pytest.mark.parametrize("build", [_llama, _mixtral], ids=["LlamaForCausalLM", "MixtralForCausalLM"])
def test_a_kv_cache_decoding_loop_agrees_with_eager(build, tmp_path):
    torch.manual_seed(0)
    lm = build().eval()
    inputs = prompts(8, 5)
    model = CachedGreedyDecoder(lm, max_new_tokens=4, eos_token_id=_eos_stopping_some(lm, inputs, 4)).eval()
    compiled = dycl.compile(model, inputs[0], dynamic={"input_ids": {1: "prompt"}})
    inputs += prompts(2, 8, seed=4) + prompts(2, 2, seed=5)
    paths = assert_equivalent(model, compiled, inputs, min_paths=2, atol=0.0)
    assert paths >= 2  # stops after different numbers of one-token steps
    report = run_host_without_torch(compiled.save(tmp_path / "kv"), model, inputs, atol=0.0)
    assert report == {"checked": len(inputs), "problems": [], "torch_loaded": False}
