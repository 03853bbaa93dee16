"""The real-world corpus: models written by others, compiled unmodified.

Each ``Case`` builds a model with random weights (from a config: nothing is
downloaded), an example call and the calls to compare on. ``run_case`` compiles
the model and records one of

- ``pass``: every call agrees with eager (and, with ``host_dir``, the torch-free host);
- ``clear error``: ``dycl.UnsupportedError`` at compile time (construct + file:line);
- ``crash``: any other exception from dycl, at compile time or when called;
- ``wrong``: an output that differs from eager.

Groups: ``transformers`` (six Hugging Face models), ``timm`` (two small
classifiers) and ``exportdb`` (the examples shipped with the installed torch under
``torch/_export/db/examples``). A group whose package is not installed is absent.
"""

from __future__ import annotations

import copy
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

import dycl
from dycl.harness.paths import model_source_files, record_path
from dycl.harness.testing import outputs_match
from dycl.harness.testing_host import Call, run_host_without_torch

STATUSES = ("pass", "clear error", "crash", "wrong")


@dataclass
class Case:
    name: str
    group: str
    build: Callable[[], tuple[torch.nn.Module, tuple, dict[str, Any]]]
    calls: Callable[[torch.nn.Module, tuple, dict[str, Any]], list[Call]]
    dynamic: Any = True
    atol: float = 1e-4


@dataclass
class Outcome:
    status: str
    detail: str = ""
    paths: int = 0
    seconds: float = 0.0
    checked: int = 0
    host_checked: int = 0
    notes: list[str] = field(default_factory=list)


def _first_line(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}"
    # an installed package's file by its path inside site-packages (short, the same on every machine)
    return re.sub(r"\S*/site-packages/", "", text.splitlines()[0])[:240]


def _clone(value: Any) -> Any:
    return torch.utils._pytree.tree_map(lambda v: v.clone() if isinstance(v, torch.Tensor) else v, value)


def run_case(case: Case, host_dir: Path | None = None) -> Outcome:
    """Compile ``case`` and compare it with eager on its calls (see the module note)."""
    start = time.perf_counter()
    torch.manual_seed(0)
    model, args, kwargs = case.build()
    model.eval()
    calls = case.calls(model, args, kwargs)
    try:
        compiled = dycl.compile(model, _clone(args), kwargs=_clone(kwargs), dynamic=case.dynamic)
    except dycl.UnsupportedError as error:
        return Outcome("clear error", _first_line(error), seconds=time.perf_counter() - start)
    except Exception as error:  # noqa: BLE001 - recorded, not hidden: this is what the corpus measures
        return Outcome("crash", _first_line(error), seconds=time.perf_counter() - start)
    files = model_source_files(model)
    paths, checked, eager_calls = set(), 0, []
    for i, call in enumerate(calls):
        reference = copy.deepcopy(model) if _mutates(case) else model
        try:
            with torch.no_grad():
                expected, path = record_path(reference, *_clone(call.args), files=files, **_clone(call.kwargs))
        except Exception:  # noqa: BLE001 - an input eager itself refuses is not a test of dycl
            continue
        try:
            actual = compiled(*_clone(call.args), **_clone(call.kwargs))
        except Exception as error:  # noqa: BLE001
            return Outcome("crash", f"call #{i}: {_first_line(error)}", len(paths), time.perf_counter() - start,
                           checked)
        problem = outputs_match(expected, actual, case.atol)
        if problem is not None:
            return Outcome("wrong", f"call #{i}: {problem}", len(paths), time.perf_counter() - start, checked)
        paths.add(path)
        checked += 1
        eager_calls.append(call)
    outcome = Outcome("pass", "", len(paths), 0.0, checked)
    if host_dir is not None and eager_calls:
        try:
            artifact = compiled.save(host_dir / case.name)
            report = run_host_without_torch(artifact, model, eager_calls, case.atol)
        except Exception as error:  # noqa: BLE001
            outcome = Outcome("crash", f"torch-free host: {_first_line(error)}", len(paths), 0.0, checked)
        else:
            outcome.host_checked = report["checked"]
            if report["problems"]:
                outcome = Outcome("wrong", f"torch-free host: {report['problems'][0]}", len(paths), 0.0, checked)
    outcome.seconds = time.perf_counter() - start
    return outcome


def _mutates(case: Case) -> bool:
    return case.group == "exportdb"


# -- Hugging Face transformers -------------------------------------------------------------------

def _token_calls(vocab: int, sizes: list[tuple[int, int]], name: str = "input_ids") -> Callable:
    def calls(model, args, kwargs) -> list[Call]:
        generator = torch.Generator().manual_seed(1)
        return [Call((), {name: torch.randint(0, vocab, size, generator=generator)}) for size in sizes]
    return calls


