"""A greedy pick's ``argmax``/``argmin`` of float32/16 scores is one ``ArgMax``/``ArgMin`` over a float64
key (``dycl.backends.onnx_nan_reductions._nan_extreme_key``) and still eager's answer: the first NaN
where a row holds one (also after a ``+inf``), else the first extreme (``+inf`` above ``float32`` max,
``-0.0`` tied with ``0.0``), on the paths the pick chooses, in process and as a host."""

from __future__ import annotations

import torch
import torch.nn as nn

from dycl.harness.host_agreement import assert_agrees_in_process_and_as_host

NAN, INF, BIG = float("nan"), float("inf"), torch.finfo(torch.float32).max
END_TOKEN = 2


class GreedyPick(nn.Module):
    """A decoder's step as people write it: the best word, stop at the end token, else the runner-up
    scores' worst word too."""

    def forward(self, scores: torch.Tensor):
        word = scores.argmax(dim=-1)
        if word[0].item() == END_TOKEN:
            return word
        return word, torch.argmin(scores, 1, keepdim=True), scores.half().argmax(-1), scores.flatten().argmax()


def _inputs() -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(29)
    rows = [[1.0, INF, NAN, 2.0, 0.5], [NAN, 1.0, INF, 3.0, NAN], [BIG, INF, 1.0, -INF, NAN],
            [-0.0, 0.0, -1.0, -2.0, -3.0], [0.0, 1.0, 5.0, -INF, NAN], [NAN] * 5, [INF, INF, -INF, -INF, 1.0],
            [BIG, 1.0, INF, 0.0, -BIG], [-INF, 2.0, 1.0, 1.0, NAN], [0.5, 0.5, 0.7, 0.7, 0.1]]
    out = []
    for i in range(40):
        x = torch.randn(3, 5, generator=generator)
        x[i % 3] = torch.tensor(rows[i % len(rows)])
        x[(i + 1) % 3, i % 5] = NAN if i % 4 == 0 else x[(i + 1) % 3, i % 5]
        if i % 5 == 1:
            x[0, END_TOKEN] = INF
        out.append(x)
    return out


def test_greedy_pick_agrees_with_eager_on_nan_and_infinities(tmp_path):
    assert assert_agrees_in_process_and_as_host(GreedyPick(), _inputs(), tmp_path, 0.0, min_paths=2) == 2

