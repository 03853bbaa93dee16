"""A whole Hugging Face LM returning its KV cache (``use_cache=True``, the default) and taking
it back (issue 28): records across the model boundary (``dycl.model.records``).

``LlamaForCausalLM`` and ``MixtralForCausalLM`` (tiny configs as they ship: ``use_cache``
left at its default) are compiled twice, as a user's greedy loop calls them: the prompt
(``past_key_values`` left out) and the one-token step (``past_key_values=past``, its length
a symbolic dim). In process the compiled model returns a ``ModelOutput`` holding a real
``DynamicCache`` and takes one back, updating it in place as eager does; the torch-free
host returns the plain form (``{"record": "DynamicCache", "fields": {...}}`` with numpy
arrays) and takes that back, and refuses another structure by name. A user module with a
data-dependent branch that takes and returns a cache agrees on both its paths.
"""

from __future__ import annotations

import json
import pickle
import subprocess
import sys

import pytest
import torch
from torch import nn

import dycl
from dycl.harness.testing import assert_equivalent
from tests.realworld.decoder_corpus import VOCAB

tf = pytest.importorskip("transformers", reason="the real-world corpus needs `pip install -e .[realworld]`")

TOKENS = {"input_ids": {0: "batch", 1: "seq"}}
STEP = {**TOKENS, "past_key_values": {0: "batch", 2: "past"}}  # every key and value: [batch, heads, past, dim]


def _llama() -> nn.Module:
    return tf.LlamaForCausalLM(tf.LlamaConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=37, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64))


def _mixtral(experts: str | None) -> nn.Module:
    config = tf.MixtralConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, num_local_experts=4, num_experts_per_tok=2)
    if experts is not None:
        config._experts_implementation = experts
    return tf.MixtralForCausalLM(config)


BUILDS = {"LlamaForCausalLM": _llama, "MixtralForCausalLM-batched_mm": lambda: _mixtral("batched_mm"),
          "MixtralForCausalLM-default": lambda: _mixtral(None)}


def _prompts(seed: int) -> list[torch.Tensor]:
    """Prompts of several batch sizes and lengths (so the steps see several cache lengths)."""
    generator = torch.Generator().manual_seed(seed)
    return [torch.randint(0, VOCAB, shape, generator=generator) for shape in [(2, 5), (1, 3), (3, 7), (1, 1)]]


def greedy(prompt_call, step_call, ids: torch.Tensor, steps: int) -> tuple[list[torch.Tensor], object]:
    """The loop users write: the prompt once, then one token per step feeding the cache back.
    Returns every call's logits and the last cache."""
    out = prompt_call(ids)
    logits, past = [out.logits], out.past_key_values
    for _ in range(steps):
        token = out.logits[:, -1:].argmax(-1)
        out = step_call(token, past_key_values=past)
        assert out.past_key_values is past  # updated in place and returned, eager and compiled alike
        logits.append(out.logits)
    return logits, past


def _compiled_pair(lm: nn.Module, prompt: torch.Tensor):
    """The prompt call and the one-token step call, compiled from the prompt's example."""
    with torch.no_grad():
        past = lm(prompt).past_key_values
    prefill = dycl.compile(lm, (prompt,), dynamic=TOKENS)
    step = dycl.compile(lm, (prompt[:, -1:],), kwargs={"past_key_values": past}, dynamic=STEP)
    assert all(layer.keys.shape[2] == prompt.shape[1] for layer in past.layers)  # compiling left the example as it was
    return prefill, step


def _caches_agree(eager, compiled) -> None:
    assert type(compiled) is type(eager) and len(compiled.layers) == len(eager.layers)
    for mine, theirs in zip(compiled.layers, eager.layers):
        assert type(mine) is type(theirs) and mine.is_initialized == theirs.is_initialized
        torch.testing.assert_close(mine.keys, theirs.keys, atol=1e-4, rtol=0)
        torch.testing.assert_close(mine.values, theirs.values, atol=1e-4, rtol=0)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(BUILDS))
def test_a_greedy_loop_feeding_the_cache_back_agrees_in_process_and_on_the_host(name, tmp_path):
    """Before: refused at the output (a ``DynamicCache`` held only as a stand-in)."""
    torch.manual_seed(0)
    lm = BUILDS[name]().eval()
    prompts = _prompts(1)
    prefill, step = _compiled_pair(lm, prompts[0])
    assert isinstance(prefill(prompts[1]).past_key_values, tf.DynamicCache)
    shapes = set()
    expected = []
    with torch.no_grad():
        for ids in prompts:
            want, want_past = greedy(lm, lm, ids, steps=3)
            got, got_past = greedy(prefill, step, ids, steps=3)
            for mine, theirs in zip(got, want):
                torch.testing.assert_close(mine, theirs, atol=1e-4, rtol=0)
            _caches_agree(want_past, got_past)
            shapes.add(tuple(want_past.layers[0].keys.shape))
            expected.append([logits.numpy() for logits in want])
    assert len({shape[0] for shape in shapes}) >= 3 and len({shape[2] for shape in shapes}) >= 3  # batches, lengths
    report = _host_greedy(prefill.save(tmp_path / "prefill"), step.save(tmp_path / "step"), prompts, expected)
    assert report == {"checked": len(prompts), "problems": [], "torch_loaded": False}


