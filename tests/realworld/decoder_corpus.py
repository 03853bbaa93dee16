"""The ``decoder`` group of the real-world corpus: Hugging Face causal LMs and a greedy
decoding loop written around one, as users write it.

Seven decoder-only LMs from tiny configs (random weights, seeded, nothing
downloaded), called as a tokenizer's ``input_ids`` call them: at the example's
shapes (``dynamic=False``) and with a symbolic batch and sequence length, down to
the decoding step's one token of one sample. ``GreedyDecoder`` is the loop people
write before they learn ``generate()``: it stops at an end-of-sequence token, so
prompts take different numbers of steps (paths).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import torch
from torch import nn

from dycl.harness.testing_host import Call
from tests.realworld.corpus import Case

VOCAB = 61
_TOKENS = [(2, 7), (1, 3), (3, 12), (2, 1), (1, 1), (4, 5)]  # (2, 1) and (1, 1): a decoding step
_TOKEN_DIMS = {"input_ids": {0: "batch", 1: "seq"}}


def decoder_lms(layers: int = 2) -> dict[str, Callable[[], nn.Module]]:
    """name -> a builder of the tiny LM with ``layers`` layers (empty where transformers
    is not installed)."""
    try:
        import transformers as tf
    except Exception:  # noqa: BLE001 - an optional dependency
        return {}
    sizes = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=layers, num_attention_heads=4,
                 intermediate_size=37, max_position_embeddings=64, use_cache=False)
    grouped = dict(sizes, num_key_value_heads=2)  # grouped-query attention, as these models ship
    return {
        "LlamaForCausalLM": lambda: tf.LlamaForCausalLM(tf.LlamaConfig(**grouped)),
        "MistralForCausalLM": lambda: tf.MistralForCausalLM(tf.MistralConfig(**grouped)),
        "Qwen2ForCausalLM": lambda: tf.Qwen2ForCausalLM(tf.Qwen2Config(**grouped)),
        "PhiForCausalLM": lambda: tf.PhiForCausalLM(tf.PhiConfig(**sizes)),
        "GemmaForCausalLM": lambda: tf.GemmaForCausalLM(tf.GemmaConfig(head_dim=8, **grouped)),
        "GPTNeoXForCausalLM": lambda: tf.GPTNeoXForCausalLM(tf.GPTNeoXConfig(**sizes)),
        "OPTForCausalLM": lambda: tf.OPTForCausalLM(tf.OPTConfig(
            vocab_size=VOCAB, hidden_size=32, num_hidden_layers=layers, num_attention_heads=4, ffn_dim=37,
            max_position_embeddings=64, word_embed_proj_dim=32, use_cache=False)),
    }


def _token_calls(sizes: list[tuple[int, int]]) -> Callable:
    def calls(model, args, kwargs) -> list[Call]:
        generator = torch.Generator().manual_seed(7)
        return [Call((), {"input_ids": torch.randint(0, VOCAB, size, generator=generator)}) for size in sizes]
    return calls


def decoder_cases() -> list[Case]:
    cases = []
    for name, make in decoder_lms().items():
        def build(make=make):
            torch.manual_seed(0)
            return make(), (), {"input_ids": torch.randint(0, VOCAB, (2, 7))}
        cases.append(Case(f"{name} (static)", "decoder", build, _token_calls([(2, 7)] * 4), False))
        cases.append(Case(name, "decoder", build, _token_calls(_TOKENS), _TOKEN_DIMS))
    return cases


class GreedyDecoder(nn.Module):
    """Greedy decoding without a cache: one forward pass per new token, until the
    end-of-sequence token or ``max_new_tokens``."""

    def __init__(self, lm: nn.Module, max_new_tokens: int, eos_token_id: int) -> None:
        super().__init__()
        self.lm = lm
        self.max_new_tokens = max_new_tokens
        self.eos_token_id = eos_token_id

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        for step in range(self.max_new_tokens):
            logits = self.lm(input_ids).logits
            next_token = logits[:, -1].argmax(-1)
            input_ids = torch.cat([input_ids, next_token[:, None]], dim=-1)
            if next_token.item() == self.eos_token_id:
                break
        return input_ids


def prompts(count: int, length: int, seed: int = 3) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randint(0, VOCAB, (1, length), generator=generator) for _ in range(count)]


def frequent_token(lm: nn.Module, inputs: list[torch.Tensor], steps: int) -> int:
    """The token ``lm`` most often generates in its first ``steps`` greedy steps on
    ``inputs``: as end-of-sequence it stops some prompts early and not others."""
    free = GreedyDecoder(lm, steps, eos_token_id=-1).eval()
    with torch.no_grad():
        generated = [token for ids in inputs for token in free(ids)[0, ids.shape[1]:].tolist()]
    return Counter(generated).most_common(1)[0][0]


__all__ = ["GreedyDecoder", "VOCAB", "decoder_cases", "decoder_lms", "frequent_token", "prompts"]
