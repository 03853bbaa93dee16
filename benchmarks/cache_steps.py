"""A greedy decoding loop around a whole Hugging Face LM with its KV cache, eager against dycl.

    OMP_NUM_THREADS=1 python benchmarks/cache_steps.py [--steps 32] [--rounds 3]

A tiny random ``LlamaForCausalLM`` (2 layers, hidden 32, grouped-query attention) is compiled
twice, as a user's loop calls it: the prompt, and the one-token step taking
``past_key_values`` back (its length a symbolic dim; ``dycl.model.records``). Each round runs
the same loop (a prompt of 8 tokens, then ``--steps`` steps) eagerly and compiled, in process,
and prints the median wall time of one step; then the CPU seconds of the two compiles.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import torch

import dycl

VOCAB = 61


def _loop(prompt_call, step_call, ids: torch.Tensor, steps: int) -> list[float]:
    """Seconds per step of the greedy loop feeding the cache back."""
    times = []
    with torch.no_grad():
        out = prompt_call(ids)
        past = out.past_key_values
        for _ in range(steps):
            token = out.logits[:, -1:].argmax(-1)
            start = time.perf_counter()
            out = step_call(token, past_key_values=past)
            times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    import transformers as tf

    warnings.filterwarnings("ignore")
    torch.manual_seed(0)
    lm = tf.LlamaForCausalLM(tf.LlamaConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=37, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=128)).eval()
    ids = torch.randint(0, VOCAB, (1, 8))
    tokens = {"input_ids": {0: "batch", 1: "seq"}}
    start = time.process_time()
    prefill = dycl.compile(lm, (ids,), dynamic=tokens)
    prompt_seconds = time.process_time() - start
    with torch.no_grad():
        past = lm(ids).past_key_values
    start = time.process_time()
    step = dycl.compile(lm, (ids[:, -1:],), kwargs={"past_key_values": past},
                        dynamic={**tokens, "past_key_values": {0: "batch", 2: "past"}})
    step_seconds = time.process_time() - start
    for number in range(options.rounds):
        eager, compiled = _loop(lm, lm, ids, options.steps), _loop(prefill, step, ids, options.steps)
        print(f"round {number}: eager step median {statistics.median(eager) * 1e3:.3f} ms, "
              f"dycl step median {statistics.median(compiled) * 1e3:.3f} ms")
    print(f"compile CPU seconds: prompt {prompt_seconds:.1f}, step {step_seconds:.1f}")


if __name__ == "__main__":
    main()
