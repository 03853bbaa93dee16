"""GPT-2 called with an ``attention_mask`` (issue 28): transformers' mask code decides on the
mask's values (``_ignore_causal_mask_sdpa``: no padding lets SDPA's ``is_causal`` replace the
mask), behind an early ``return False`` when it is traced. dycl keeps that decision in the
graph: the exported graph builds the full mask, which the library keeps equal to the shortcut
(``hcfg.tracing_guards``). Masks with and without padding (left, right), several batch and
sequence sizes, the decoding step's one token included: in process and as a torch-free host."""

from __future__ import annotations

import inspect

import pytest
import torch

import dycl
from dycl.harness.paths import model_source_files, record_path
from dycl.harness.testing import outputs_match
from dycl.harness.testing_host import Call, run_host_without_torch

tf = pytest.importorskip("transformers", reason="the real-world corpus needs `pip install -e .[realworld]`")
masking_utils = pytest.importorskip("transformers.masking_utils")

_DIMS = {0: "batch", 1: "seq"}
# (batch, seq, padding): padding > 0 pads the first sample on the left and the last on the right
_SHAPES = [(2, 7, 0), (2, 7, 2), (1, 5, 0), (1, 5, 3), (3, 12, 0), (3, 12, 4), (2, 1, 0), (1, 1, 0), (4, 6, 1)]


def _gpt2():
    torch.manual_seed(0)
    return tf.GPT2LMHeadModel(tf.GPT2Config(vocab_size=99, n_embd=32, n_layer=2, n_head=2, n_positions=64,
                                            use_cache=False)).eval()


def _calls(shapes) -> list[Call]:
    generator = torch.Generator().manual_seed(11)
    calls = []
    for batch, seq, padding in shapes:
        mask = torch.ones(batch, seq, dtype=torch.long)
        if padding:
            mask[0, :padding] = 0
            if batch > 1:
                mask[-1, seq - padding:] = 0
        calls.append(Call((), {"input_ids": torch.randint(0, 99, (batch, seq), generator=generator),
                               "attention_mask": mask}))
    return calls


def _check(model, compiled, calls) -> int:
    """Compare every call with eager; the number of distinct eager paths through the model's
    files and transformers' mask code (where padding decides)."""
    files = model_source_files(model) | {inspect.getfile(masking_utils)}
    paths = set()
    for i, call in enumerate(calls):
        with torch.no_grad():
            expected, path = record_path(model, files=files, **call.kwargs)
        paths.add(path)
        problem = outputs_match(expected, compiled(**call.kwargs), atol=1e-4)
        assert problem is None, f"call #{i}: {problem}"
    return len(paths)


@pytest.mark.slow
def test_gpt2_with_an_attention_mask_agrees_with_and_without_padding(tmp_path):
    model = _gpt2()
    example = _calls([(2, 7, 2)])[0].kwargs
    compiled = dycl.compile(model, kwargs=example, dynamic={"input_ids": _DIMS, "attention_mask": _DIMS})
    calls = _calls(_SHAPES)
    assert _check(model, compiled, calls) == 2  # padded or not (one token or a prompt: the same lines)
    report = run_host_without_torch(compiled.save(tmp_path / "gpt2_mask"), model, calls, atol=1e-4)
    assert report == {"checked": len(calls), "problems": [], "torch_loaded": False}


def test_gpt2_with_an_attention_mask_at_the_example_shapes(tmp_path):
    model = _gpt2()
    calls = _calls([(2, 6, 0), (2, 6, 2), (2, 6, 1), (2, 6, 0)])
    compiled = dycl.compile(model, kwargs=calls[1].kwargs, dynamic=False)
    assert _check(model, compiled, calls) == 2  # the library skips the mask without padding only
    report = run_host_without_torch(compiled.save(tmp_path / "gpt2_mask_static"), model, calls, atol=1e-4)
    assert report == {"checked": len(calls), "problems": [], "torch_loaded": False}
