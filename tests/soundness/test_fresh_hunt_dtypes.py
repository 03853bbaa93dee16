"""Fresh hunt, family 4: dtype handling in data-dependent code (``finfo(x.dtype).min`` masks,
``new_tensor``/``new_zeros``/``new_full``, ``type_as``, ``.to(x.dtype)``, bool and int tensors in
arithmetic and indexing, bfloat16 round trips, integer division of sizes, uint8 wraparound)."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from tests.soundness.fresh_hunt import Case, at, check_case, seeded


def _randn(seed, shape, spread=4):
    def make():
        g = seeded(seed)
        return [torch.randn(*shape, generator=g) * (0.3 + i % spread) for i in range(50)]
    return make


class FinfoMaskedSoftmax(nn.Module):  # attention scores masked with finfo.min (HF style)
    def forward(self, scores, mask):  # mask: bool (2, 4), True = keep
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
        probs = scores.softmax(-1)
        if (~mask).all(-1).any():  # a fully masked row: zero it like many codebases do
            probs = probs * mask.any(-1, keepdim=True).to(probs.dtype)
        return probs


def _mask_inputs():
    g = seeded(401)
    out = []
    for i in range(50):
        mask = torch.rand(2, 4, generator=g) > (0.2 + 0.15 * (i % 5))
        out.append((torch.randn(2, 4, generator=g), mask))
    return out


class NewTensorBias(nn.Module):
    def forward(self, x):
        if x.mean() > 0:
            bias = x.new_tensor([1.0, -1.0, 0.5])
        else:
            bias = x.new_full((3,), 2.0)
        return x + bias + x.new_zeros(x.shape[0], 3)


class TypeAsMask(nn.Module):  # a bool mask turned into a float multiplier
    def forward(self, x):
        keep = (x > 0).type_as(x)
        if keep.sum() > x.numel() / 2:
            return x * keep
        return x * (1 - keep)


class ToInputDtype(nn.Module):  # compute in float64, hand back in the input's dtype
    def forward(self, x):
        h = x.to(torch.float64).exp()
        if h.max() > 10:
            h = h.log1p()
        return h.to(x.dtype)


class BoolPlusBool(nn.Module):  # bool + bool is bool (logical or) in torch
    def forward(self, x):
        either = (x > 1) + (x < -1)
        if either.any():
            return either.long().sum() + x.sum()
        return x.sum()


class IntIndexFromCounts(nn.Module):  # an int tensor from data used as an index
    def forward(self, x):  # x: (3, 5)
        k = (x > 0).sum(1)  # int64 counts per row
        picked = x.gather(1, (k - 1).clamp(min=0).unsqueeze(1))
        if (k == 0).any():
            picked = picked * 0
        return picked


class BF16RoundTrip(nn.Module):  # quantize-dequantize style
    def forward(self, x):
        y = x.to(torch.bfloat16).float()
        if (y - x).abs().max() > 1e-2:
            return y
        return x


class Int32Ids(nn.Module):  # token ids narrowed to int32 after clamping to its range
    def forward(self, ids):  # int64 (4,)
        narrow = ids.clamp(torch.iinfo(torch.int32).min, torch.iinfo(torch.int32).max).to(torch.int32)
        if (narrow != ids).any():  # out of range: flag with -1
            return torch.full_like(narrow, -1)
        return narrow * 2


def _id_inputs():
    g = seeded(402)
    return [torch.randint(-1000, 1000, (4,), generator=g) * (1 if i % 3 else 2**22) for i in range(50)]


class Uint8Wrap(nn.Module):  # image-style uint8 arithmetic wraps around
    def forward(self, img):  # uint8 (4,)
        shifted = img + 100
        if (shifted < img).any():  # wrapped
            return shifted.float() / 255
        return img.float() / 255


def _uint8_inputs():
    g = seeded(403)
    return [torch.randint(0, 80 + 40 * (i % 5), (4,), generator=g, dtype=torch.uint8) for i in range(50)]


class IntTrueDivision(nn.Module):  # int / int gives float in torch; // floors
    def forward(self, counts):  # int64 (3,)
        ratio = counts / counts.sum().clamp(min=1)
        if (counts % 2 == 0).all():
            return ratio, counts // 2
        return ratio, torch.div(counts, 3, rounding_mode="trunc")


def _count_inputs():
    g = seeded(404)
    return [torch.randint(-5, 6, (3,), generator=g) * (1 + (i % 2)) for i in range(50)]


class BucketizeBins(nn.Module):  # histogram-style binning, both edge conventions
    def __init__(self):
        super().__init__()
        self.register_buffer("edges", torch.tensor([-1.0, 0.0, 1.0]))

    def forward(self, x):
        b = torch.bucketize(x, self.edges, right=True)
        if (b == 3).any():
            return b * 10
        return torch.bucketize(x, self.edges)


class HalfOverflow(nn.Module):  # float16 overflows to inf where float32 does not
    def forward(self, x):
        h = (x * 3e4).half()
        if torch.isinf(h).any():
            return h.float().clamp(-1e5, 1e5)
        return h.float()


class Int32Sum(nn.Module):  # int32 accumulation wraps around
    def forward(self, x):  # int32 (4,)
        s = x.sum(dtype=torch.int32)
        if s > 0:
            return s, x.cumsum(0, dtype=torch.int32)
        return s, x


def _int32_inputs():
    g = seeded(411)
    return [torch.randint(-2**30, 2**30, (4,), generator=g, dtype=torch.int32) for _ in range(50)]


class IntPowAndNegativeDivisor(nn.Module):
    def forward(self, x):
        k = (x * 2).long()
        if k.abs().max() > 3:
            return k ** 2, k // -2
        return k * 3, k % -3


class WhereIntFloat(nn.Module):  # torch.where of an int tensor and a float scalar promotes
    def forward(self, x):
        k = (x * 3).long()
        if k.sum() > 0:
            return torch.where(k > 1, k, 0.5)
        return k.clamp(min=-1) * 1.5


class Uint8BitwiseNot(nn.Module):  # ~ on uint8 is a bitwise not (254/255), not a logical one
    def forward(self, x):
        m = (x > 0).to(torch.uint8)
        inv = ~m
        if inv.max() == 255:
            return inv.float()
        return m.float()


CASES = {
    "finfo_masked_softmax": Case(FinfoMaskedSoftmax, _mask_inputs, 2),
    "new_tensor_bias": Case(NewTensorBias, _randn(405, (2, 3)), 2),
    "type_as_mask": Case(TypeAsMask, _randn(406, (2, 3)), 2),
    "to_input_dtype": Case(ToInputDtype, _randn(407, (3,)), 2),
    "bool_plus_bool": Case(BoolPlusBool, _randn(408, (3,)), 2),
    "int_index_from_counts": Case(IntIndexFromCounts, _randn(409, (3, 5)), 2),
    "bf16_round_trip": Case(BF16RoundTrip, _randn(410, (3,)), 2),
    "int32_ids": Case(Int32Ids, _id_inputs, 2),
    "uint8_wrap": Case(Uint8Wrap, _uint8_inputs, 2),
    "int_true_division": Case(IntTrueDivision, _count_inputs, 2),
    "bucketize_bins": Case(BucketizeBins, _randn(412, (4,)), 2),
    "half_overflow": Case(HalfOverflow, _randn(413, (4,)), 2),
    "int32_sum": Case(Int32Sum, _int32_inputs, 2),
    "int_pow_negative_divisor": Case(IntPowAndNegativeDivisor, _randn(414, (4,)), 2),
    "where_int_float": Case(WhereIntFloat, _randn(415, (4,)), 2),
    "uint8_bitwise_not": Case(Uint8BitwiseNot, _randn(416, (4,)), 2,
                              refused=at("ONNX exporter cannot translate", "m = (x > 0).to(torch.uint8)")),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_dtype_handling(name, tmp_path):
    case = CASES[name]
    assert check_case(case, tmp_path) == case.paths
