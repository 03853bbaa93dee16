"""Golden before/after snippets: what each pass makes of a small forward()."""

from __future__ import annotations

import libcst as cst
import torch
import torch.nn as nn
from dycl.rewriter.asserts import Asserts
from dycl.rewriter.constprop import ConstantPropagation
from dycl.rewriter.inline import Inline
from dycl.rewriter.normalize import Normalize
from dycl.rewriter.structure import Structure
from dycl.rewriter.unroll import Unroll

from dycl import rewriter
from dycl.harness.testing import assert_equivalent
from tests.rewriter.golden import after, golden


class EarlyExit(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])
        self.exits = nn.ModuleList([nn.Linear(4, 2) for _ in range(3)])
        self.threshold = 0.9

    def forward(self, x):
        for i in range(len(self.blocks)):
            x = self.blocks[i](x)
            out = self.exits[i](x)
            if out.softmax(-1).max() > self.threshold:
                return out, i
        return out, -1


def test_unroll_binds_the_loop_variable_per_iteration():
    assert after(EarlyExit(), "unroll") == golden("""
        i = 0
        x = self.blocks[i](x)
        out = self.exits[i](x)
        if out.softmax(-1).max() > self.threshold:
            return out, i
        i = 1
        x = self.blocks[i](x)
        out = self.exits[i](x)
        if out.softmax(-1).max() > self.threshold:
            return out, i
        i = 2
        x = self.blocks[i](x)
        out = self.exits[i](x)
        if out.softmax(-1).max() > self.threshold:
            return out, i
        return out, -1
    """)


def test_constprop_substitutes_loop_variables_and_config():
    assert after(EarlyExit(), "constprop") == golden("""
        x = self.blocks[0](x)
        out = self.exits[0](x)
        if out.softmax(-1).max() > 0.9:
            return out, 0
        x = self.blocks[1](x)
        out = self.exits[1](x)
        if out.softmax(-1).max() > 0.9:
            return out, 1
        x = self.blocks[2](x)
        out = self.exits[2](x)
        if out.softmax(-1).max() > 0.9:
            return out, 2
        return out, -1
    """)


def test_structure_keeps_early_returns_as_guard_clauses():
    source = rewriter.rewrite(EarlyExit()).plain_source
    assert source == golden("""
        def forward(self, x):
            x = self.blocks[0](x)
            out = self.exits[0](x)
            if out.softmax(-1).max() > 0.9:
                return out, 0
            x = self.blocks[1](x)
            out = self.exits[1](x)
            if out.softmax(-1).max() > 0.9:
                return out, 1
            x = self.blocks[2](x)
            out = self.exits[2](x)
            if out.softmax(-1).max() > 0.9:
                return out, 2
            return out, -1
    """)


class GreedyDecoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.GRUCell(4, 4)
        self.max_len = 3
        self.end = 0

    def forward(self, h):
        tokens = []
        step = 0
        while step < self.max_len:
            h = self.cell(h, h)
            token = h.argmax(-1)
            tokens.append(token)
            if token.item() == self.end:
                break
            step += 1
        return torch.stack(tokens), len(tokens)


def test_unroll_turns_break_into_else_branches():
    assert after(GreedyDecoder(), "unroll") == golden("""
        tokens = []
        step = 0
        h = self.cell(h, h)
        token = h.argmax(-1)
        tokens.append(token)
        if token.item() == self.end:
            pass
        else:
            step += 1
            h = self.cell(h, h)
            token = h.argmax(-1)
            tokens.append(token)
            if token.item() == self.end:
                pass
            else:
                step += 1
                h = self.cell(h, h)
                token = h.argmax(-1)
                tokens.append(token)
                if token.item() == self.end:
                    pass
                else:
                    step += 1
        return torch.stack(tokens), len(tokens)
    """)


def test_final_decoder_drops_the_counter_and_the_empty_last_test():
    assert rewriter.rewrite(GreedyDecoder()).plain_source == golden("""
        def forward(self, h):
            tokens = []
            h = self.cell(h, h)
            token = h.argmax(-1)
            tokens.append(token)
            if token.item() == 0:
                pass
            else:
                h = self.cell(h, h)
                token = h.argmax(-1)
                tokens.append(token)
                if token.item() == 0:
                    pass
                else:
                    h = self.cell(h, h)
                    token = h.argmax(-1)
                    tokens.append(token)
            return torch.stack(tokens), len(tokens)
    """)


class ElifChain(nn.Module):
    def forward(self, x):
        s = x.sum()
        if s > 1:
            y = x * 2
        elif s > 0:
            y = x * 3
        else:
            y = -x
        return y


