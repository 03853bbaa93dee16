"""Values computed from data that choose on the host (issue 26 items 1-2, issue 27): a module
picked by a data-dependent index or key, conditional expressions and chained comparisons on
tensors. Each compiles to one condition per outcome (``rewriter.choices``); the compiled model
agrees with eager in process and as a torch-free host on inputs that take every outcome."""

from __future__ import annotations

import enum
import inspect

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import dycl
from dycl.harness.host_agreement import assert_agrees_in_process_and_as_host
from dycl.harness.testing import assert_equivalent


def _inputs(count: int = 18, seed: int = 0, shape=(3, 8)) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=generator) * 0.5 + (i % 3 - 1) * 0.8 for i in range(count)]


def _check(model: nn.Module, inputs: list[torch.Tensor], choice, tmp_path) -> int:
    """Compile ``model`` on the first input, compare on all, in process and as a host; the
    number of distinct outcomes ``choice`` (the model's own decision, computed eagerly) takes."""
    assert_agrees_in_process_and_as_host(model, inputs, tmp_path, 1e-5)
    with torch.no_grad():
        return len({choice(x) for x in inputs})


class TopOneExperts(nn.Module):
    """Top-1 routing of a whole batch: the router's favourite expert runs."""

    def __init__(self, dim: int = 8, experts: int = 3) -> None:
        super().__init__()
        self.router = nn.Linear(dim, experts)
        self.experts = nn.ModuleList([nn.Sequential(nn.Linear(dim, dim), nn.GELU()) for _ in range(experts)])

    def chosen(self, x):
        return self.router(x).mean(0).argmax()

    def forward(self, x):
        idx = self.chosen(x)
        return self.experts[idx.item()](x)


def test_expert_chosen_by_item_of_argmax(tmp_path):
    torch.manual_seed(1)
    model = TopOneExperts()
    inputs = _inputs(24, seed=3)
    assert _check(model, inputs, lambda x: int(model.chosen(x)), tmp_path) >= 2