_HOST_LOOP = r'''
import importlib.util, json, pickle, sys
sys.modules["torch"] = None   # any import of torch or dycl now fails
sys.modules["dycl"] = None
import numpy as np

def load(path):
    spec = importlib.util.spec_from_file_location("host_" + path.replace("/", "_"), path + "/host.py")
    host = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(host)
    return host.load(path)

prefill, step = load(sys.argv[1]), load(sys.argv[2])
prompts, expected = pickle.load(open(sys.argv[3], "rb"))
problems = []
for number, (ids, want) in enumerate(zip(prompts, expected)):
    out = prefill(ids)
    got = [out["logits"]]
    for _ in want[1:]:
        token = out["logits"][:, -1:].argmax(-1)
        given = out["cache"]
        out = step(token, past_key_values=given)  # the plain form, passed back as it came
        if out["cache"] is not given:  # updated in place and returned, as eager does
            problems.append(f"prompt {number}: the cache returned is not the one given")
        got.append(out["logits"])
    for position, (mine, theirs) in enumerate(zip(got, want)):
        if mine.shape != theirs.shape or not np.allclose(mine, theirs, atol=1e-4, rtol=0):
            problems.append(f"prompt {number}, call {position}")
cache = out["cache"]
layer = cache["fields"]["layers"][0]
wrong = dict(cache, fields=dict(cache["fields"], layers=cache["fields"]["layers"][:1]))
try:
    step(token, past_key_values=wrong)
    problems.append("a cache of one layer was taken")
except ValueError as error:
    if "expected items [0, 1], got items [0]" not in str(error):
        problems.append(f"unclear error: {error}")
if layer["record"] != "DynamicLayer" or sorted(layer["fields"]) != ["device", "is_initialized", "keys", "values"]:
    problems.append(f"plain form: {sorted(layer['fields'])}")
print(json.dumps({"checked": len(prompts), "problems": problems, "torch_loaded": "torch" in sys.modules
                  and sys.modules["torch"] is not None}))
'''


def _host_greedy(prefill_dir, step_dir, prompts, expected) -> dict:
    """The greedy loop through the two artifacts' hosts in a Python without torch."""
    data = prefill_dir.parent / "loop.pkl"
    data.write_bytes(pickle.dumps(([ids.numpy() for ids in prompts], expected)))
    done = subprocess.run([sys.executable, "-c", _HOST_LOOP, str(prefill_dir), str(step_dir), str(data)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


class DraftOrAccept(nn.Module):
    """A user's step with a data-dependent branch around a cache: one token, and a second one
    in the same call when the model is confident (speculative users write this)."""

    def __init__(self, lm: nn.Module, confident: float) -> None:
        super().__init__()
        self.lm = lm
        self.confident = confident

    def forward(self, token: torch.Tensor, past):
        out = self.lm(token, past_key_values=past, use_cache=True)
        probs = out.logits[:, -1].softmax(-1)
        best = probs.argmax(-1, keepdim=True)
        if probs.max() > self.confident:
            out = self.lm(best, past_key_values=out.past_key_values, use_cache=True)
            best = torch.cat([best, out.logits[:, -1].argmax(-1, keepdim=True)], dim=1)
        return best, out.past_key_values


@pytest.mark.slow
def test_a_user_module_taking_and_returning_a_cache_on_two_paths():
    torch.manual_seed(0)
    lm = _llama().eval()
    prompts = _prompts(2) + _prompts(3)

    def start(ids):  # a fresh cache each time: eager extends the one it is given
        with torch.no_grad():
            return ids[:, -1:], lm(ids).past_key_values

    with torch.no_grad():
        confidence = sorted(lm(*start(ids)[:1], past_key_values=start(ids)[1]).logits[:, -1].softmax(-1).max().item()
                            for ids in prompts)
    model = DraftOrAccept(lm, confident=(confidence[3] + confidence[4]) / 2).eval()
    compiled = dycl.compile(model, start(prompts[0]), dynamic={"token": {0: "batch"}, "past": {0: "batch", 2: "past"}})
    paths = assert_equivalent(model, compiled, [start(ids) for ids in prompts], min_paths=2, atol=1e-4)
    assert paths == 2  # one token, or two
    token, past = start(prompts[1])
    with torch.no_grad():
        best, returned = compiled(token, past)
        eager_best, eager_past = model(*start(prompts[1]))
    assert returned is past and isinstance(past, tf.DynamicCache)  # the caller's cache, extended as eager's
    assert torch.equal(best, eager_best)
    _caches_agree(eager_past, past)