def test_elif_becomes_nested_else():
    assert rewriter.rewrite(ElifChain()).plain_source == golden("""
        def forward(self, x):
            s = x.sum()
            if s > 1:
                y = x * 2
            else:
                if s > 0:
                    y = x * 3
                else:
                    y = -x
            return y
    """)


class Gate(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 1)

    def forward(self, x):
        if torch.sigmoid(self.fc(x)).item() > 0.5:
            return x * 2, 1
        return x, 0


class PaperSkipNet(nn.Module):
    """The paper's Listing 3, with a gate submodule that is inlined."""

    def __init__(self):
        super().__init__()
        self.num_layers = [2, 1]
        self.attr_layers = nn.ModuleDict()
        for g in range(2):
            for i in range(self.num_layers[g] + 1):
                self.attr_layers["group{}_layer{}".format(g + 1, i)] = nn.Linear(4, 4)  # noqa: UP032
        self.attr_layers["group2_ds0"] = nn.Linear(4, 4)
        self.gate = Gate()

    def forward(self, x):
        cnt = 0
        prev = x
        for g in range(2):
            for i in range(self.num_layers[g]):
                if g == 0 and i < self.num_layers[g] - 1:
                    i = i + 1
                name = "group{}_ds{}".format(g + 1, i)  # noqa: UP032
                if name in self.attr_layers:
                    model = self.attr_layers[name]
                    prev = model(prev)
                prev, mask = self.gate(prev)
                if mask == 0:
                    x = prev
                else:
                    ly_name = "group{}_layer{}".format(g + 1, i)  # noqa: UP032
                    layer = self.attr_layers[ly_name]
                    x = layer(x)
                    cnt = cnt + 1
                prev = x
        return x, cnt


def test_paper_listing_static_lookups_fold_and_gate_is_inlined():
    assert rewriter.rewrite(PaperSkipNet()).plain_source == golden("""
        def forward(self, x):
            prev = x
            if torch.sigmoid(self.gate.fc(prev)).item() > 0.5:
                prev, mask = prev * 2, 1
            else:
                prev, mask = prev, 0
            if mask == 0:
                x = prev
                cnt = 0
            else:
                x = self.attr_layers['group1_layer1'](x)
                cnt = 1
            prev = x
            if torch.sigmoid(self.gate.fc(prev)).item() > 0.5:
                prev, mask = prev * 2, 1
            else:
                prev, mask = prev, 0
            if mask == 0:
                x = prev
            else:
                x = self.attr_layers['group1_layer1'](x)
                cnt = cnt + 1
            prev = x
            prev = self.attr_layers['group2_ds0'](prev)
            if torch.sigmoid(self.gate.fc(prev)).item() > 0.5:
                prev, mask = prev * 2, 1
            else:
                prev, mask = prev, 0
            if mask == 0:
                x = prev
            else:
                x = self.attr_layers['group2_layer0'](x)
                cnt = cnt + 1
            prev = x
            return x, cnt
    """)


def test_every_statement_carries_its_user_line():
    source = rewriter.rewrite(EarlyExit()).source
    body_lines = [line for line in source.splitlines()[1:] if line.strip() not in ("else:",)]
    assert all("# test_golden.py:" in line for line in body_lines), source