_TOKENS = [(2, 7), (1, 3), (3, 12), (2, 7), (4, 5)]
_TOKEN_DIMS = {"input_ids": {0: "batch", 1: "seq"}}


def transformers_cases() -> list[Case]:
    try:
        import transformers as tf
    except Exception:  # noqa: BLE001 - an optional dependency
        return []

    def tokens(make_model: Callable[[], torch.nn.Module]) -> Callable:
        def build():
            return make_model(), (), {"input_ids": torch.randint(0, 99, (2, 7))}
        return build

    def bert():
        return tf.BertForSequenceClassification(tf.BertConfig(
            vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37,
            max_position_embeddings=64, num_labels=3))

    def gpt2():
        return tf.GPT2LMHeadModel(tf.GPT2Config(vocab_size=99, n_embd=32, n_layer=2, n_head=2, n_positions=64,
                                                use_cache=False))

    def distilbert():
        return tf.DistilBertModel(tf.DistilBertConfig(vocab_size=99, dim=32, n_layers=2, n_heads=2, hidden_dim=37,
                                                      max_position_embeddings=64))

    def t5():
        return tf.T5EncoderModel(tf.T5Config(vocab_size=99, d_model=32, d_kv=8, d_ff=37, num_layers=2, num_heads=4))

    def vit():
        model = tf.ViTForImageClassification(tf.ViTConfig(
            image_size=32, patch_size=8, num_channels=3, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=37, num_labels=5))
        return model, (torch.randn(2, 3, 32, 32),), {}

    def vit_calls(model, args, kwargs, batches=(2, 1, 3, 2)):
        generator = torch.Generator().manual_seed(2)
        return [Call((torch.randn(b, 3, 32, 32, generator=generator),), {}) for b in batches]

    def whisper():
        from transformers.models.whisper.modeling_whisper import WhisperEncoder
        config = tf.WhisperConfig(vocab_size=99, d_model=32, encoder_layers=2, encoder_attention_heads=2,
                                  decoder_layers=2, decoder_attention_heads=2, encoder_ffn_dim=37,
                                  decoder_ffn_dim=37, num_mel_bins=8, max_source_positions=16)
        return WhisperEncoder(config), (torch.randn(1, 8, 32),), {}

    def whisper_calls(model, args, kwargs, batches=(1, 2, 1, 3)):
        generator = torch.Generator().manual_seed(3)
        return [Call((torch.randn(b, 8, 32, generator=generator),), {}) for b in batches]

    def positional(make_model: Callable[[], torch.nn.Module]) -> Callable:
        def build():  # dycl.compile(model, (input_ids,)): the default symbolic batch
            return make_model(), (torch.randint(0, 99, (2, 7)),), {}
        return build

    def positional_calls(model, args, kwargs):
        generator = torch.Generator().manual_seed(5)
        return [Call((torch.randint(0, 99, (batch, 7), generator=generator),), {}) for batch in (2, 1, 3, 4, 2)]

    def with_mask(make_model: Callable[[], torch.nn.Module]) -> Callable:
        def build():
            ids = torch.randint(0, 99, (2, 7))
            return make_model(), (ids,), {"attention_mask": torch.ones(2, 7, dtype=torch.long)}
        return build

    def masked_calls(model, args, kwargs, sizes=_TOKENS):
        generator = torch.Generator().manual_seed(4)
        calls = []
        for batch, length in sizes:
            mask = torch.ones(batch, length, dtype=torch.long)
            mask[0, length // 2:] = 0
            calls.append(Call((torch.randint(0, 99, (batch, length), generator=generator),), {"attention_mask": mask}))
        return calls

    def masked_static_calls(model, args, kwargs):
        return masked_calls(model, args, kwargs, [(2, 7)] * 5)

    both = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}
    static_tokens = _token_calls(99, [(2, 7)] * 5)
    # at the example's shapes (dynamic=False); transformers' mask and attention code compares sizes in
    # Python (masking_utils, sdpa_attention): with symbolic dims the host checks those conditions
    # (dycl.export.shape_guards)
    static = [
        Case("BertForSequenceClassification (static)", "transformers", tokens(bert), static_tokens, False),
        Case("BertForSequenceClassification+mask (static)", "transformers", with_mask(bert), masked_static_calls,
             False),
        Case("GPT2LMHeadModel+mask (static)", "transformers", with_mask(gpt2), masked_static_calls, False),
        Case("GPT2LMHeadModel (static)", "transformers", tokens(gpt2), static_tokens, False),
        Case("DistilBertModel (static)", "transformers", tokens(distilbert), static_tokens, False),
        Case("T5EncoderModel (static)", "transformers", tokens(t5), static_tokens, False),
        Case("ViTForImageClassification (static)", "transformers", vit,
             lambda model, args, kwargs: vit_calls(model, args, kwargs, (2,) * 4), False),
        Case("WhisperEncoder (static)", "transformers", whisper,
             lambda model, args, kwargs: whisper_calls(model, args, kwargs, (1,) * 4), False),
    ]
    batch = [Case(f"{name} (batch)", "transformers", positional(make), positional_calls)
             for name, make in (("BertForSequenceClassification", bert), ("GPT2LMHeadModel", gpt2),
                                ("DistilBertModel", distilbert), ("T5EncoderModel", t5))]
    return static + batch + [
        Case("BertForSequenceClassification", "transformers", tokens(bert), _token_calls(99, _TOKENS), _TOKEN_DIMS),
        Case("BertForSequenceClassification+mask", "transformers", with_mask(bert), masked_calls, both),
        # as a tokenizer's output calls it: GPT-2's mask code decides on the mask's values (refused)
        Case("GPT2LMHeadModel+mask", "transformers", with_mask(gpt2), masked_calls, both),
        Case("GPT2LMHeadModel", "transformers", tokens(gpt2), _token_calls(99, _TOKENS), _TOKEN_DIMS),
        Case("DistilBertModel", "transformers", tokens(distilbert), _token_calls(99, _TOKENS), _TOKEN_DIMS),
        Case("ViTForImageClassification", "transformers", vit, vit_calls),
        Case("T5EncoderModel", "transformers", tokens(t5), _token_calls(99, _TOKENS), _TOKEN_DIMS),
        Case("WhisperEncoder", "transformers", whisper, whisper_calls),
    ]


