"""The table the edge-value sweep (``test_op_edge_sweep``) runs: single PyTorch operators, each as
written in user code, and the edge-value inputs it runs them on.

Each entry is one operator applied to a ``(4, 6)`` tensor ``x`` (pooling and matmul reshape it or
use weights of their own), with the kind of ``x`` it takes: ``float`` (float32), ``int`` (int64),
``bool``, ``thin`` (float32 of shape ``(4, 1)``: a one-element reduction dim), or ``sums`` (float32
without ±FLT_MAX, for sums, means and products of matrices: where a sum overflows or cancels, its
value depends on the order of summation, which neither eager nor ONNX Runtime defines), or ``pair``
(float32 of shape ``(1, 2)``: two edge values side by side). The inputs of
each kind hold what a model meets at its edges: NaN, ±inf, -0.0, ±FLT_MAX, subnormals, int64
beyond 2**31 and 2**53, ties, rows that are all equal, all NaN or all -inf. The floating kinds
also come at float64 (``inputs_of(kind, torch.float64)``: the same values and ±DBL_MAX, a float64
subnormal); an entry's own constants follow ``x.dtype``.

Entries are registered one per statement (``_add(...)``) so that dycl can read each lambda's
source (``rewriter.lambdas``). The table is data; nothing here knows what any operator should give.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch
import torch.nn.functional as F

NAN, INF = float("nan"), float("inf")
FLT_MAX = torch.finfo(torch.float32).max
TINY = torch.finfo(torch.float32).tiny / 4  # subnormal


class Entry(NamedTuple):
    """One operator of the sweep: its name, what it computes from ``x``, the kind of ``x``."""

    name: str
    op: Callable[[torch.Tensor], torch.Tensor]
    kind: str


TABLE: list[Entry] = []


def _add(name: str, kind: str, op: Callable[[torch.Tensor], torch.Tensor]) -> None:
    TABLE.append(Entry(name, op, kind))


def _weights(rows: int, cols: int, seed: int) -> torch.Tensor:
    return torch.randn(rows, cols, generator=torch.Generator().manual_seed(seed))


W6x3 = _weights(6, 3, 1)
B3 = _weights(1, 3, 2)[0]
INDEX4x6 = torch.tensor([[0, 1, 2, 0, 1, 2]] * 4)

# elementwise math
_add("exp", "float", lambda x: torch.exp(x))
_add("expm1", "float", lambda x: torch.expm1(x))
_add("log", "float", lambda x: torch.log(x))
_add("log1p", "float", lambda x: torch.log1p(x))
_add("log2", "float", lambda x: x.log2())
_add("sqrt", "float", lambda x: x.sqrt())
_add("rsqrt", "float", lambda x: torch.rsqrt(x))
_add("reciprocal", "float", lambda x: x.reciprocal())
_add("sin", "float", lambda x: torch.sin(x))
_add("cos", "float", lambda x: x.cos())
_add("tan", "float", lambda x: torch.tan(x))
_add("atan", "float", lambda x: torch.atan(x))
_add("asin", "float", lambda x: torch.asin(x))
_add("sinh", "float", lambda x: torch.sinh(x))
_add("cosh", "float", lambda x: torch.cosh(x))
_add("tanh", "float", lambda x: torch.tanh(x))
_add("erf", "float", lambda x: torch.erf(x))
_add("square", "float", lambda x: torch.square(x))
_add("x*x", "float", lambda x: x * x)
_add("abs", "float", lambda x: x.abs())
_add("abs_int", "int", lambda x: x.abs())
_add("neg", "float", lambda x: -x)
_add("neg_int", "int", lambda x: torch.neg(x))
_add("sign", "float", lambda x: torch.sign(x))
_add("sign_int", "int", lambda x: x.sign())
_add("round", "float", lambda x: torch.round(x))
_add("round_decimals", "float", lambda x: torch.round(x, decimals=1))
_add("floor", "float", lambda x: x.floor())
_add("ceil", "float", lambda x: torch.ceil(x))
_add("trunc", "float", lambda x: torch.trunc(x))
_add("frac", "float", lambda x: torch.frac(x))
_add("nan_to_num", "float", lambda x: torch.nan_to_num(x))
_add("nan_to_num_values", "float", lambda x: x.nan_to_num(nan=0.0, posinf=1.0, neginf=-1.0))
_add("add_scalar", "float", lambda x: x + 1.5)
_add("sub_flip", "float", lambda x: x - x.flip(1))
_add("mul_flip", "float", lambda x: x * x.flip(1))
_add("add_int", "int", lambda x: x + x.flip(1))
_add("mul_int", "int", lambda x: x * 3)
_add("lerp", "float", lambda x: torch.lerp(x, x.flip(1), 0.25))
_add("addcmul", "float", lambda x: torch.addcmul(x, x, x.flip(0), value=0.5))
# division, remainder, powers
_add("div", "float", lambda x: x / x.flip(1))
_add("div_scalar", "float", lambda x: x / 3.0)
_add("div_floor", "float", lambda x: torch.div(x, x.flip(1), rounding_mode="floor"))
_add("div_trunc", "float", lambda x: torch.div(x, 3.0, rounding_mode="trunc"))
_add("floordiv_op", "float", lambda x: x // 2.5)
_add("floordiv_int", "int", lambda x: x // 7)
_add("floordiv_int_neg", "int", lambda x: torch.div(x, -3, rounding_mode="floor"))
_add("truediv_int", "int", lambda x: x / 7)
_add("remainder", "float", lambda x: torch.remainder(x, 2.5))
# eager's fmod by a subnormal is 0 or NaN by the element's place in its vectorised kernel: none here
_add("remainder_tensor", "float", lambda x: x % x.flip(1).where(x.flip(1).abs() > 1e-30, 0.0))
_add("remainder_by_double", "float", lambda x: x % x.flip(0).double().where(x.flip(0).abs() > 1e-30, 0.0))
_add("fmod_by_int", "float", lambda x: torch.fmod(x, torch.arange(-3, 3).clamp(min=1)))
_add("remainder_int", "int", lambda x: x % 7)
_add("remainder_int_neg", "int", lambda x: torch.remainder(x, -5))
_add("fmod", "float", lambda x: torch.fmod(x, 2.5))
_add("fmod_int", "int", lambda x: torch.fmod(x, 7))
_add("pow2", "float", lambda x: x ** 2)
_add("pow_half", "float", lambda x: torch.pow(x, 0.5))
_add("pow_neg", "float", lambda x: x.pow(-1))
_add("pow_tensor", "float", lambda x: torch.pow(x, x.flip(1)))
_add("pow_base", "float", lambda x: 2.0 ** x)
_add("pow_int", "int", lambda x: x ** 2)
# comparisons, where, tests
_add("gt", "float", lambda x: x > 0)
_add("ge_flip", "float", lambda x: x >= x.flip(1))
_add("eq_flip", "float", lambda x: x == x.flip(0))
_add("ne", "float", lambda x: x != 0)
_add("lt_int", "int", lambda x: x < 2 ** 31)
_add("eq_int", "int", lambda x: x == x.flip(1))
_add("isnan", "float", lambda x: torch.isnan(x))
_add("isinf", "float", lambda x: torch.isinf(x))
_add("isfinite", "float", lambda x: torch.isfinite(x))
_add("isposinf", "float", lambda x: torch.isposinf(x))
_add("where", "float", lambda x: torch.where(x > 0, x, x.flip(1)))
_add("where_scalar", "float", lambda x: torch.where(x.isnan(), 0.0, x))
_add("masked_fill", "float", lambda x: x.masked_fill(x < 0, float("-inf")))
_add("where_int", "int", lambda x: torch.where(x > 0, x, -x))
_add("logical_and", "bool", lambda x: torch.logical_and(x, x.flip(1)))
_add("logical_not", "bool", lambda x: ~x)
_add("bool_xor", "bool", lambda x: x ^ x.flip(0))
_add("maximum", "float", lambda x: torch.maximum(x, x.flip(1)))
_add("minimum", "float", lambda x: torch.minimum(x, x.flip(0)))
_add("fmax", "float", lambda x: torch.fmax(x, x.flip(1)))
_add("fmin", "float", lambda x: torch.fmin(x, x.flip(1)))
_add("maximum_int", "int", lambda x: torch.maximum(x, x.flip(1)))
_add("minimum_int", "int", lambda x: torch.minimum(x, x.flip(0)))
# clamp and clip
_add("clamp", "float", lambda x: torch.clamp(x, -5.0, 5.0))
_add("clamp_min", "float", lambda x: x.clamp(min=0.5))
_add("clamp_max", "float", lambda x: x.clamp_max(2.0))
_add("clip", "float", lambda x: torch.clip(x, min=-1.0))
_add("clamp_int", "int", lambda x: torch.clamp(x, -5, 5))
_add("clamp_int_big", "int", lambda x: x.clamp(-2 ** 40, 2 ** 40))
_add("clamp_min_int", "int", lambda x: torch.clamp_min(x, 0))
_add("clamp_max_int", "int", lambda x: x.clamp_max(2 ** 33))
_add("clip_int", "int", lambda x: x.clip(max=100))
_add("clamp_nan_bound", "float", lambda x: torch.clamp(x, min=float("nan")))
_add("clamp_tensor_bounds", "float", lambda x: torch.clamp(x, x.flip(1), x.flip(1) + 1))
_add("clamp_tensor_bounds_int", "int", lambda x: torch.clamp(x, x.flip(1)))
_add("clamp_int32_by_int64", "int", lambda x: (x % 1000).int().clamp(x.flip(1) % 700 - 300, x.flip(0) % 900))
_add("clamp_by_double", "float", lambda x: x.clamp(max=x.flip(1).double()))
_add("relu6", "float", lambda x: F.relu6(x))
_add("hardtanh", "float", lambda x: F.hardtanh(x, -2.0, 2.0))
# activations
_add("relu", "float", lambda x: torch.relu(x))
_add("relu_int", "int", lambda x: F.relu(x))
_add("leaky_relu", "float", lambda x: F.leaky_relu(x, 0.1))
_add("gelu", "float", lambda x: F.gelu(x))
_add("gelu_tanh", "float", lambda x: F.gelu(x, approximate="tanh"))
_add("silu", "float", lambda x: F.silu(x))
_add("mish", "float", lambda x: F.mish(x))
_add("softplus", "float", lambda x: F.softplus(x))
_add("softplus_beta", "float", lambda x: F.softplus(x, beta=2.0, threshold=10.0))
_add("hardswish", "float", lambda x: F.hardswish(x))
_add("hardsigmoid", "float", lambda x: F.hardsigmoid(x))
_add("elu", "float", lambda x: F.elu(x))
_add("selu", "float", lambda x: torch.selu(x))
_add("celu", "float", lambda x: F.celu(x, alpha=0.5))
_add("sigmoid", "float", lambda x: torch.sigmoid(x))
_add("logsigmoid", "float", lambda x: F.logsigmoid(x))
_add("softsign", "float", lambda x: F.softsign(x))
_add("tanhshrink", "float", lambda x: F.tanhshrink(x))
_add("hardshrink", "float", lambda x: F.hardshrink(x, 0.5))
# softmax family
_add("softmax", "float", lambda x: F.softmax(x, dim=-1))
_add("softmax_dim0", "float", lambda x: x.softmax(0))
_add("log_softmax", "float", lambda x: F.log_softmax(x, dim=1))
_add("softmax_thin", "thin", lambda x: torch.softmax(x, -1))
_add("logsumexp", "float", lambda x: torch.logsumexp(x, dim=1))
# reductions
_add("sum", "sums", lambda x: x.sum())
_add("sum_dim", "sums", lambda x: x.sum(1))
_add("sum_int", "int", lambda x: x.sum(0))
_add("sum_bool", "bool", lambda x: x.sum(1))
_add("mean", "sums", lambda x: x.mean())
_add("mean_dim", "sums", lambda x: torch.mean(x, dim=0, keepdim=True))
_add("prod", "float", lambda x: x.prod(1))
_add("prod_int", "int", lambda x: torch.prod(x, 1))
_add("max", "float", lambda x: x.max())
_add("max_dim_values", "float", lambda x: x.max(dim=1).values)
_add("max_dim_indices", "float", lambda x: x.max(dim=1).indices)
_add("min_dim_indices", "float", lambda x: torch.min(x, 0)[1])
_add("max_int", "int", lambda x: x.max())
_add("max_dim_int", "int", lambda x: x.max(1)[0])
_add("min_int", "int", lambda x: torch.min(x))
_add("amax", "float", lambda x: x.amax(dim=1))
_add("amin_int", "int", lambda x: x.amin(dim=0))
_add("argmax", "float", lambda x: x.argmax())
_add("argmax_dim", "float", lambda x: torch.argmax(x, dim=1))
_add("argmin_dim", "float", lambda x: x.argmin(0))
_add("argmax_int", "int", lambda x: x.argmax(1))
_add("argmax_thin", "thin", lambda x: x.argmax(1))
_add("any", "float", lambda x: x.any(1))
_add("all_bool", "bool", lambda x: x.all(0))
_add("var", "sums", lambda x: x.var(1))
_add("std", "sums", lambda x: torch.std(x, dim=0))
_add("count_nonzero", "float", lambda x: torch.count_nonzero(x, dim=1))
_add("nansum", "float", lambda x: torch.nansum(x, 1))
# sorting and selection
_add("sort_values", "float", lambda x: torch.sort(x, 1)[0])
_add("sort_indices_desc", "float", lambda x: x.sort(dim=1, descending=True).indices)
_add("argsort", "float", lambda x: torch.argsort(x, dim=0))
_add("sort_int", "int", lambda x: x.sort(1).values)
_add("topk_values", "float", lambda x: x.topk(2, dim=1).values)
# ``topk``'s order of equal values is unspecified: its indices are checked by the values they pick
_add("topk_indices", "float", lambda x: x.gather(1, torch.topk(x, 3, largest=False)[1]))
_add("topk_int", "int", lambda x: x.topk(2).values)
_add("unique", "float", lambda x: torch.unique(x))
_add("unique_int", "int", lambda x: x.unique())
_add("unique_counts", "float", lambda x: torch.unique(x, return_counts=True)[1])
_add("unique_values_of_counted", "float", lambda x: torch.unique(x, return_counts=True)[0])
_add("msort_like", "float", lambda x: x.flatten().sort().values)
# scans
_add("cumsum", "float", lambda x: x.cumsum(1))
_add("cumsum_int", "int", lambda x: torch.cumsum(x, 0))
_add("cumsum_bool", "bool", lambda x: x.cumsum(-1))
_add("cumprod", "float", lambda x: torch.cumprod(x, 1))
_add("cummax", "float", lambda x: torch.cummax(x, 1).values)
_add("logcumsumexp", "float", lambda x: torch.logcumsumexp(x, 1))
# norms
_add("norm", "sums", lambda x: x.norm())
_add("norm_dim", "sums", lambda x: torch.norm(x, dim=1))
_add("norm_inf", "float", lambda x: x.norm(p=float("inf")))
_add("norm_inf_dim", "float", lambda x: x.norm(p=float("inf"), dim=1))
_add("vector_norm_inf", "float", lambda x: torch.linalg.vector_norm(x, ord=float("inf"), dim=1))
_add("vector_norm_ninf", "float", lambda x: torch.linalg.vector_norm(x, ord=float("-inf"), dim=-1))
_add("vector_norm_ninf_all", "float", lambda x: torch.linalg.vector_norm(x, ord=-INF))
_add("vector_norm_1", "sums", lambda x: torch.linalg.vector_norm(x, ord=1, dim=1))
_add("normalize", "sums", lambda x: F.normalize(x, dim=1))
_add("layer_norm", "sums", lambda x: F.layer_norm(x, (6,)))
_add("rms_norm", "sums", lambda x: F.rms_norm(x, (6,)))
# pooling
_add("max_pool1d", "float", lambda x: F.max_pool1d(x.unsqueeze(0), 2))
_add("max_pool1d_ceil", "float", lambda x: F.max_pool1d(x.unsqueeze(0), 4, stride=3, ceil_mode=True))
_add("max_pool2d", "float", lambda x: F.max_pool2d(x.reshape(1, 1, 4, 6), 2))
_add("max_pool2d_pad", "float", lambda x: F.max_pool2d(x.reshape(1, 1, 4, 6), 3, stride=2, padding=1))
_add("max_pool2d_indices", "float", lambda x: F.max_pool2d(x.reshape(1, 1, 4, 6), 2, return_indices=True)[1])
_add("max_pool2d_pad_indices", "float", lambda x: F.max_pool2d(x.view(1, 2, 2, 6), 3, 2, 1, return_indices=True)[1])
_add("max_pool1d_indices", "float", lambda x: F.max_pool1d(x.unsqueeze(0), 3, 2, return_indices=True)[1])
_add("max_pool3d", "float", lambda x: F.max_pool3d(x.reshape(1, 1, 2, 2, 6), 2, ceil_mode=True))
_add("avg_pool2d", "sums", lambda x: F.avg_pool2d(x.reshape(1, 1, 4, 6), 2))
_add("avg_pool1d_pad", "sums", lambda x: F.avg_pool1d(x.unsqueeze(0), 3, 2, padding=1))
_add("adaptive_avg_pool2d", "sums", lambda x: F.adaptive_avg_pool2d(x.reshape(1, 1, 4, 6), 1))
_add("adaptive_max_pool2d", "float", lambda x: F.adaptive_max_pool2d(x.reshape(1, 1, 4, 6), (2, 3)))
_add("adaptive_max_pool2d_indices", "float", lambda x: F.adaptive_max_pool2d(x.view(1, 1, 4, 6), 2, True)[1])
_add("adaptive_max_pool1d", "float", lambda x: F.adaptive_max_pool1d(x.unsqueeze(0), 1))
# casts
_add("float_to_int", "float", lambda x: x.clamp(-1e6, 1e6).nan_to_num(0.0).long())
_add("float_to_bool", "float", lambda x: x.bool())
_add("int_to_float", "int", lambda x: x.float())
_add("int_to_double", "int", lambda x: x.double())
_add("int_to_int32", "int", lambda x: x.int())
_add("bool_to_float", "bool", lambda x: x.float())
_add("bool_to_long", "bool", lambda x: x.long())
_add("to_half", "float", lambda x: x.half())
_add("to_double", "float", lambda x: x.to(torch.float64))
# matmul, linear
_add("matmul", "sums", lambda x: x @ W6x3.to(x.dtype))
_add("linear", "sums", lambda x: F.linear(x, W6x3.t().to(x.dtype), B3.to(x.dtype)))
_add("bmm_self", "sums", lambda x: torch.matmul(x, x.t()))
_add("einsum", "sums", lambda x: torch.einsum("ij,jk->ik", x, W6x3.to(x.dtype)))
_add("matmul_int", "int", lambda x: x @ x.t())
# selection, indexing, statistics
_add("median", "float", lambda x: x.median())
_add("median_dim", "float", lambda x: x.median(dim=1).values)
_add("kthvalue", "float", lambda x: torch.kthvalue(x, 2, dim=1).values)
_add("mode_int", "int", lambda x: torch.mode(x, 1).values)
_add("quantile", "sums", lambda x: torch.quantile(x, 0.5, dim=1))
_add("nanmean", "float", lambda x: torch.nanmean(x, 1))
_add("gather", "float", lambda x: x.gather(1, x.abs().nan_to_num(0.0).clamp(0, 5).long()))
_add("index_select", "float", lambda x: x.index_select(1, torch.tensor([5, 0, 0, 2])))
_add("scatter_add", "float", lambda x: torch.zeros(4, 3, dtype=x.dtype).scatter_add(1, INDEX4x6, x))
_add("scatter_reduce_amax", "float", lambda x: x.new_zeros(4, 3).scatter_reduce(1, INDEX4x6, x, "amax"))
_add("scatter_reduce_amin", "float", lambda x: x[:, :3].scatter_reduce(1, INDEX4x6, x.flip(0), "amin"))
_add("bucketize", "float", lambda x: torch.bucketize(x, torch.tensor([-1.0, 0.0, 1.0])))
_add("searchsorted", "float", lambda x: torch.searchsorted(torch.tensor([-1.0, 0.0, 1.0]), x))
_add("isin_int", "int", lambda x: torch.isin(x, torch.tensor([0, 7, 2 ** 31])))
_add("nonzero", "float", lambda x: torch.nonzero(x > 0))
_add("masked_select", "float", lambda x: x[x > 0])
_add("roll", "float", lambda x: torch.roll(x, 2, 1))
_add("diff", "float", lambda x: torch.diff(x, dim=1))
_add("cdist", "sums", lambda x: torch.cdist(x, x.flip(0)))
_add("cosine_similarity", "sums", lambda x: F.cosine_similarity(x, x.flip(0), dim=1))
_add("one_hot", "int", lambda x: F.one_hot(x.abs() % 5, 5))
_add("embedding", "int", lambda x: F.embedding(x.abs() % 6, W6x3))
_add("interpolate", "float", lambda x: F.interpolate(x.unsqueeze(0), scale_factor=2.0, mode="nearest"))
_add("interpolate_linear", "float", lambda x: F.interpolate(x.unsqueeze(0), size=9, mode="linear"))
_add("interpolate_linear_scale", "float", lambda x: F.interpolate(x.unsqueeze(0), scale_factor=1.5, mode="linear"))
_add("interpolate_linear_corners", "float", lambda x: F.interpolate(x[None], size=4, mode="linear", align_corners=True))
_add("upsample_linear", "float", lambda x: torch.nn.Upsample(scale_factor=3, mode="linear")(x.unsqueeze(0)))
_add("floor_int", "int", lambda x: torch.floor(x))
_add("max_int32", "int", lambda x: (x % 100000).int().max(1).values)
_add("cumsum_int32", "int", lambda x: (x % 100000).int().cumsum(1))
_add("bitwise_and_int", "int", lambda x: x & 0xFFFF)
_add("shift_int", "int", lambda x: x >> 3)
_add("where_nan_cond", "float", lambda x: torch.where(x != x, x.flip(1), x))
_add("minimum_nan", "pair", lambda x: torch.minimum(x, x.flip(1)))
_add("copysign", "float", lambda x: torch.copysign(x.abs(), x.flip(1)))
_add("hypot", "float", lambda x: torch.hypot(x, x.flip(1)))
_add("atan2", "float", lambda x: torch.atan2(x, x.flip(1)))
_add("atan2_zeros", "pair", lambda x: torch.atan2(torch.cat([x, -x, x.flip(1)]), torch.cat([x.flip(1), x, -x])))
_add("logaddexp", "float", lambda x: torch.logaddexp(x, x.flip(1)))
_add("xlogy", "float", lambda x: torch.xlogy(x, x.flip(1)))
_add("bce_large_logits", "float", lambda x: F.binary_cross_entropy_with_logits(x * 10, (x > 0).float(), None))
_add("bce_weights_mean", "sums", lambda x: F.binary_cross_entropy_with_logits(
    x, x.flip(1).sigmoid(), weight=torch.arange(6.0), pos_weight=torch.full((6,), 3.0)))
_add("sigmoid_bce", "sums", lambda x: F.binary_cross_entropy_with_logits(x, (x.flip(1) > 0).float(), reduction="none"))
_add("cross_entropy", "sums", lambda x: F.cross_entropy(x, torch.tensor([0, 5, 2, 3]), reduction="none"))
_add("cross_entropy_weighted", "sums", lambda x: F.cross_entropy(
    x, torch.tensor([0, 5, 2, 3]), weight=torch.arange(1.0, 7.0, dtype=x.dtype), ignore_index=2))
_add("dropout_eval", "float", lambda x: F.dropout(x, 0.5, training=False))
_add("glu", "float", lambda x: F.glu(x, dim=1))
_add("prelu", "float", lambda x: F.prelu(x, torch.tensor([0.25], dtype=x.dtype)))
_add("rrelu_eval", "float", lambda x: F.rrelu(x, training=False))
_add("threshold", "float", lambda x: F.threshold(x, 0.5, -1.0))
_add("softmin", "float", lambda x: F.softmin(x, dim=1))
_add("group_norm", "sums", lambda x: F.group_norm(x.unsqueeze(0), 2))
_add("batch_norm_eval", "float", lambda x: F.batch_norm(x, x.new_zeros(6), x.new_ones(6)))
_add("instance_norm", "sums", lambda x: F.instance_norm(x.unsqueeze(0)))
_add("lp_pool1d", "sums", lambda x: F.lp_pool1d(x.unsqueeze(0), 2.0, 2))
_add("pixel_shuffle", "float", lambda x: F.pixel_shuffle(x.view(1, 4, 2, 3), 2))
_add("triu", "float", lambda x: torch.triu(x))
_add("flip_cat", "float", lambda x: torch.cat([x, x.flip(0)], 1))
_add("std_mean", "sums", lambda x: torch.std_mean(x, dim=1)[0])
_add("var_unbiased0", "sums", lambda x: x.var(dim=1, unbiased=False))
_add("aminmax", "float", lambda x: torch.aminmax(x, dim=1).min)
_add("aminmax_all", "float", lambda x: torch.aminmax(x).max)
_add("aminmax_int", "int", lambda x: torch.aminmax(x, dim=0, keepdim=True).max)
_add("rshift_int32", "int", lambda x: (x % 1000 - 500).int() >> 2)
_add("ceil_int", "int", lambda x: x.ceil())
_add("allclose_like", "float", lambda x: torch.isclose(x, x.flip(1)))
_add("sort_stable", "float", lambda x: torch.sort(x, dim=1, stable=True).indices)
_add("argsort_int", "int", lambda x: torch.argsort(x, dim=1, stable=True))
_add("cummin", "float", lambda x: torch.cummin(x, 1).values)
_add("trapz", "sums", lambda x: torch.trapezoid(x, dim=1))
_add("exp2", "float", lambda x: torch.exp2(x))
_add("log10", "float", lambda x: torch.log10(x))
_add("sigmoid_mul", "float", lambda x: x * torch.sigmoid(x.flip(0)))
_add("neg_zero_mul", "float", lambda x: x * -0.0)

# pairs: the smallest rows, each pair of edge values side by side
_add("pair_max", "pair", lambda x: x.max(dim=1).values)
_add("pair_argmin", "pair", lambda x: x.argmin(1))
_add("pair_softmax", "pair", lambda x: x.softmax(-1))
_add("pair_sort", "pair", lambda x: x.sort(-1).values)
_add("pair_unique", "pair", lambda x: x.unique())
_add("pair_clamp", "pair", lambda x: x.clamp(-1.0, 1.0))
_add("pair_gelu", "pair", lambda x: F.gelu(x))
_add("pair_norm_inf", "pair", lambda x: x.norm(p=float("inf"), dim=-1))
_add("pair_cumsum", "pair", lambda x: x.cumsum(1))
_add("pair_max_pool", "pair", lambda x: F.max_pool1d(x.unsqueeze(1), 2, return_indices=True)[1])
_add("pair_sum", "pair", lambda x: x.sum(1))
_add("pair_remainder", "pair", lambda x: torch.remainder(x, x.flip(1)))


def _pair_inputs() -> list[torch.Tensor]:
    pairs = [[NAN, 1.0], [INF, -INF], [-0.0, 0.0], [FLT_MAX, -FLT_MAX], [NAN, NAN], [-INF, -INF], [2.0, 2.0],
             [-1.0, 3.0], [3.0, -1.0], [NAN, INF], [-INF, NAN], [TINY, -TINY]]
    return [torch.tensor([pair]) for pair in pairs]


def _float_inputs(rows: int, cols: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(31)
    plain = torch.randn(rows, cols, generator=generator) * 3
    out = [plain, -plain.abs() - 0.5, plain.abs() + 0.5]
    specials = torch.tensor([NAN, INF, -INF, -0.0, 0.0, FLT_MAX, -FLT_MAX, TINY, 1.0, -1.0, 0.5, -2.5])
    for shift in range(4):
        x = torch.randn(rows, cols, generator=generator) * 3
        flat = x.view(-1)
        picks = torch.randperm(flat.numel(), generator=generator)[: max(1, flat.numel() // 3)]
        flat[picks] = specials[(torch.arange(picks.numel()) + shift * 3) % specials.numel()]
        out.append(x)
    if cols > 1:
        edges = torch.randn(rows, cols, generator=generator)
        edges[0] = 2.0  # all equal
        edges[1] = NAN  # all NaN
        edges[2] = -INF  # all -inf
        edges[3, ::2] = 1.5  # ties
        out.append(edges)
        out.append(-edges.flip(0))
        mixed = plain.clone()
        mixed[:, 0] = torch.tensor([NAN, INF, -INF, FLT_MAX])[:rows]
        mixed[:, -1] = torch.tensor([-INF, NAN, -0.0, -FLT_MAX])[:rows]
        out.append(mixed)
    return out


def _int_inputs() -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(32)
    small = torch.randint(-20, 20, (4, 6), generator=generator)
    big = torch.tensor([2 ** 31, 2 ** 31 + 1, -(2 ** 31) - 1, 3_600_000_256, 2 ** 53 + 1, -(2 ** 53) - 3,
                        2 ** 62, -(2 ** 62), 0, 7, -7, 2 ** 33])
    out = [small, small.abs() + 1, -small.abs() - 1]
    for shift in range(3):
        x = torch.randint(-20, 20, (4, 6), generator=generator)
        flat = x.view(-1)
        picks = torch.randperm(24, generator=generator)[:10]
        flat[picks] = big[(torch.arange(10) + shift * 5) % big.numel()]
        out.append(x)
        out.append(-x.flip(0))
    ties = small.clone()
    ties[0] = 5
    ties[1] = 2 ** 40
    out.append(ties)
    return out


def _bool_inputs() -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(33)
    out = [torch.rand(4, 6, generator=generator) > 0.5 for _ in range(4)]
    return [*out, torch.ones(4, 6, dtype=torch.bool), torch.zeros(4, 6, dtype=torch.bool)]


#: the kinds whose inputs are floating: the float64 sweep runs them at float64
FLOATING_KINDS = frozenset({"float", "thin", "sums", "pair"})
DBL_MAX = torch.finfo(torch.float64).max
DBL_TINY = torch.finfo(torch.float64).tiny / 4  # subnormal


def _float64_inputs(kind: str) -> list[torch.Tensor]:
    """``kind``'s float32 inputs as float64, and one more with float64's own edges (±DBL_MAX and a
    float64 subnormal; not for ``sums``, whose sums must not overflow)."""
    out = [x.double() for x in inputs_of(kind)]
    if kind == "pair":
        pairs = [[DBL_MAX, INF], [-DBL_MAX, -INF], [DBL_TINY, -DBL_TINY], [-DBL_MAX, NAN], [-INF, -DBL_MAX]]
        return [*out, *(torch.tensor([pair], dtype=torch.float64) for pair in pairs)]
    edges = out[-1].clone().view(-1)
    extremes = [NAN, INF, -INF] if kind == "sums" else [DBL_MAX, -DBL_MAX, DBL_TINY, -DBL_TINY, NAN, INF]
    for i, value in enumerate(extremes):
        edges[(i * 5 + 1) % edges.numel()] = value
    return [*out, edges.view(out[-1].shape)]


def inputs_of(kind: str, dtype: torch.dtype = torch.float32) -> list[torch.Tensor]:
    """The edge-value inputs for an entry of ``kind``; ``dtype`` float64: its floating inputs at float64."""
    if dtype == torch.float64 and kind in FLOATING_KINDS:
        return _float64_inputs(kind)
    if kind == "float":
        return _float_inputs(4, 6)
    if kind == "thin":
        return _float_inputs(4, 1)
    if kind == "sums":  # no ±FLT_MAX: where sums overflow or cancel, the result depends on the order of the sum
        return [x.where(x.abs() != FLT_MAX, 7.0) for x in _float_inputs(4, 6)]
    if kind == "int":
        return _int_inputs()
    if kind == "pair":
        return _pair_inputs()
    return _bool_inputs()


__all__ = ["FLOATING_KINDS", "TABLE", "Entry", "inputs_of"]