class NoGradDocstring(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        """A docstring the rewriter drops."""
        with torch.no_grad():
            y = self.fc(x)  # a comment the rewriter drops
            if y.sum() > 0: y = -y  # noqa: E701 (one-line suites are split)
        return y


def test_normalize_splices_no_grad_and_drops_docstrings_and_comments():
    assert after(NoGradDocstring(), "normalize") == golden("""
        y = self.fc(x)
        if y.sum() > 0:
            y = -y
        return y
    """)


class NestedBreak(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
            if x.sum() > 0:
                if x.max() > 2.0:
                    break
                x = x * 0.5
            else:
                x = -x
        return x


def test_break_under_nested_if_uses_a_flag_instead_of_copies():
    assert rewriter.rewrite(NestedBreak()).plain_source == golden("""
        def forward(self, x):
            x = self.layers[0](x)
            if x.sum() > 0:
                if x.max() > 2.0:
                    stopped_1 = True
                else:
                    x = x * 0.5
                    stopped_1 = False
            else:
                x = -x
                stopped_1 = False
            if not stopped_1:
                x = self.layers[1](x)
                if x.sum() > 0:
                    if x.max() > 2.0:
                        stopped = True
                    else:
                        x = x * 0.5
                        stopped = False
                else:
                    x = -x
                    stopped = False
                if not stopped:
                    x = self.layers[2](x)
                    if x.sum() > 0:
                        if x.max() > 2.0:
                            pass
                        else:
                            x = x * 0.5
                    else:
                        x = -x
            return x
    """)


class AccumulateFeatures(nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])

    def forward(self, x):
        acc = [torch.zeros_like(x), torch.zeros_like(x)]
        for i in range(2):
            acc[i] += self.heads[i](x)
        return acc


def test_constprop_folds_the_index_of_a_write_target_not_the_target():
    assert after(AccumulateFeatures(), "constprop") == golden("""
        acc = [torch.zeros_like(x), torch.zeros_like(x)]
        acc[0] += self.heads[0](x)
        acc[1] += self.heads[1](x)
        return acc
    """)


class ConfigThroughMethods(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        cfg = {"scale": 1.0}
        cfg.update(scale=2.0)
        extra = cfg.setdefault("shift", 0.5)
        outs = []
        keep = outs
        keep.append(self.fc(x) * cfg["scale"] + extra)
        return outs


def test_constprop_folds_a_dict_changed_by_methods_and_names_a_list_one_way():
    assert after(ConfigThroughMethods(), "constprop") == golden("""
        outs = []
        outs.append(self.fc(x) * 2.0 + 0.5)
        return outs
    """)


class NestedExitHelper(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])
        self.exits = nn.ModuleList([nn.Linear(4, 2) for _ in range(2)])

    def forward(self, x):
        out, i = self.early_exit(x)
        return out * 2, i

    def early_exit(self, x):
        for i in range(len(self.blocks)):
            x = self.blocks[i](x)
            if x.mean() > 0:
                out = self.exits[i](x)
                if out.max() > 1:
                    return out, i
        return self.exits[-1](x), -1


def test_structure_guards_the_rest_of_an_inlined_body_with_a_flag_after_a_nested_return():
    # copying the rest into both paths that fall through `if x.mean() > 0:` would
    # double it per block; instead the inlined body gets one exit, and the rest runs once
    result = rewriter.rewrite(NestedExitHelper(), debug=True)
    sources = [src for name, qualname, src in result.trace
               if name == "structure" and qualname == "NestedExitHelper.early_exit"]
    assert result.locations.strip(sources[-1]).strip() + "\n" == golden("""
        x_1 = receiver.blocks[0](x_1)
        returned = False
        result = None
        if x_1.mean() > 0:
            out_1 = receiver.exits[0](x_1)
            if out_1.max() > 1:
                result = out_1, 0
                returned = True
        if not returned:
            x_1 = receiver.blocks[1](x_1)
            if x_1.mean() > 0:
                out_1 = receiver.exits[1](x_1)
                if out_1.max() > 1:
                    result = out_1, 1
                    returned = True
                else:
                    result = receiver.exits[1](x_1), -1
                    returned = True
            else:
                result = receiver.exits[1](x_1), -1
                returned = True
        return result
    """)


# -- every pass alone -------------------------------------------------------------------------------
# Each pass runs by itself on a before-snippet (``rewrite(..., passes=(Pass,))``); the result is
# still the model's function, so it is also run eagerly against the model on inputs taking
# several paths.


def alone(model: nn.Module, pass_: type, inputs: list, paths: int) -> str:
    """The plain source after running only ``pass_`` on ``model.forward``, checked
    against eager execution on ``inputs`` (which must take exactly ``paths`` paths)."""
    result = rewriter.rewrite(model, passes=(pass_,), debug=True)
    root = f"{type(model).__qualname__}.forward"
    assert [name for name, qualname, _ in result.trace if qualname == root] == [pass_.name]
    assert assert_equivalent(model, result.bind(model), inputs, min_paths=paths) == paths
    return result.plain_source


def seeded(cls: type, seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return cls().eval()


def signed_inputs(count: int = 12) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return [torch.randn(2, 4, generator=generator) * 3 for _ in range(count)]


class InferenceLoop(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])

    def forward(self, x):
        '''Runs each layer without autograd.'''
        for layer in self.layers:
            with torch.inference_mode():
                x = layer(x)
        if x.sum() > 0:
            with torch.no_grad():
                x = -x
        return x


def test_normalize_alone_splices_with_bodies_inside_loops_and_ifs():
    assert alone(seeded(InferenceLoop), Normalize, signed_inputs(), paths=2) == golden("""
        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            if x.sum() > 0:
                x = -x
            return x
    """)


class SkipOne(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])
        self.skip = 1

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            if i == self.skip:
                continue
            x = layer(x)
            if x.sum() > 0:
                break
        return x


def test_unroll_alone_keeps_static_tests_for_constprop_and_flags_a_nested_break():
    assert alone(seeded(SkipOne, seed=1), Unroll, signed_inputs(40), paths=3) == golden("""
        def forward(self, x):
            i = 0
            layer = self.layers[0]
            stopped = False
            if i == self.skip:
                pass
            else:
                x = layer(x)
                if x.sum() > 0:
                    stopped = True
            if not stopped:
                i = 1
                layer = self.layers[1]
                if i == self.skip:
                    pass
                i = 2
                layer = self.layers[2]
                if i == self.skip:
                    pass
                else:
                    x = layer(x)
                    if x.sum() > 0:
                        pass
            return x
    """)


