"""The benchmark's oracle gets the faster of the calling thread and the pool, and computes the same."""

import torch

from dycl.backends.thread_choice import pool_threads
from dycl.harness import traced_baseline


class Gate(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))

    def forward(self, x):
        h = self.body(x)
        if h.sum() > 0:
            return h * 2
        return h - 1


def test_best_threads_is_one_of_the_two_settings_and_agrees_with_the_pool() -> None:
    torch.manual_seed(0)
    model = Gate().eval()
    example = (torch.randn(2, 16),)
    with torch.no_grad():
        best = traced_baseline(model, example, decisions=True, threads="best")
        pooled = traced_baseline(model, example, decisions=True)
        one = traced_baseline(model, example, threads=1)
        assert best.threads in (1, pool_threads())
        assert pooled.threads == pool_threads() and one.threads == 1
        for got, want in zip(best(*example), pooled(*example)):
            assert torch.equal(got, want)
        assert torch.allclose(one(*example)[0], model(*example))
