"""Two paths whose tensors have one shape on a batch-1 example but not on other batches
(``x[:1]`` against ``x``) reach one join: exploration keeps them apart by their symbolic
shapes (``hcfg.state.symbolic_signature``), so the sub-DNNs after the join are compiled with
the dim symbolic and a larger batch runs, in process and through the torch-free host. Before,
the join kept one state and a graph kept the example's static 1 while the host let batch 3
through (an ONNX Runtime "invalid dimensions" error)."""

from __future__ import annotations

import torch
import torch.nn as nn

from dycl.harness.host_agreement import assert_agrees_in_process_and_as_host


class FirstRowSummary(nn.Module):
    """Keeps only the first row as the context when the batch looks "bright", then refines the context."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(6, 6)

    def forward(self, x):
        context = torch.tanh(x)
        if x.mean() > 0.2:
            context = x[:1] * 0.5
        if context.max() > 1.0:
            context = self.proj(context)
        return context.sum(0), x.shape[0]


class RunningPrefix(nn.Module):
    """A prefix of the batch chosen by data, as decoders trim finished rows (one row when done)."""

    def __init__(self):
        super().__init__()
        self.cell = nn.Linear(4, 4)

    def forward(self, x):
        h = self.cell(x)
        for _ in range(2):
            if h.abs().mean() > 0.6:
                h = h[:1]
            h = torch.relu(self.cell(h)) + 0.1
        return h.sum(dim=0, keepdim=True)


def _batches(width: int, seed: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    example = [torch.randn(1, width, generator=generator)]
    return example + [torch.randn(batch, width, generator=generator) * scale
                      for batch in (1, 3, 5) for scale in (0.3, 1.0, 3.0) for _ in range(4)]


def test_a_first_row_context_joins_a_whole_batch_one(tmp_path):
    paths = assert_agrees_in_process_and_as_host(FirstRowSummary(), _batches(6, 1), tmp_path, 1e-5, min_paths=3)
    assert paths >= 3


def test_a_trimmed_prefix_in_an_unrolled_loop(tmp_path):
    paths = assert_agrees_in_process_and_as_host(RunningPrefix(), _batches(4, 2), tmp_path, 1e-5, min_paths=2)
    assert paths >= 2