class Router(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def route(self, h):
        if h.sum() > 0:
            return self.fc(h)
        return -h

    def forward(self, x):
        y = self.route(x) + 1
        return y * 2


def test_inline_alone_hoists_a_nested_call_and_splices_the_structured_callee():
    assert alone(seeded(Router), Inline, signed_inputs(), paths=2) == golden("""
        def forward(self, x):
            if x.sum() > 0:
                out = self.fc(x)
            else:
                out = -x
            y = out + 1
            return y * 2
    """)


class Configured(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = 2.0
        self.mode = "relu"

    def forward(self, x):
        k = self.scale * 2
        if self.mode == "relu":
            x = torch.relu(x) * k
        else:
            x = torch.tanh(x)
        if x[0, 0] > k:
            x = x - k
        return x


def test_constprop_alone_folds_config_and_drops_the_static_if():
    assert alone(seeded(Configured), ConstantPropagation, signed_inputs(), paths=2) == golden("""
        def forward(self, x):
            x = torch.relu(x) * 4.0
            if x[0, 0] > 4.0:
                x = x - 4.0
            return x
    """)


class GuardsAndDeadCode(nn.Module):
    def forward(self, x):
        s = x.sum()
        if s > 10:
            pass
        if s > 1:
            return x
        elif s > -1:
            return -x
        return x * 2
        x = x + 1  # unreachable


def test_structure_alone_nests_elif_and_drops_empty_ifs_and_dead_code():
    assert alone(seeded(GuardsAndDeadCode), Structure, signed_inputs(40), paths=4) == golden("""
        def forward(self, x):
            s = x.sum()
            if s > 1:
                return x
            else:
                if s > -1:
                    return -x
            return x * 2
    """)


class CheckedScale(nn.Module):
    def forward(self, x):
        assert x.dim() == 2, f"expected a matrix, got {x.dim()} dims"
        y = x * 2; assert y.shape[0] > 0  # noqa: E702 - one line of two statements is split
        if y.sum() > 0:
            assert x.isfinite().all()
            return y
        return -y


def test_asserts_alone_become_ifs_that_raise_and_keep_their_lines():
    assert alone(seeded(CheckedScale), Asserts, signed_inputs(12), paths=2) == golden("""
        def forward(self, x):
            if not (x.dim() == 2):
                raise AssertionError(f"expected a matrix, got {x.dim()} dims")
            y = x * 2
            if not (y.shape[0] > 0):
                raise AssertionError()
            if y.sum() > 0:
                if not (x.isfinite().all()):
                    raise AssertionError()
                return y
            return -y
    """)


def test_the_pipeline_runs_its_passes_in_order_and_traces_each_by_name():
    from dycl.rewriter.pipeline import PIPELINE

    names = [pass_.name for pass_ in PIPELINE]
    assert names == ["normalize", "asserts", "unroll", "choices", "super", "inline", "constprop", "dict_displays",
                     "structure"]
    assert all(pass_.description for pass_ in PIPELINE)
    result = rewriter.rewrite(EarlyExit(), debug=True)
    assert [name for name, qualname, _ in result.trace if qualname == "EarlyExit.forward"] == names


def test_a_new_flow_aware_pass_plugs_into_the_pipeline_and_sees_the_static_facts():
    from dycl.rewriter.passes import FlowWalker
    from dycl.rewriter.pipeline import PIPELINE

    tests: list[tuple[str, bool]] = []

    class RecordIfs(FlowWalker):
        name = "record_ifs"
        description = "record each reachable if's test and whether it is static (changes nothing)"

        def branch(self, stmt, env):
            tests.append((cst.Module([]).code_for_node(stmt.test), self.flow.evaluate(stmt.test, env) is not None))
            return super().branch(stmt, env)

    passes = (*PIPELINE[:3], RecordIfs, *PIPELINE[3:])
    model = seeded(SkipOne, seed=1)
    result = rewriter.rewrite(model, passes=passes, debug=True)
    assert [name for name, qualname, _ in result.trace if qualname == "SkipOne.forward"] == [
        "normalize", "asserts", "unroll", "record_ifs", "choices", "super", "inline", "constprop", "dict_displays",
        "structure"]
    # iteration 1 is skipped statically: its body's test is never reached
    assert tests == [("i == self.skip", True), ("x.sum() > 0", False), ("not stopped", False),
                     ("i == self.skip", True), ("i == self.skip", True), ("x.sum() > 0", False)]
    assert result.plain_source == rewriter.rewrite(model).plain_source
