"""Tiny Hugging Face mixture-of-experts causal LMs (random weights, seeded, nothing downloaded).

Every family here routes each token to ``top_k`` of a few experts with transformers 5's
shared experts code: ``experts="eager"`` is the loop over the experts hit
(``nonzero()`` of the expert mask, ``torch.where``, ``index_add_``), the default
(``None``) the grouped implementation (``torch.histc`` counts, ``F.grouped_mm``).
Sizes are multiples of four floats: the CPU grouped matmul needs 16-byte strides.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

VOCAB = 61
_ATTENTION = dict(vocab_size=VOCAB, hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                  max_position_embeddings=64, use_cache=False)


def _configs(tf) -> dict[str, tuple[type, Callable[[], object]]]:
    return {
        "MixtralForCausalLM": (tf.MixtralForCausalLM, lambda: tf.MixtralConfig(
            num_hidden_layers=1, intermediate_size=32, num_local_experts=4, num_experts_per_tok=2, **_ATTENTION)),
        "Qwen2MoeForCausalLM": (tf.Qwen2MoeForCausalLM, lambda: tf.Qwen2MoeConfig(
            num_hidden_layers=1, intermediate_size=32, moe_intermediate_size=16, shared_expert_intermediate_size=32,
            num_experts=4, num_experts_per_tok=2, **_ATTENTION)),
        "OlmoeForCausalLM": (tf.OlmoeForCausalLM, lambda: tf.OlmoeConfig(
            num_hidden_layers=1, intermediate_size=32, num_experts=4, num_experts_per_tok=2, **_ATTENTION)),
        "PhimoeForCausalLM": (tf.PhimoeForCausalLM, lambda: tf.PhimoeConfig(
            num_hidden_layers=1, intermediate_size=32, num_local_experts=4, num_experts_per_tok=2, **_ATTENTION)),
        "GraniteMoeForCausalLM": (tf.GraniteMoeForCausalLM, lambda: tf.GraniteMoeConfig(
            num_hidden_layers=1, intermediate_size=32, num_local_experts=4, num_experts_per_tok=2, **_ATTENTION)),
        "DeepseekV3ForCausalLM": (tf.DeepseekV3ForCausalLM, lambda: tf.DeepseekV3Config(
            num_hidden_layers=2, first_k_dense_replace=1, intermediate_size=32, moe_intermediate_size=16,
            n_routed_experts=4, num_experts_per_tok=2, n_shared_experts=1, n_group=1, topk_group=1,
            q_lora_rank=16, kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=8,
            **dict(_ATTENTION, num_key_value_heads=4))),
    }


def build_jetmoe_lm(seed: int = 0) -> nn.Module:
    """A tiny ``JetMoeForCausalLM`` (its router counts tokens per expert with ``.tolist()``)."""
    import transformers as tf

    config = tf.JetMoeConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=1, num_key_value_heads=2,
                             kv_channels=8, intermediate_size=32, max_position_embeddings=64, num_local_experts=4,
                             num_experts_per_tok=2, use_cache=False)
    torch.manual_seed(seed)
    return tf.JetMoeForCausalLM(config).eval()


def moe_lm_names() -> list[str]:
    return ["MixtralForCausalLM", "Qwen2MoeForCausalLM", "OlmoeForCausalLM", "PhimoeForCausalLM",
            "GraniteMoeForCausalLM", "DeepseekV3ForCausalLM"]


def build_moe_lm(name: str, experts: str | None = None, seed: int = 0) -> nn.Module:
    """The tiny ``name`` in eval mode; ``experts``: transformers' ``experts_implementation``
    (None: its default)."""
    import transformers as tf

    cls, config = _configs(tf)[name]
    made = config()
    if experts is not None:
        made._experts_implementation = experts
    torch.manual_seed(seed)
    return cls(made).eval()


def token_batches(count: int, seed: int = 7) -> list[torch.Tensor]:
    """``count`` random ``input_ids`` of assorted (batch, sequence) sizes, batch 1 and sequence 1 included."""
    sizes = [(1, 1), (2, 7), (1, 5), (3, 4), (2, 1), (4, 9), (1, 12), (3, 2)]
    generator = torch.Generator().manual_seed(seed)
    return [torch.randint(0, VOCAB, sizes[i % len(sizes)], generator=generator) for i in range(count)]


def moe_block(lm: nn.Module) -> nn.Module:
    """The sparse MoE block of ``lm``'s last layer."""
    layer = lm.model.layers[-1]
    return layer.mlp if hasattr(layer, "mlp") else layer.block_sparse_moe


def experts_hit(lm: nn.Module, input_ids: torch.Tensor) -> frozenset[int]:
    """The experts eager PyTorch runs for ``input_ids`` (over every MoE layer): the
    ``top_k_index`` handed to each experts module."""
    hit: set[int] = set()

    def record(module, args, kwargs):
        index = kwargs.get("top_k_index", args[1] if len(args) > 1 else None)
        hit.update(int(e) for e in index.unique())

    handles = [m.register_forward_pre_hook(record, with_kwargs=True) for m in lm.modules()
               if hasattr(type(m), "_apply_gate")]  # the classes @use_experts_implementation made
    try:
        with torch.no_grad():
            lm(input_ids)
    finally:
        for handle in handles:
            handle.remove()
    return frozenset(hit)