class SignHeads(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.heads = nn.ModuleList([nn.Linear(8, 4), nn.Linear(8, 4)])

    def forward(self, x):
        i = int(x.mean() > 0)
        return torch.softmax(self.heads[i](x), dim=-1)


def test_head_chosen_by_int_of_comparison(tmp_path):
    torch.manual_seed(2)
    assert _check(SignHeads(), _inputs(), lambda x: int(x.mean() > 0), tmp_path) == 2


class NamedHeads(nn.Module):
    """Heads as numbered attributes, looked up by name."""

    def __init__(self) -> None:
        super().__init__()
        for i in range(3):
            setattr(self, f"head{i}", nn.Linear(8, 8))
        self.norm = nn.LayerNorm(8)

    def forward(self, x):
        level = (x.abs().mean() > 0.6).long() + (x.mean() > 0.3).long()
        return self.norm(getattr(self, f"head{level}")(x))


def test_head_chosen_by_formatted_name(tmp_path):
    torch.manual_seed(3)
    model = NamedHeads()
    choice = lambda x: int((x.abs().mean() > 0.6).long() + (x.mean() > 0.3).long())  # noqa: E731
    assert _check(model, _inputs(), choice, tmp_path) >= 2


class PolarityHeads(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.heads = nn.ModuleDict({"pos": nn.Linear(8, 2), "neg": nn.Linear(8, 2)})
        self.scale = {"pos": 1.0, "neg": -2.0}

    def forward(self, x):
        key = "pos" if x.mean() > 0 else "neg"
        return self.heads[key](x) * self.scale[key]


def test_module_dict_keyed_by_conditional_expression(tmp_path):
    torch.manual_seed(4)
    assert _check(PolarityHeads(), _inputs(), lambda x: bool(x.mean() > 0), tmp_path) == 2


class Activations(nn.Module):
    """A plain dict of functions, keyed by a string chosen from the data."""

    ACTIVATIONS = {"relu": F.relu, "tanh": torch.tanh, "gelu": F.gelu}

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        h = self.fc(x)
        spread = h.std()
        name = "relu" if spread > 0.9 else "tanh" if spread > 0.5 else "gelu"
        return self.ACTIVATIONS[name](h)


def test_function_table_keyed_by_nested_conditional_expression(tmp_path):
    torch.manual_seed(5)
    model = Activations()
    inputs = [x * s for x, s in zip(_inputs(), [0.3, 1.0, 2.5] * 6)]

    def choice(x):
        spread = model.fc(x).std()
        return "relu" if spread > 0.9 else "tanh" if spread > 0.5 else "gelu"

    assert _check(model, inputs, choice, tmp_path) == 3


class ReturnsEitherBranch(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.small = nn.Linear(8, 8)
        self.large = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 8))

    def forward(self, x):
        return self.small(x) if x.norm() < 4.0 else self.large(x) + x


def test_return_of_conditional_expression(tmp_path):
    torch.manual_seed(6)
    inputs = [x * s for x, s in zip(_inputs(), [0.5, 3.0] * 9)]
    assert _check(ReturnsEitherBranch(), inputs, lambda x: bool(x.norm() < 4.0), tmp_path) == 2


class Band(nn.Module):
    """Chained comparisons on tensors, in an ``if`` and as a value."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        m = self.fc(x).mean()
        if -0.1 < m < 0.1:
            y = self.fc(x) * 2
        else:
            y = x
        inside = 0.0 <= x.mean() < 0.5
        return y + inside.float()


def test_chained_comparisons(tmp_path):
    torch.manual_seed(7)
    model = Band()

    def choice(x):
        m = model.fc(x).mean()
        return bool(-0.1 < m < 0.1), bool(0.0 <= x.mean() < 0.5)

    assert _check(model, _inputs(24), choice, tmp_path) == 4


class Buckets(nn.Module):
    """An index that eager may find out of range."""

    def __init__(self) -> None:
        super().__init__()
        self.heads = nn.ModuleList([nn.Linear(8, 8) for _ in range(2)])

    def forward(self, x):
        return self.heads[int(x.mean() * 2)](x)


def test_index_out_of_range_raises_like_eager():
    torch.manual_seed(8)
    model = Buckets().eval()
    inputs = [torch.full((2, 8), v) + torch.randn(2, 8) * 0.01 for v in (0.1, 0.7, -0.2)]
    compiled = dycl.compile(model, inputs[0])
    assert_equivalent(model, compiled, inputs, min_paths=1, atol=1e-5)
    assert len({int(x.mean() * 2) for x in inputs}) == 2
    too_far = torch.full((2, 8), 1.6)
    with pytest.raises(IndexError):
        model(too_far)
    with pytest.raises(Exception, match="index out of range"):
        compiled(too_far)


def energy(t):
    return t.pow(2).mean()


class BestCandidate(nn.Module):
    """Pick among candidate refinements by a score, with a named function and a method."""

    def __init__(self) -> None:
        super().__init__()
        self.refine = nn.ModuleList([nn.Linear(8, 8) for _ in range(3)])

    def margin(self, t):
        return t.max() - t.min()

    def forward(self, x):
        candidates = [self.refine[0](x), self.refine[1](x), self.refine[2](x), x]
        loudest = max(candidates, key=energy)
        calmest = min(candidates, key=self.margin)
        return loudest + calmest


def test_max_and_min_with_a_key_function(tmp_path):
    torch.manual_seed(9)
    model = BestCandidate()
    inputs = [x * s for x, s in zip(_inputs(), [0.2, 1.0, 3.0] * 6)]

    def choice(x):
        candidates = [layer(x) for layer in model.refine] + [x]
        energies = [float(energy(c)) for c in candidates]
        margins = [float(model.margin(c)) for c in candidates]
        return energies.index(max(energies)), margins.index(min(margins))

    assert _check(model, inputs, choice, tmp_path) >= 2


class Mode(enum.Enum):
    FAST = 0
    SLOW = 1


class MatchOnLevel(nn.Module):
    def forward(self, x):
        level = int(x.mean() > 0)
        match level:
            case 0:
                return x
            case _:
                return -x


class EnumFromData(nn.Module):
    def forward(self, x):
        mode = Mode(int(x.mean() > 0))
        return x + 1 if mode is Mode.FAST else x - 1


class ModeAndLayer(nn.Module):
    """An Enum member and a layer, each picked by a conditional expression on the data."""

    def __init__(self) -> None:
        super().__init__()
        self.wide = nn.Linear(8, 8)
        self.narrow = nn.Linear(8, 8)

    def forward(self, x):
        mode = Mode.FAST if x.mean() > 0 else Mode.SLOW
        layer = self.wide if x.std() > 1.0 else self.narrow
        if mode is Mode.FAST:
            return layer(x)
        return layer(x).tanh() * 2


def test_enum_members_and_layers_chosen_by_data(tmp_path):
    torch.manual_seed(13)
    inputs = [x * s for x, s in zip(_inputs(), [0.4, 2.0] * 9)]
    assert _check(EnumFromData(), inputs, lambda x: int(x.mean() > 0), tmp_path) == 2
    model = ModeAndLayer()
    assert _check(model, inputs, lambda x: (bool(x.mean() > 0), bool(x.std() > 1.0)), tmp_path / "b") == 4


def test_match_on_a_number_from_data_compiles(tmp_path):
    """Once refused; ``match`` on values is now an if chain (``rewriter.match_statements``)."""
    torch.manual_seed(13)
    inputs = [x * s for x, s in zip(_inputs(), [0.4, 2.0] * 9)]
    assert _check(MatchOnLevel(), inputs, lambda x: int(x.mean() > 0), tmp_path) == 2


class BestByLambda(nn.Module):
    """``max``/``min`` with a lambda key (issue 27): the lambda's body is applied to each item."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        best = max([self.fc(x), torch.tanh(x), x * 0.5], key=lambda t: t.sum())
        flip = min((x, -x), key=lambda t: float(t.mean()))
        return best + flip


def test_max_and_min_with_a_lambda_key(tmp_path):
    torch.manual_seed(13)
    model = BestByLambda().eval()
    inputs = [x * s for x, s in zip(_inputs(), [0.4, -2.0, 1.0] * 6)]

    def choice(x):
        with torch.no_grad():
            sums = [t.sum() for t in (model.fc(x), torch.tanh(x), x * 0.5)]
        return int(torch.stack(sums).argmax()), bool(-x.mean() < x.mean())

    assert _check(model, inputs, choice, tmp_path) >= 3


def test_a_lambda_key_over_a_sequence_of_unknown_length_is_refused():
    class Unknown(nn.Module):
        def forward(self, x):
            return max(list(x.unbind(0)), key=lambda t: t.sum())  # MARK

    with pytest.raises(dycl.UnsupportedError, match="a lambda") as refused:
        dycl.compile(Unknown().eval(), torch.randn(3, 4))
    lines, first = inspect.getsourcelines(Unknown)
    assert refused.value.location.line == first + next(i for i, t in enumerate(lines) if "# MARK" in t)


class HeadsAndHeadN(nn.Module):
    """``heads`` (a list) beside ``head0``/``head1``: ``f"head{int(...)}"`` prints digits, so it
    cannot name ``heads`` (before: ``heads`` was a member too, and its branch was refused)."""

    def __init__(self) -> None:
        super().__init__()
        self.heads = nn.ModuleList([nn.Linear(8, 8), nn.Tanh()])
        self.head0 = nn.Linear(8, 8)
        self.head1 = nn.Tanh()

    def forward(self, x):
        x = getattr(self, f"head{int(x.sum() > 0)}")(x)
        return self.heads[0](x)


def test_an_f_string_of_an_int_names_only_the_attributes_it_can_print(tmp_path):
    torch.manual_seed(13)
    inputs = [x * s for x, s in zip(_inputs(), [0.4, -2.0] * 9)]
    assert _check(HeadsAndHeadN(), inputs, lambda x: int(x.sum() > 0), tmp_path) == 2


class AdaptiveActivation(nn.Module):
    """A string chosen from the data names the function to call, and an interpolation mode."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(2, 2, 3, padding=1)

    def forward(self, x):
        h = self.conv(x)
        act = "relu" if h.mean() > 0 else "tanh"
        h = getattr(torch, act)(h)
        mode = "nearest" if x.std() > 1.0 else "bilinear"
        return F.interpolate(h, scale_factor=2, mode=mode)


def test_strings_chosen_by_data_name_functions_and_modes(tmp_path):
    torch.manual_seed(10)
    model = AdaptiveActivation()
    generator = torch.Generator().manual_seed(11)
    inputs = [torch.randn(1, 2, 4, 4, generator=generator) * s + m
              for s, m in [(0.5, 0.0), (2.0, 0.5), (0.5, -1.0), (2.0, -1.5), (0.7, 1.0), (1.8, 0.0)] * 2]

    def choice(x):
        return bool(model.conv(x).mean() > 0), bool(x.std() > 1.0)

    assert _check(model, inputs, choice, tmp_path) >= 3


class RoutedBlock(nn.Module):
    """The chosen expert bound to a name, called twice; the head looked up by name, then called."""

    def __init__(self) -> None:
        super().__init__()
        self.experts = nn.ModuleList([nn.Linear(8, 8) for _ in range(3)])
        self.head_low = nn.Linear(8, 4)
        self.head_high = nn.Linear(8, 4)

    def forward(self, x):
        expert_id = int(x.abs().sum() * 10) % len(self.experts)
        expert = self.experts[expert_id]
        h = expert(x)
        h = h + expert(torch.relu(h))
        level = "high" if h.std() > 0.5 else "low"
        head = getattr(self, f"head_{level}")
        return head(h)


def test_chosen_members_bound_to_names(tmp_path):
    torch.manual_seed(12)
    model = RoutedBlock()
    inputs = [x * s for x, s in zip(_inputs(), [0.3, 1.0, 3.0] * 6)]

    def choice(x):
        h = model.experts[int(x.abs().sum() * 10) % 3](x)
        h = h + model.experts[int(x.abs().sum() * 10) % 3](torch.relu(h))
        return int(x.abs().sum() * 10) % 3, bool(h.std() > 0.5)

    assert _check(model, inputs, choice, tmp_path) >= 4


class FirstBlocks(nn.Module):
    """Run as many blocks as the data asks for: torch's ``Sequential.__getitem__`` reads the count."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.Sequential(*[nn.Linear(8, 8) for _ in range(3)])

    def forward(self, x):
        depth = int(x.abs().mean() * 3) % 3 + 1
        return self.blocks[:depth](x)


class SumOfColumns(nn.Module):
    def forward(self, x):
        count = int(x.abs().mean() * 3) % 3 + 1
        return sum(x[:, i] for i in range(count))


@pytest.mark.parametrize("model", [FirstBlocks(), SumOfColumns()])
def test_a_number_from_data_read_inside_torch_or_a_generator_is_refused_at_the_user_line(model):
    line = inspect.getsourcelines(type(model).forward)[1] + 2
    with pytest.raises(dycl.UnsupportedError, match="number computed from the inputs' data") as refused:
        dycl.compile(model.eval(), torch.randn(2, 8))
    assert refused.value.location == dycl.rewriter.SourceLocation(__file__, line)


def test_the_decision_recorder_follows_a_value_from_data_into_torch():
    from dycl.hcfg.decisions import DecisionRecorder

    heads = nn.ModuleList([nn.Identity(), nn.Identity()])
    index, shape_source = torch.tensor(1), torch.ones(2, 3)
    with DecisionRecorder(inside_torch=False, sources=[index, shape_source]) as recorder:
        heads[index + 0]                       # operator.index inside ModuleList.__getitem__, on a derived value
        f"{index}"                             # Tensor.__format__ reads .item()
        range(shape_source.size(0))            # a shape: not a value from data
        torch.ones(3)[0].item()                # not from the sources: torch's own values are not followed
    reads = [(d.what, d.from_data, d.where.line if d.where else None) for d in recorder.decisions]
    first = inspect.currentframe().f_lineno - 5
    # the last read is recorded as it always was (made by user code), not as a value from data
    assert reads == [("an index (range(), list index, shape argument)", True, first),
                     ("format() (an f-string)", True, first + 1), (".item()", False, first + 3)]
