"""Hugging Face models built from tiny configs (random weights, nothing downloaded),
compiled unmodified — ``dycl.compile(model, kwargs={"input_ids": ids})`` — and
compared with eager on several batch sizes and sequence lengths, in-process and
as a torch-free host. Needs the ``realworld`` extra (``pip install -e .[realworld]``)."""

from __future__ import annotations

import pytest

from tests.realworld.corpus import run_case, transformers_cases

pytest.importorskip("transformers", reason="the real-world corpus needs `pip install -e .[realworld]`")

FAST = {"BertForSequenceClassification+mask (static)", "BertForSequenceClassification+mask",
        "BertForSequenceClassification (batch)"}
CASES = transformers_cases()


@pytest.mark.parametrize("case", [pytest.param(c, marks=[] if c.name in FAST else [pytest.mark.slow], id=c.name)
                                  for c in CASES])
def test_transformers_model_agrees_with_eager(case, tmp_path):
    """Every model agrees at the example's shapes and with a symbolic batch (and sequence
    length): where transformers decides on a symbolic size in Python, the host checks the
    condition (dycl.export.shape_guards). GPT-2 with a mask too: its mask code decides on the mask's
    values only where it is not traced, so the graph computes the full mask (hcfg.tracing_guards)."""
    outcome = run_case(case, tmp_path)
    assert outcome.status == "pass", outcome.detail
    assert outcome.checked >= 4 and outcome.host_checked == outcome.checked


def test_a_size_the_library_decided_on_is_checked_by_the_host(tmp_path):
    """BERT's attention sets ``is_causal = q_length > 1`` in Python: with a symbolic sequence
    length the graph traced at 7 tokens is valid where ``seq > 1`` (the host checks it), and
    one token runs the graph traced at that size (``dycl.export.alternatives``; under the
    tracer transformers also reads ``is_causal.item()``, the same decision again)."""
    import torch
    import transformers as tf

    import dycl
    from dycl.harness.testing_host import Call, run_host_without_torch

    model = tf.BertModel(tf.BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                       intermediate_size=37, max_position_embeddings=64)).eval()
    from dycl.hcfg.levers import Levers

    # the guards read below are the host form's sub-DNN entries: "auto" may keep the one graph by timing
    compiled = dycl.compile(model, (torch.randint(0, 99, (2, 7)),), dynamic={"input_ids": {1: "seq"}},
                            optimize=Levers(single_graph="off"))
    calls = [Call((torch.randint(0, 99, size),), {}) for size in ((1, 2), (3, 9), (2, 1), (1, 1))]
    for call in calls:
        ids = call.args[0]
        assert torch.allclose(compiled(ids).last_hidden_state, model(ids).last_hidden_state, atol=1e-4)
    report = run_host_without_torch(compiled.save(tmp_path / "bert"), model, calls, 1e-4)
    assert report == {"checked": len(calls), "problems": [], "torch_loaded": False}
    entries = compiled.manifest["sub_dnns"].values()
    assert any("seq > 1" in guard["holds"] for entry in entries for guard in entry.get("guards", []))
    assert any(entry.get("otherwise") for entry in entries)


def test_the_output_is_the_framework_object_in_process_and_a_dict_in_the_manifest():
    import torch
    import transformers as tf

    import dycl

    model = tf.DistilBertModel(tf.DistilBertConfig(vocab_size=99, dim=32, n_layers=1, n_heads=2, hidden_dim=37,
                                                   max_position_embeddings=64)).eval()
    ids = torch.randint(0, 99, (2, 5))
    compiled = dycl.compile(model, (ids,))
    output = compiled(ids)
    assert type(output) is type(model(ids))
    assert torch.allclose(output.last_hidden_state, model(ids).last_hidden_state, atol=1e-4)
    assert compiled.manifest["output"]["returned_as"] == "dict"
    assert list(compiled.manifest["output"]["items"]) == ["last_hidden_state"]
    with pytest.raises(ValueError, match="'attention_mask' was compiled as None"):
        compiled(ids, attention_mask=torch.ones(2, 5, dtype=torch.long))


def test_the_usage_docs_example_runs():
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "docs" / "usage.md").read_text()
    block = next(b for b in re.findall(r"```python\n(.*?)```", readme, flags=re.S) if "transformers" in b)
    namespace: dict = {}
    exec(compile(block, "docs/usage.md", "exec"), namespace)  # noqa: S102 - our own docs
    assert type(namespace["out"]).__name__ == "SequenceClassifierOutput"
