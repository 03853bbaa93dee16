"""Fresh hunt, family 17: how a call is made. Context managers in ``forward`` (``torch.autocast`` to
bfloat16, which changes the numbers; a user timer with state; ``no_grad`` and ``inference_mode``),
optional, dict, list and ``*args`` inputs, a tensor default, and branches on the input's size, width
parity, length and rank called at sizes other than the example's, ``torch.jit.annotate``, and
``assert`` on the data. Each agrees, is refused at its line, or refuses the call that differs from
the compiled signature by name (the argument compiled as ``None``, the static dimension, the dict's
keys) -- never a wrong answer."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from tests.soundness.fresh_hunt import Case, at, check_case, seeded


class AutocastLinear(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
    def forward(self, x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = self.fc(x)
        if y.float().sum() > 0:
            return y.float()
        return -y.float()

class Timer:
    def __init__(self):
        self.n = 0
    def __enter__(self):
        self.n += 1
        return self
    def __exit__(self, *a):
        return False

class UserCtx(nn.Module):
    def __init__(self):
        super().__init__()
        self.timer = Timer()
    def forward(self, x):
        with self.timer:
            y = x * 2
        if y.sum() > 0:
            return y
        return -y

class EnableGradInNoGrad(nn.Module):
    def forward(self, x):
        with torch.no_grad():
            y = x * 3
        with torch.inference_mode():
            z = y + 1
        if z.sum() > 0:
            return z
        return -z

class OptMask(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
    def forward(self, x, mask: torch.Tensor | None = None):
        y = self.fc(x)
        if mask is not None:
            y = y.masked_fill(mask == 0, -1e4)
        return y.softmax(-1)

class DictIn(nn.Module):
    def forward(self, batch: dict[str, torch.Tensor]):
        x = batch["x"]
        if "bias" in batch:
            x = x + batch["bias"]
        if x.sum() > 0:
            return x
        return -x

class ListIn(nn.Module):
    def forward(self, xs: list[torch.Tensor]):
        out = xs[0]
        for t in xs[1:]:
            out = out + t
        if out.sum() > 0:
            return out
        return -out

class StarArgs(nn.Module):
    def forward(self, *xs):
        tot = xs[0]
        for t in xs[1:]:
            tot = tot * t
        if tot.mean() > 0:
            return tot
        return -tot

_DEFAULT = torch.ones(4)
class MutableDefault(nn.Module):
    def forward(self, x, *, scale=_DEFAULT):
        y = x * scale
        if y.sum() > 0:
            return y
        return -y

class NumelBranch(nn.Module):
    def forward(self, x):
        if x.numel() > 8:
            return x.flatten()[:8].view(2, 4)
        return x * 2

class OddWidth(nn.Module):
    def forward(self, x):
        if x.shape[-1] % 2:
            x = F.pad(x, (0, 1))
        a, b = x.chunk(2, dim=-1)
        return a * b.sigmoid()

class LenBranch(nn.Module):
    def forward(self, x):
        if len(x) > 2:
            return x[:2] + x[2:].sum(0, keepdim=True)
        return x

class DimBranch(nn.Module):
    def forward(self, x):
        if x.dim() == 3:
            x = x.mean(1)
        return x * 2

class JitAnnotate(nn.Module):
    def forward(self, x):
        outs = torch.jit.annotate(list[torch.Tensor], [])
        for i in range(x.shape[0]):
            if x[i].sum() > 0:
                outs.append(x[i])
            else:
                outs.append(-x[i])
        return torch.stack(outs)

class AssertData(nn.Module):
    def forward(self, x):
        assert x.shape[-1] == 4, "bad width"
        assert torch.isfinite(x).all(), "non-finite"
        if x.sum() > 0:
            return x
        return -x


def _randn(seed):
    def make():
        g = seeded(seed)
        return [torch.randn(2, 4, generator=g) * 2 + (i % 2 - 0.5) * 2 for i in range(50)]
    return make


def _sizes(seed, shapes):
    def make():
        g = seeded(seed)
        return [torch.randn(*shapes[i % len(shapes)], generator=g) for i in range(50)]
    return make


def _masks():
    g = seeded(710)
    return [(torch.randn(2, 4, generator=g), (torch.rand(2, 4, generator=g) > 0.3).long() if i % 2 else None)
            for i in range(50)]


def _batches():
    g = seeded(711)
    return [({"x": torch.randn(2, 4, generator=g), **({"bias": torch.randn(4, generator=g)} if i % 2 else {})},)
            for i in range(50)]


def _lists():
    g = seeded(712)
    return [([torch.randn(2, 4, generator=g) for _ in range(1 + i % 3)],) for i in range(50)]


def _pairs():
    g = seeded(713)
    return [(torch.randn(2, 4, generator=g), torch.randn(2, 4, generator=g)) for _ in range(50)]


CASES = {
    "autocast_bfloat16": Case(AutocastLinear, _randn(701), 2, atol=1e-2,
                              refused=at("with statement", 'with torch.autocast("cpu", dtype=torch.bfloat16):')),
    "user_context_manager": Case(UserCtx, _randn(702), 2, refused=at("with statement", "with self.timer:")),
    "no_grad_then_inference_mode": Case(EnableGradInNoGrad, _randn(703), 2),
    "optional_mask": Case(OptMask, _masks, 2, refused=r"argument 'mask' was compiled as None"),
    "dict_with_optional_key": Case(DictIn, _batches, 2, refused=r"a dict with keys \['bias', 'x'\] where the model"),
    "list_of_varying_length": Case(ListIn, _lists, 2, refused=at("for loop", "for t in xs[1:]:")),
    "star_args": Case(StarArgs, _pairs, 2, refused=at("for loop", "for t in xs[1:]:")),
    "tensor_keyword_default": Case(MutableDefault, _randn(704), 2),
    "numel_branch": Case(NumelBranch, _sizes(705, [(2, 4), (3, 4), (1, 4), (4, 4)]), 2),
    "width_parity": Case(OddWidth, _sizes(706, [(2, 4), (2, 5), (2, 6), (2, 3)]), 2,
                         refused=r"expected shape \[batch, 4\], got \[2, 5\] \(dimension 1 is static: 4\)"),
    "len_branch": Case(LenBranch, _sizes(707, [(2, 4), (3, 4), (1, 4), (5, 4)]), 2),
    "rank_branch": Case(DimBranch, _sizes(708, [(2, 4), (2, 3, 4)]), 2, refused=r"expected rank 2"),
    "jit_annotate": Case(JitAnnotate, _sizes(709, [(3, 4)]), 2, refused=at("for loop", "for i in range(x.shape[0]):")),
    "assert_on_data": Case(AssertData, _randn(714), 2),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_call_forms(name, tmp_path):
    case = CASES[name]
    assert check_case(case, tmp_path) == case.paths