# -- timm ----------------------------------------------------------------------------------------

def timm_unavailable() -> str | None:
    """Why timm cannot be used here (None when it can)."""
    try:
        import timm  # noqa: F401
    except Exception as error:  # noqa: BLE001 - timm imports torchvision, whose wheel may not load
        return _first_line(error)
    return None


def timm_cases() -> list[Case]:
    if timm_unavailable() is not None:
        return []
    import timm

    def image_calls(model, args, kwargs):
        generator = torch.Generator().manual_seed(5)
        return [Call((torch.randn(b, 3, 32, 32, generator=generator),), {}) for b in (2, 1, 3)]

    def build(name: str, **options) -> Callable:
        def make():
            return timm.create_model(name, pretrained=False, num_classes=5, **options), (torch.randn(2, 3, 32, 32),), {}
        return make

    return [
        Case("timm resnet18", "timm", build("resnet18"), image_calls),
        Case("timm vit_tiny_patch16_224", "timm", build("vit_tiny_patch16_224", img_size=32, patch_size=8),
             image_calls),
    ]


# -- torch's ExportDB ----------------------------------------------------------------------------

def exportdb_cases() -> list[Case]:
    try:
        from torch._export.db.examples import all_examples
    except Exception:  # noqa: BLE001 - a private module of torch
        return []
    cases = []
    for name, example in sorted(all_examples().items()):
        cases.append(Case(name, "exportdb", _exportdb_build(example), _exportdb_calls, dynamic=False))
    return cases


def _exportdb_build(example) -> Callable:
    def build():
        model = example.model
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"not a module: {type(model).__name__}")
        return copy.deepcopy(model), _clone(tuple(example.example_args)), _clone(dict(example.example_kwargs or {}))
    return build


def _exportdb_calls(model, args, kwargs) -> list[Call]:
    """The example, and inputs of the same shapes and dtypes with other values (signs
    flipped and scaled, so that data-dependent branches go both ways)."""
    generator = torch.Generator().manual_seed(6)

    def vary(value: Any, scale: float) -> Any:
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            return torch.randn(value.shape, generator=generator, dtype=value.dtype) * scale
        return value.clone() if isinstance(value, torch.Tensor) else value

    calls = [Call(_clone(args), _clone(kwargs))]
    for scale in (1.0, -1.0, 3.0, -0.5, 0.1):
        calls.append(Call(tuple(vary(a, scale) for a in args), {k: vary(v, scale) for k, v in kwargs.items()}))
    return calls


def all_cases() -> list[Case]:
    return transformers_cases() + timm_cases() + exportdb_cases()


__all__ = ["Case", "Outcome", "STATUSES", "all_cases", "exportdb_cases", "run_case", "timm_cases",
           "timm_unavailable", "transformers_cases"]
