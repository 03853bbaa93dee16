"""Hugging Face mixture-of-experts LMs (issue 28): dycl against eager, a dense all-experts
ONNX export, and what tracing gets wrong.

    python benchmarks/moe.py [--models MixtralForCausalLM,...] [--sizes 1x8,4x16] [--inputs 6] [--out DIR]

Tiny random configs (``tests/realworld/moe_lms.py``: 4 experts, top 2, hidden 32), for
each (batch x sequence) size, on the same ``--inputs`` random ``input_ids`` per size:

- ``eager``: PyTorch eager, transformers' default experts on CPU (grouped: ``histc`` +
  ``grouped_mm``);
- ``dycl``: ``dycl.compile`` of the unmodified LM (symbolic batch and sequence), in process;
- ``dense``: ``torch.onnx.export`` (trace) of the LM with every expert run on every token
  and weighted by the router (zero for the experts not chosen): the usual workaround, run
  by ONNX Runtime. Exact, and the cost of computing all experts;
- the trace export's error: ``torch.onnx.export`` (trace) of the LM with the eager experts
  loop (``experts_implementation="eager"``), called on the other inputs: the largest
  logit difference from eager and the share of calls that differ by more than 1e-4
  (the trace keeps the example's experts).

Reported: tokens/s (batch x sequence over the median call, ``dycl.harness.timing.interleaved``)
and the experts each call actually runs (per MoE layer, mean over calls, of the 4).
Writes ``DIR/moe.md`` and ``DIR/moe.json`` (default: this folder). Short runs only on a
shared machine; timings mean something only on a quiet one.
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import sys
import time
import warnings
from pathlib import Path

import onnxruntime as ort
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import dycl  # noqa: E402
from dycl.backends.onnx_symbolics import local_symbolics  # noqa: E402
from dycl.harness.timing import interleaved, machine  # noqa: E402
from tests.realworld.moe_lms import VOCAB, build_moe_lm, experts_hit  # noqa: E402

MODELS = ["MixtralForCausalLM", "Qwen2MoeForCausalLM", "OlmoeForCausalLM", "DeepseekV3ForCausalLM"]


def dense_experts_forward(self, hidden_states, top_k_index, top_k_weights):
    """Every expert on every token, weighted by the router (0 where not chosen)."""
    weights = torch.zeros(hidden_states.shape[0], self.num_experts, dtype=hidden_states.dtype)
    weights = weights.scatter(1, top_k_index, top_k_weights.to(hidden_states.dtype))
    gate_up = torch.einsum("td,efd->tef", hidden_states, self.gate_up_proj)
    gate, up = gate_up.chunk(2, dim=-1)
    out = torch.einsum("tei,edi->ted", self.act_fn(gate) * up, self.down_proj)
    return (out * weights.unsqueeze(-1)).sum(dim=1)


class _Logits(torch.nn.Module):
    def __init__(self, lm: torch.nn.Module) -> None:
        super().__init__()
        self.lm = lm

    def forward(self, input_ids):
        return self.lm(input_ids).logits


def onnx_session(lm: torch.nn.Module, example: torch.Tensor) -> ort.InferenceSession:
    buffer = io.BytesIO()
    with warnings.catch_warnings(), local_symbolics():  # the ops torch cannot translate (diff, histc): dycl's
        warnings.simplefilter("ignore")
        torch.onnx.export(_Logits(lm), (example,), buffer, dynamo=False, opset_version=17,
                          input_names=["input_ids"], output_names=["logits"],
                          dynamic_axes={"input_ids": {0: "batch", 1: "seq"}})
    return ort.InferenceSession(buffer.getvalue(), providers=["CPUExecutionProvider"])


def with_experts(name: str, experts: str | None, forward=None) -> torch.nn.Module:
    """The LM with weights of seed 0 (the same in every variant) and the experts implementation."""
    lm = build_moe_lm(name, experts="eager" if forward is not None else experts)
    if forward is not None:
        for module in lm.modules():
            if hasattr(type(module), "_apply_gate"):
                module.forward = forward.__get__(module)
    return lm


def trace_error(name: str, example: torch.Tensor, inputs: list[torch.Tensor], eager: torch.nn.Module) -> dict:
    """The traced eager-loop LM on ``inputs``: its largest logit error, and how many calls
    are wrong (beyond 1e-4) or fail in ONNX Runtime (the trace's shapes are the example's)."""
    session = onnx_session(with_experts(name, "eager"), example)
    worst, wrong, failed = 0.0, 0, 0
    with torch.no_grad():
        for ids in inputs:
            try:
                got = torch.from_numpy(session.run(None, {"input_ids": ids.numpy()})[0])
            except Exception:  # noqa: BLE001 - a failing call is one of the trace's wrong answers
                failed += 1
                continue
            diff = (got - eager(ids).logits).abs().max().item()
            worst, wrong = max(worst, diff), wrong + (diff > 1e-4)
    return {"trace_max_abs_error": worst, "trace_calls_wrong": f"{wrong}/{len(inputs)}",
            "trace_calls_failed": f"{failed}/{len(inputs)}"}


def measure(name: str, sizes: list[tuple[int, int]], count: int) -> list[dict]:
    eager = with_experts(name, None)
    example = torch.randint(0, VOCAB, (2, 7), generator=torch.Generator().manual_seed(1))
    start = time.perf_counter()
    compiled = dycl.compile(eager, (example,), dynamic={"input_ids": {0: "batch", 1: "seq"}})
    compile_s = time.perf_counter() - start
    dense = onnx_session(with_experts(name, None, dense_experts_forward), example)
    rows = []
    for batch, seq in sizes:
        generator = torch.Generator().manual_seed(batch * 100 + seq)
        inputs = [torch.randint(0, VOCAB, (batch, seq), generator=generator) for _ in range(count)]
        timings = interleaved({
            "eager": lambda ids: eager(ids).logits,
            "dycl": lambda ids: compiled(ids).logits,
            "dense": lambda ids: dense.run(None, {"input_ids": ids.numpy()}),
        }, [(ids,) for ids in inputs], repeat=2, warmup=1, progress=False)
        layers = sum(hasattr(type(m), "_apply_gate") for m in eager.modules())
        hit = [len(experts_hit(eager, ids)) for ids in inputs]  # distinct experts over all layers
        with torch.no_grad():
            dycl_error = max((compiled(ids).logits - eager(ids).logits).abs().max().item() for ids in inputs)
        row = {"model": name, "batch": batch, "seq": seq, "compile_s": round(compile_s, 1),
               "dycl_max_abs_error": dycl_error, "experts_run_per_call": round(statistics.mean(hit) / layers, 2),
               "moe_layers": layers}
        row.update({f"{k}_tokens_per_s": round(batch * seq / (t.median_ms / 1000)) for k, t in timings.items()})
        row.update(trace_error(name, example, inputs, eager))
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def table(rows: list[dict], stamp: str) -> str:
    head = ("| model | batch x seq | eager tok/s | dycl tok/s | dense ONNX tok/s | experts run / call (of 4) "
            "| dycl max err | trace max err | trace calls wrong | trace calls failing |\n"
            "|---|---|---|---|---|---|---|---|---|---|\n")
    lines = [f"| {r['model']} | {r['batch']}x{r['seq']} | {r['eager_tokens_per_s']} | {r['dycl_tokens_per_s']} | "
             f"{r['dense_tokens_per_s']} | {r['experts_run_per_call']} | {r['dycl_max_abs_error']:.1e} | "
             f"{r['trace_max_abs_error']:.1e} | {r['trace_calls_wrong']} | {r['trace_calls_failed']} |" for r in rows]
    return f"# MoE LMs: dycl, eager, dense ONNX, traced\n\n{stamp}\n\n" + head + "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--sizes", default="1x8,4x16")
    parser.add_argument("--inputs", type=int, default=6)
    parser.add_argument("--out", default=str(Path(__file__).parent))
    args = parser.parse_args()
    sizes = [tuple(int(v) for v in size.split("x")) for size in args.sizes.split(",")]
    rows = [row for name in args.models.split(",") for row in measure(name, sizes, args.inputs)]
    stamp = (f"Generated {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {machine()}; command: "
             f"`python benchmarks/moe.py --models {args.models} --sizes {args.sizes} --inputs {args.inputs}`.")
    out = Path(args.out)
    (out / "moe.json").write_text(json.dumps({"stamp": stamp, "rows": rows}, indent=1) + "\n")
    (out / "moe.md").write_text(table(rows, stamp))


if __name__ == "__main__":
    main()
