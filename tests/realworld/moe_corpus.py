"""The ``moe`` group of the real-world corpus: mixture-of-experts and routing layers.

Layers from real packages built with tiny sizes and random weights (nothing is
downloaded): ``transformers`` (Mixtral, Switch Transformers, Qwen2-MoE, OLMoE),
``st-moe-pytorch``, ``mixture-of-experts`` and ``soft-moe-pytorch`` (the
``realworld`` extra), plus the paper-style layers of ``tests/realworld/moe_models``.
A package that is not installed leaves its cases out (``moe_missing`` says which).

Every case is called on hidden states of several batch sizes, sequence lengths and
scales, so that the number of tokens each expert gets varies, down to experts
with none (``tokens_per_expert`` counts them for the tests).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

import torch

from dycl.harness.testing_host import Call
from tests.realworld import moe_models
from tests.realworld.corpus import Case

DIM = 16
#: (batch, sequence length, scale): scales spread the router's choices
SHAPES = [(2, 5, 1.0), (1, 3, 1.0), (3, 7, 2.0), (2, 5, 0.3), (1, 1, 1.0), (4, 6, 3.0), (2, 2, 5.0), (1, 9, 0.5)]
PACKAGES = ("transformers", "st_moe_pytorch", "mixture_of_experts", "soft_moe_pytorch")


def hidden_calls(shapes=SHAPES, dim: int = DIM, seed: int = 11) -> Callable:
    def calls(model, args, kwargs) -> list[Call]:
        generator = torch.Generator().manual_seed(seed)
        return [Call((torch.randn(b, s, dim, generator=generator) * scale,), {}) for b, s, scale in shapes]
    return calls


def _build(make: Callable[[], torch.nn.Module], shape=(2, 5)) -> Callable:
    def build():
        return make(), (torch.randn(*shape, DIM),), {}
    return build


def moe_missing() -> list[str]:
    """The optional packages of this group that cannot be imported here."""
    missing = []
    for name in PACKAGES:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - an optional dependency
            missing.append(name.replace("_", "-"))
    return missing


def paper_cases() -> list[Case]:
    both = {"x": {0: "batch", 1: "seq"}}
    return [
        Case("MixtureOfDepths", "moe", _build(moe_models.MixtureOfDepths), hidden_calls(), both),
        Case("ExpertChoiceMoE", "moe", _build(moe_models.ExpertChoiceMoE), hidden_calls(), both),
        Case("SwitchLoopMoE", "moe", _build(moe_models.SwitchLoopMoE), hidden_calls(), both),
        Case("ThresholdRoutedMoE", "moe", _build(moe_models.ThresholdRoutedMoE), hidden_calls(), both),
    ]


def transformers_moe_cases() -> list[Case]:
    try:
        import transformers as tf
        from transformers.models.mixtral.modeling_mixtral import MixtralSparseMoeBlock
        from transformers.models.olmoe.modeling_olmoe import OlmoeSparseMoeBlock
        from transformers.models.qwen2_moe.modeling_qwen2_moe import Qwen2MoeSparseMoeBlock
        from transformers.models.switch_transformers.modeling_switch_transformers import SwitchTransformersSparseMLP
    except Exception:  # noqa: BLE001 - an optional dependency
        return []
    dims = {"hidden_states": {0: "batch", 1: "seq"}}

    def initialized(module: torch.nn.Module) -> torch.nn.Module:
        for parameter in module.parameters():  # expert weights are torch.empty until a PreTrainedModel inits them
            torch.nn.init.normal_(parameter, std=0.2)
        return module

    def mixtral():
        return initialized(MixtralSparseMoeBlock(tf.MixtralConfig(hidden_size=DIM, intermediate_size=24,
                                                                  num_local_experts=4, num_experts_per_tok=2)))

    def switch():
        return initialized(SwitchTransformersSparseMLP(tf.SwitchTransformersConfig(
            d_model=DIM, d_ff=24, num_experts=4, expert_capacity=3)))

    def qwen2():
        return initialized(Qwen2MoeSparseMoeBlock(tf.Qwen2MoeConfig(
            hidden_size=DIM, moe_intermediate_size=24, shared_expert_intermediate_size=24, num_experts=4,
            num_experts_per_tok=2)))

    def olmoe():
        return initialized(OlmoeSparseMoeBlock(tf.OlmoeConfig(hidden_size=DIM, intermediate_size=24, num_experts=4,
                                                              num_experts_per_tok=2)))

    return [
        Case("MixtralSparseMoeBlock", "moe", _build(mixtral), hidden_calls(), dims),
        Case("SwitchTransformersSparseMLP", "moe", _build(switch), hidden_calls(), dims),
        Case("Qwen2MoeSparseMoeBlock", "moe", _build(qwen2), hidden_calls(), dims),
        Case("OlmoeSparseMoeBlock", "moe", _build(olmoe), hidden_calls(), dims),
    ]


def package_cases() -> list[Case]:
    cases = []
    dims = {0: "batch", 1: "seq"}
    try:
        import st_moe_pytorch
    except Exception:  # noqa: BLE001 - an optional dependency
        pass
    else:
        cases.append(Case("st_moe_pytorch.MoE", "moe", _build(lambda: st_moe_pytorch.MoE(
            DIM, num_experts=4, gating_top_n=2, expert_hidden_mult=2)), hidden_calls(), {"x": dims}))
    try:
        import mixture_of_experts
    except Exception:  # noqa: BLE001
        pass
    else:
        cases.append(Case("mixture_of_experts.MoE", "moe", _build(lambda: mixture_of_experts.MoE(
            DIM, num_experts=4, hidden_dim=24, second_policy_eval="all")), hidden_calls(), {"inputs": dims}))
    try:
        import soft_moe_pytorch
    except Exception:  # noqa: BLE001
        pass
    else:
        cases.append(Case("soft_moe_pytorch.SoftMoE", "moe", _build(lambda: soft_moe_pytorch.SoftMoE(
            DIM, num_experts=4, num_slots=2)), hidden_calls(), {"x": dims}))
    return cases


def moe_cases() -> list[Case]:
    return paper_cases() + transformers_moe_cases() + package_cases()


__all__ = ["hidden_calls", "moe_cases", "moe_missing", "package_cases", "paper_cases", "transformers_moe_cases"]
