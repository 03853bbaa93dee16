"""Serve a dynamic network in batches: compile it per sample, save it, and run batches
through the torch-free host, showing how each batch split into sub-batches.

    python notebooks/per_sample_batch.py [OUT_DIR]

The model (the zoo's SDN-ResNet56, early exits on softmax confidence) is written for one
sample; eager PyTorch cannot run it on a batch (its exit tests would be ambiguous). Its exits
are routed: each splits the batch, and the samples that go on run the next blocks as a smaller
batch. (A smaller network's exits, SDN-VGG19's, are if-converted instead: the whole batch runs in
one graph that selects each sample's exit, ``dycl.per_sample.predicable_onnx.PREDICATE_MACS``.)
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import dycl  # noqa: E402
from models import sdn_resnet56  # noqa: E402


def main(out: Path) -> None:
    model, example = sdn_resnet56.build()
    compiled = dycl.compile(model, example, per_sample=True, progress=False)  # example: one sample
    artifact = compiled.save(out / "sdn_resnet56")
    batch = torch.cat([sdn_resnet56.sample(seed) for seed in range(16)])

    served = dycl.load(artifact)  # what host.py does in a process without torch
    logits = served(batch)
    with torch.no_grad():
        eager = torch.cat([model(batch[i:i + 1]) for i in range(len(batch))])
    print(f"16 samples -> logits {tuple(logits.shape)}; max |batched - eager per sample| = "
          f"{(logits - eager).abs().max().item():.1e}")

    _, groups = served._host.route(batch.numpy())  # (sub-DNN index, group size) per run
    print("sub-DNN runs (index: samples):", ", ".join(f"{index}: {size}" for index, size in groups))


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as scratch:
            main(Path(scratch))
