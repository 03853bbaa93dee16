"""``hcfg.shape_rules``: the direct rules give the op's own shape and dtype, reject
what the op rejects, and leave what they do not know to the op."""

from __future__ import annotations

import contextlib

import pytest
import sympy
import torch
import torch.nn as nn
import torch.nn.functional as F
from dycl.hcfg.shape_rules import ShapeRules
from dycl.hcfg.symbolic import SymbolicShapes, _Run


class MatMul(nn.Module):
    def __init__(self, other_shape) -> None:
        super().__init__()
        self.other = nn.Parameter(torch.randn(other_shape))

    def forward(self, x):
        return x @ self.other + torch.matmul(x, self.other) + x.matmul(self.other)


CASES = {
    "linear 2-d": (nn.Linear(5, 7), (3, 5)),
    "linear 3-d": (nn.Linear(5, 7), (2, 4, 5)),
    "linear 1-d": (nn.Linear(5, 7, bias=False), (5,)),
    "batch norm 2-d": (nn.BatchNorm2d(4), (2, 4, 6, 6)),
    "batch norm 1-d": (nn.BatchNorm1d(4), (3, 4)),
    "layer norm": (nn.LayerNorm(6), (2, 3, 6)),
    "layer norm 2 dims": (nn.LayerNorm((3, 6)), (2, 3, 6)),
    "layer norm without affine": (nn.LayerNorm(6, elementwise_affine=False), (4, 6)),
    "matmul 2-d": (MatMul((5, 3)), (4, 5)),
    "matmul batched": (MatMul((2, 5, 3)), (2, 4, 5)),
    "matmul broadcast": (MatMul((5, 3)), (2, 6, 4, 5)),
    "matmul broadcast ones": (MatMul((1, 5, 3)), (2, 4, 5)),
    "relu": (nn.ReLU(), (2, 3, 4)),
    "relu in place": (nn.ReLU(inplace=True), (3, 5)),
    "conv": (nn.Conv2d(3, 8, 3, padding=1), (2, 3, 9, 9)),
    "conv strided grouped": (nn.Conv2d(4, 8, (3, 2), stride=(2, 3), groups=2, bias=False), (1, 4, 10, 7)),
    "conv dilated": (nn.Conv2d(2, 5, 3, dilation=2, padding=(0, 2)), (3, 2, 11, 8)),
    "conv depthwise": (nn.Conv2d(6, 6, 5, stride=2, padding=2, groups=6), (4, 6, 13, 13)),
    "conv same": (nn.Conv2d(3, 4, 3, padding="same"), (2, 3, 6, 6)),  # a string padding: left to the op
    "conv reflect": (nn.Conv2d(3, 4, 3, padding=1, padding_mode="reflect"), (2, 3, 6, 6)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_rule_gives_the_ops_shape_and_dtype(case):
    module, shape = CASES[case]
    module.eval()
    x = torch.randn(shape)
    expected = module(x)
    with ShapeRules():
        got = module(x)
    assert got.shape == expected.shape and got.dtype == expected.dtype


@pytest.mark.parametrize("case", [name for name, (_, shape) in CASES.items() if len(shape) >= 2])
def test_rule_keeps_a_symbolic_batch_symbolic(case):
    module, shape = CASES[case]
    module.eval()
    shapes = SymbolicShapes()
    mirror = shapes.declare(torch.randn(shape), {0: "batch"})
    mirrors = []
    for rules in (contextlib.nullcontext(), ShapeRules()):
        run = _Run(shapes)
        x = run.materialize(mirror)
        with run.mode, rules:
            mirrors.append(run.canonical(module(x)))
    plain, ruled = mirrors
    assert ruled == plain
    # broadcasting against the weight's fixed batch of 2 pins it, in the op as in the rule
    assert isinstance(ruled.shape[0], sympy.Symbol) == (case != "matmul batched")


@pytest.mark.parametrize("dims", [{0: "batch"}, {0: "batch", 1: "channels"}, {0: "batch", 2: "height"}])
@pytest.mark.parametrize("case", [name for name in CASES if name.startswith(("conv", "relu"))])
def test_rule_pins_what_the_op_pins_and_guards_no_more(case, dims):
    """A dim the op's checks pin is pinned by the rule too; the rule adds no guard the
    op does not (the op may add more: conv's backend choice guards ``1 < batch < 16``,
    which does not change its output shape)."""
    module, shape = CASES[case]
    module.eval()
    shapes = SymbolicShapes()
    mirror = shapes.declare(torch.randn(shape), {axis: name for axis, name in dims.items() if axis < len(shape)})
    (plain, plain_pins, plain_guards), (ruled, ruled_pins, ruled_guards) = _without_and_with_rules(
        module, shapes, mirror)
    assert ruled == plain and ruled_pins == plain_pins
    assert ruled_guards <= plain_guards
    if "channels" in dims and case.startswith("conv"):
        assert sympy.Symbol("channels", integer=True, positive=True) in ruled_pins


def _without_and_with_rules(module, shapes, mirror):
    """(output mirror, pinned dims, guards) of one symbolic run of ``module`` by the ops'
    own shape functions and one with dycl's ``ShapeRules``."""
    runs = []
    for rules in (contextlib.nullcontext(), ShapeRules()):
        run = _Run(shapes)
        x = run.materialize(mirror)
        with run.mode, rules:
            out = run.canonical(module(x))
        to_ours = {created: symbol for symbol, created in run._to_env.items()}
        runs.append((out, run.pinned(), {str(guard.expr.xreplace(to_ours)) for guard in run.env.guards}))
    return runs


class Recurrent(nn.Module):
    """An LSTM cell stepped twice, its state started as zeros of the input's batch (as SkipNet's gate does)."""

    def __init__(self) -> None:
        super().__init__()
        self.cell = nn.LSTMCell(5, 7)

    def forward(self, x):
        state = (x.new_zeros(x.size(0), 7), x.new_zeros(x.size(0), 7))
        state = self.cell(x, state)
        return self.cell(x, state)[0] + self.cell(x)[1]


@pytest.mark.parametrize("dims", [{}, {0: "batch"}, {0: "batch", 1: "width"}])
def test_lstm_cell_rule_keeps_the_batch_and_pins_the_width(dims):
    """The op's own symbolic run pins the batch to its hint (``Eq(batch, 3)``), though the
    cell's output has the input's batch at every size (run for real below); the rule keeps
    it symbolic, and pins what the op checks: the input width."""
    module = Recurrent().eval()
    shapes = SymbolicShapes()
    mirror = shapes.declare(torch.randn(3, 5), dims)
    (plain, plain_pins, plain_guards), (ruled, ruled_pins, ruled_guards) = _without_and_with_rules(
        module, shapes, mirror)
    batch, width = (sympy.Symbol(name, integer=True, positive=True) for name in ("batch", "width"))
    assert plain.shape == (3, 7) and plain_pins.get(batch, 3) == 3
    assert ruled.shape == ((batch if batch in mirror.shape else 3), 7) and ruled_guards <= plain_guards
    assert ruled_pins == ({width: 5} if width in mirror.shape else {})
    for size in (1, 3, 8):
        x = torch.randn(size, 5)
        with ShapeRules():
            ruled_real = module(x)
        assert module(x).shape == ruled_real.shape == (size, 7)
    with pytest.raises(RuntimeError), ShapeRules():
        module.cell(torch.randn(3, 4))


def test_a_wrong_width_fails_as_the_op_fails():
    with pytest.raises(RuntimeError), ShapeRules():
        F.linear(torch.randn(2, 4), torch.randn(3, 5))
    with pytest.raises(RuntimeError), ShapeRules():
        nn.BatchNorm2d(3).eval()(torch.randn(1, 4, 2, 2))
    with pytest.raises(RuntimeError), ShapeRules():
        nn.LayerNorm(5)(torch.randn(2, 4))
    with pytest.raises(RuntimeError), ShapeRules():
        torch.matmul(torch.randn(2, 4, 5), torch.randn(3, 5, 2))
    with pytest.raises(RuntimeError), ShapeRules():
        nn.Conv2d(3, 4, 3)(torch.randn(1, 2, 5, 5))
    with pytest.raises(RuntimeError), ShapeRules():
        nn.Conv2d(3, 4, 7)(torch.randn(1, 3, 5, 5))  # no room for the kernel


def test_training_batch_norm_and_mixed_dtypes_are_left_to_the_op():
    bn = nn.BatchNorm1d(3).train()
    x = torch.randn(4, 3)
    with ShapeRules():
        out = bn(x)
    assert torch.allclose(out.mean(0), torch.zeros(3), atol=1e-5)  # the real op ran
    with ShapeRules():
        out = F.linear(torch.randn(2, 3, dtype=torch.float64), torch.randn(4, 3, dtype=torch.float64))
    assert out.dtype == torch.float64
    with pytest.raises(RuntimeError), ShapeRules():
        F.linear(torch.randn(2, 3), torch.randn(4, 3, dtype=torch.float64))


# -- views, elementwise ops, masks: each run by the op and by the rule on the same symbolic inputs --------------

BATCH, LENGTH = (sympy.Symbol(name, integer=True, positive=True) for name in ("batch", "length"))


def _inputs(shapes):
    """A float ``x`` (batch, length, 12), a bool mask (batch, length, 1), int64 tokens (batch,
    length), an int32 ``n`` (batch, 3) and a static float64 ``d`` (2, 7, 12)."""
    return {"x": shapes.declare(torch.randn(2, 7, 12), {0: "batch", 1: "length"}),
            "mask": shapes.declare(torch.ones(2, 7, 1, dtype=torch.bool), {0: "batch", 1: "length"}),
            "tokens": shapes.declare(torch.zeros(2, 7, dtype=torch.long), {0: "batch", 1: "length"}),
            "n": shapes.declare(torch.zeros(2, 3, dtype=torch.int32), {0: "batch"}),
            "d": shapes.declare(torch.randn(2, 7, 12, dtype=torch.float64), {})}


WEIGHT = torch.randn(10, 6)
TABLE = torch.randn(1, 20, 12)
#: name -> (statement on the inputs above, whether a rule answers it: False where it leaves it to the op)
OPS = {
    "view by sizes": (lambda x, **_: x.view(x.size(0), x.size(1), 3, 4), True),
    "view -1 recovers a dim": (lambda x, **_: x.view(x.size(0), -1, 3, 4), True),
    "view -1 static": (lambda x, **_: x.view(x.shape[0], x.shape[1], -1), True),
    "view -1 symbolic product": (lambda x, **_: x.view(x.size(0), -1), True),
    "view -1 of everything": (lambda x, **_: x.view(-1), True),
    "view -1 of a floor division": (lambda x, **_: x.view(x.size(0), 5, -1), False),
    "view to flatten": (lambda x, **_: x.transpose(1, 2).contiguous().view(x.size(0) * 12, -1), True),
    "view size-1 dims": (lambda x, **_: x.reshape(1, x.size(0), x.size(1), 1, 12), True),
    "view a tuple": (lambda x, **_: x.view((x.size(0), x.size(1) * 3, 4)), True),
    "view non-contiguous": (lambda x, **_: x.transpose(0, 1).reshape(x.size(1), -1), False),
    "view wrong count": (lambda x, **_: x.view(x.size(0), 5, 12), False),
    "torch.reshape": (lambda x, **_: torch.reshape(x, (x.size(0), x.size(1), 2, -1)), True),
    "transpose": (lambda x, **_: x.transpose(1, 2), True),
    "transpose negative": (lambda x, **_: torch.transpose(x, -1, 0), True),
    "permute": (lambda x, **_: x.permute(2, 0, 1), True),
    "permute list of a transposed": (lambda x, **_: x.transpose(0, 1).permute([1, 2, 0]), True),
    "unsqueeze": (lambda x, **_: x.unsqueeze(1), True),
    "unsqueeze last of a transposed": (lambda x, **_: x.transpose(0, 2).unsqueeze(-1), True),
    "contiguous of a transposed": (lambda x, **_: x.transpose(1, 2).contiguous(), True),
    "masked_fill": (lambda x, mask, **_: x.masked_fill(mask, -1e9), True),
    "masked_fill a broadcast row": (lambda x, mask, **_: x.masked_fill(mask[0, :, 0] == 0, 0), False),
    "masked_fill of a transposed": (lambda x, mask, **_: x.transpose(0, 1).masked_fill(mask.transpose(0, 1), 1.0),
                                    False),
    "masked_fill int value on ints": (lambda tokens, **_: tokens.masked_fill(tokens == 0, 5), True),
    "softmax": (lambda x, **_: F.softmax(x, dim=-1), True),
    "log_softmax method": (lambda x, **_: x.log_softmax(1), True),
    "softmax to float64": (lambda x, **_: x.softmax(-1, torch.float64), False),
    "embedding": (lambda tokens, **_: F.embedding(tokens, WEIGHT), True),
    "index first row": (lambda x, **_: x[0], True),
    "index last column": (lambda x, **_: x[:, :, -1], True),
    "index a static slice with a new axis": (lambda x, **_: x[:, None, :, 2:9:3], True),
    "index ellipsis": (lambda x, **_: x[..., 1, None], True),
    "index a symbolic dim by 1": (lambda x, **_: x[:, 1], False),
    "index a symbolic dim from the end": (lambda x, **_: x[-1], False),
    "index a symbolic dim by a slice": (lambda x, **_: x[:, 1:], False),
    "index a slice of a slice": (lambda x, **_: x[:, :, 3:][..., 1:5], True),
    "index out of range": (lambda x, **_: x[:, :, 12], False),
    "index by a mask": (lambda x, mask, **_: x[mask[..., 0]], False),
    "cat": (lambda x, **_: torch.cat([x, x * 2, x[:, :, :3].contiguous()], dim=-1), True),
    "cat along a symbolic dim": (lambda x, **_: torch.cat((x, x), 1), True),
    "cat of two dtypes": (lambda x, d, **_: torch.cat([x, d], 0), False),
    "cat of mismatched rows": (lambda x, **_: torch.cat([x, x[:, :3]], 2), False),
    "cat with numpy's axis": (lambda x, **_: torch.cat([x, x], axis=1), False),
    "stack": (lambda x, **_: torch.stack([x, x + 1], dim=2), True),
    "stack of mismatched": (lambda x, **_: torch.stack([x, x.transpose(0, 1)]), False),
    "flatten": (lambda x, **_: x.flatten(1), True),
    "flatten all": (lambda x, **_: torch.flatten(x), True),
    "flatten one dim": (lambda x, **_: x.flatten(1, 1), False),
    "flatten a transposed": (lambda x, **_: x.transpose(0, 1).flatten(1), False),
    "pool": (lambda x, **_: F.adaptive_avg_pool2d(x, (1, 5)), True),
    "pool keeping a dim": (lambda x, **_: F.adaptive_avg_pool2d(x.unsqueeze(1), (None, 2)), True),
    "pool channels last": (lambda x, **_: F.adaptive_avg_pool2d(x.unsqueeze(-1).transpose(1, 3), 1), False),
    "sigmoid": (lambda x, **_: torch.sigmoid(x), True),
    "sigmoid of ints": (lambda tokens, **_: tokens.sigmoid(), False),
    "tril": (lambda x, **_: x.tril(1), True),
    "triu of a transposed": (lambda x, **_: torch.triu(x.transpose(1, 2)), False),
    "float of ints": (lambda tokens, **_: tokens.float(), True),
    "float of floats": (lambda x, **_: x.float(), True),
    "add same shape": (lambda x, **_: x + x * 2, True),
    "scalar on the left": (lambda x, **_: 0.5 * x - 1, True),
    "divide": (lambda x, **_: x / 2, True),
    "divide ints": (lambda n, **_: n / 2, False),
    "int plus float": (lambda n, **_: n + 0.5, False),
    "int plus int": (lambda n, **_: n * 3 + 1, True),
    "mixed dtypes": (lambda x, d, **_: x + d, False),
    "broadcast of two dtypes": (lambda x, mask, **_: x * mask, False),
    "broadcast a row": (lambda x, **_: x - x[:1], True),
    "broadcast both ways": (lambda x, **_: x[:, :1].contiguous() * x[:1], True),
    "broadcast a static vector": (lambda x, **_: torch.ones(12) + x, True),
    "broadcast a slice of a constant": (lambda x, **_: x + TABLE[:, :1], True),  # a size-1 dim of stride 240
    "softmax of a slice of a constant": (lambda x, **_: TABLE[:, :1].softmax(-1), True),
    "contiguous of a slice of a constant": (lambda x, **_: TABLE[:, :1].contiguous(), True),
    "view of a slice of a constant": (lambda x, **_: TABLE[:, :1].view(12), False),
    "broadcast that pins": (lambda x, **_: x + x.new_ones(2, 7, 12), False),
    "broadcast a non-contiguous": (lambda x, **_: x + x[:, :1], False),
    "broadcast compare": (lambda x, **_: x > x[:, :, :1].contiguous(), True),
    "alpha": (lambda x, **_: torch.add(x, x, alpha=2), False),
    "compare": (lambda x, **_: x == 0, True),
    "compare bools with an int": (lambda mask, **_: mask == 0, True),
    "compare tensors of two dtypes": (lambda x, d, **_: x < d, False),
    "compare ints": (lambda tokens, **_: tokens.ne(0), True),
}


def _run_op(statement, shapes, mirrors, rules):
    """(output mirror, output strides, pinned dims, guards, rules answered) of one symbolic run, or the error type."""
    run = _Run(shapes)
    inputs = {name: run.materialize(mirror) for name, mirror in mirrors.items()}
    answered = []
    try:
        with run.mode, _counting(answered) if rules else contextlib.nullcontext():
            out = statement(**inputs)
        strides = tuple(run.expr(stride) for stride in out.stride())
        result = run.canonical(out)
    except (RuntimeError, IndexError, ValueError) as exc:  # the op's own error; a size with no example value
        return type(exc)
    to_ours = {created: symbol for symbol, created in run._to_env.items()}
    return result, strides, run.pinned(), {str(guard.expr.xreplace(to_ours)) for guard in run.env.guards}, answered


@contextlib.contextmanager
def _counting(answered):
    """``ShapeRules``, noting for every call of a func with a rule whether the rule answered it."""
    from dycl.hcfg import shape_rules

    rules = dict(shape_rules._RULES)

    def noting(rule):
        def wrapped(*args, **kwargs):
            answered.append(False)
            result = rule(*args, **kwargs)
            answered[-1] = result is not None
            return result
        return wrapped

    shape_rules._RULES.update({func: noting(rule) for func, rule in rules.items()})
    try:
        with ShapeRules():
            yield
    finally:
        shape_rules._RULES.clear()
        shape_rules._RULES.update(rules)


@pytest.mark.parametrize("case", list(OPS))
def test_rule_matches_the_op_on_symbolic_inputs(case):
    """Same shape (as expressions), strides, dtype and pins as the op, no guard the op does
    not add; the rule answers where it should and leaves the rest to the op."""
    statement, answers = OPS[case]
    shapes = SymbolicShapes()
    mirrors = _inputs(shapes)
    plain = _run_op(statement, shapes, mirrors, rules=False)
    ruled = _run_op(statement, shapes, mirrors, rules=True)
    if isinstance(plain, type):
        assert ruled is plain and not answers
        return
    (out, strides, pins, guards, _), (ruled_out, ruled_strides, ruled_pins, ruled_guards, answered) = plain, ruled
    assert ruled_out == out and ruled_strides == strides and ruled_pins == pins
    assert ruled_guards <= guards
    # the statement's last op is the one the case is about
    assert answered[-1] == answers


def test_outputs_of_one_shape_are_distinct_tensors():
    """Outputs of one shape wrap one meta tensor, each as a tensor of its own: changing one's metadata in place
    leaves the others alone."""
    shapes = SymbolicShapes()
    run = _Run(shapes)
    x = run.materialize(_inputs(shapes)["x"])
    with run.mode, ShapeRules():
        a, b = x + 1, x * 2
        a.unsqueeze_(0)
        c = x - 1
    assert a is not b and a.dim() == 4 and b.shape == x.shape == c.shape
    assert run.canonical(b).shape == (BATCH, LENGTH, 12)
