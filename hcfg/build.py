"""Algorithm 1: from a rewritten function to its HCFG.

The rewritten function is explored on the example input, taking both
branches of every ``if`` (see ``hcfg.state``), so that the type of every value
is known where it is used. Each statement is then placed:

- an assignment whose value is a tensor computation goes to a sub-DNN;
- anything else is host bookkeeping; tensor computations inside it (the tensor
  part of an ``if`` test, of a ``return`` value, of ``outs.append(self.head(x))``)
  are first hoisted into fresh variables computed by the preceding sub-DNN, so
  the host only moves references, converts scalars (``.item()``) and branches
  on Python or 0-d boolean values.

Consecutive tensor statements form one ``SubDNN``.

The walk keeps what it observed (``Built``): the values each sub-DNN wrote on
its first path (constant outputs for ``hcfg.optimize``) and each tensor
statement's run (``hcfg.observations``, reused by the explore walk of
``hcfg.trace``), so that the model's tensor code runs once per path in all.
A statement's value that placing it needed (``evaluate``) is bound, not computed
again, when the statement runs on that same state.
"""

from __future__ import annotations

import builtins
import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import libcst as cst
import torch
from dycl.hcfg.aliasing import (
    argument_layouts,
    check_argument_layouts,
    check_inplace_aliasing,
    check_item_write_target,
    check_out_arguments,
    check_seen_updates,
    check_view_updates,
    tensor_versions,
    updated_in_place,
    written_tensor_names,
)
from dycl.hcfg.annotate import annotate
from dycl.hcfg.decisions import DecisionRecorder
from dycl.hcfg.graph import HCFG, Cond, HostOp, Node, Return, SubDNN
from dycl.hcfg.host_comprehensions import (
    as_tensor_list,
    foreign_use,
    host_form,
    iterates_tensors,
    loop_names,
    reads_data,
    rows_iterable,
)
from dycl.hcfg.host_reads import split_expression_reads, split_host_reads
from dycl.hcfg.interpreter import Paths
from dycl.hcfg.levers import ALL_ON, Levers
from dycl.hcfg.liveness import live_after_ifs
from dycl.hcfg.observations import Observations
from dycl.hcfg.portable import portable_metadata
from dycl.hcfg.pycode import compile_expression, compile_statements
from dycl.hcfg.state import PathFlags, PathState, State
from dycl.hcfg.state_key_reads import missing_key
from dycl.hcfg.state_objects import holds_tensor, is_state_object
from dycl.hcfg.static_host_values import folded_host_value
from dycl.hcfg.trace import Examples
from dycl.hcfg.traced_lengths import traced_lengths
from dycl.hcfg.traced_statics import belongs_with_tensors
from dycl.hcfg.type_tests import decided_type_test
from dycl.rewriter import RewrittenFunction, UnsupportedError
from dycl.rewriter.exits import always_exits
from dycl.rewriter.flow import else_body
from dycl.rewriter.locations import comment_of, set_location
from dycl.rewriter.names import Namespace
from dycl.rewriter.vocabulary import (
    CONTAINER_MUTATORS,
    TENSOR_SHAPE_ATTRIBUTES,
    TENSOR_SHAPE_METHODS,
    TENSOR_TYPE_ATTRIBUTES,
)
from dycl.rewriter.walk import bound_names, descendants, map_children, read_names

_MUTATING = CONTAINER_MUTATORS


# Packing values into a tuple or list is host work; the elements are looked at one by one.
_DISPLAYS = (cst.Tuple, cst.List)
_METADATA = TENSOR_SHAPE_ATTRIBUTES | TENSOR_SHAPE_METHODS | TENSOR_TYPE_ATTRIBUTES
_CONVERSIONS = {"int", "float", "bool"}
_CONVERSION_METHODS = {"item", "tolist"}
_CONVERSION_WORDS = frozenset(_CONVERSIONS | _CONVERSION_METHODS)


def is_tensor_value(value: Any) -> bool:
    if isinstance(value, torch.Tensor):
        return True
    if isinstance(value, dict):  # a helper's dict of features: compiled, and returned as a structure (hcfg.ports)
        return bool(value) and all(is_tensor_value(v) for v in value.values())
    if is_state_object(value):  # a KV cache: carried as a record of its attributes (hcfg.state_objects)
        return holds_tensor(value)
    return isinstance(value, (tuple, list)) and bool(value) and all(is_tensor_value(v) for v in value)


class _Unknown:
    """The value of an expression we chose not to evaluate."""


class HCFGBuilder:
    """Builds the HCFG of ``rewritten`` for ``model`` on ``example_args``."""

    def __init__(self, rewritten: RewrittenFunction, model: torch.nn.Module, example_args: tuple,
                 levers: Levers = ALL_ON) -> None:
        self.rewritten = rewritten
        self.levers = levers
        self.definition = rewritten.definition
        self.locals = set(bound_names(self.definition))
        # the builder's own single-use temporaries (hoisted tensor expressions); read once, right after
        self.temporaries: set[str] = set()
        self.namespace = Namespace()
        for node in descendants(self.definition):
            if isinstance(node, cst.Name):
                self.namespace.reserve(node.value)
        self.self_name = self.definition.params.params[0].name.value
        self.locals.discard(self.self_name)  # the model: a constant of every sub-DNN, not a variable
        self.globals = {"__builtins__": builtins, **rewritten.globals}
        bound = rewritten.signature.bind(model, *example_args)
        bound.apply_defaults()
        self.initial: State = {**self.globals, **bound.arguments}
        self.parameters = tuple(list(rewritten.signature.parameters)[1:])
        # what the caller passed: it keeps these tensors whatever forward rebinds (hcfg.aliasing); module
        # state threaded as parameters after them (rewriter.state_threading) is the model's, not the caller's
        passed = self.parameters[:len(rewritten.inputs)]
        self.arguments = {name: bound.arguments[name] for name in passed if name in bound.arguments}
        # fork/split/merge at each ``if``, as the explore walk does them (``hcfg.interpreter.Paths``)
        self.paths = Paths(PathFlags([self.definition.body], _tests(self.definition.body.body), self.parameters))
        self._code: dict[int, Any] = {}
        # (id of an expression, id of a state) -> (both, the tensor it evaluated to there, whether that made
        # a data-dependent decision) until a state changes
        self._evaluated: dict[tuple[int, int], tuple[cst.CSTNode, State, Any, bool]] = {}
        self.observations = Observations(self.locals)
        # sub-DNN index -> what its statements wrote on the first state that ran them
        self.produced: dict[int, dict[str, Any]] = {}
        self._sub_count = 0
        self._cond_count = 0
        self._statement: cst.BaseStatement | None = None  # the statement being placed (``evaluate``)

    # -- driver ------------------------------------------------------------------------------------

    def build(self) -> HCFG:
        self.live_after = live_after_ifs(list(self.definition.body.body), frozenset(self.locals))
        with torch.no_grad():
            body, _ = self.block(list(self.definition.body.body), [PathState(self.initial).fork()])
        graph = HCFG(self.definition.name.value, self.parameters, body, frozenset(self.locals))
        graph = annotate(graph)
        graph.check()
        return graph

    def block(self, stmts: list[cst.BaseStatement], states: list[PathState]
              ) -> tuple[tuple[Node, ...], list[PathState]]:
        """Place ``stmts`` (run on every state in ``states``); the nodes, and the states after them."""
        nodes: list[Node] = []
        pending: list[cst.SimpleStatementLine] = []

        def flush() -> None:
            if pending:
                if states:
                    self._observe(self._sub_count, pending, states[0].concrete)
                nodes.append(SubDNN(self._sub_count, tuple(pending)))
                self._sub_count += 1
                pending.clear()

        for stmt in self._undecided(stmts, lambda: states):  # noqa: B023 - read late: the states there
            self._evaluated.clear()
            self._statement = stmt  # where ``evaluate`` says an unseen in-place update happened
            if not states:
                break
            if isinstance(stmt, cst.If):
                test = self._read_on_host(stmt.test, stmt, states, nodes, flush)
                hoisted, test = self.hoist(test, stmt, states[0].concrete)
                if not self.levers.conditions_in_producers:
                    self.run_all(hoisted, states, tensor=True)
                    flush()
                    pending += hoisted
                else:
                    self.place_hoisted(hoisted, states, pending, nodes)
                flush()
                cond, states = self.condition(stmt, self.portable(test, states[0].concrete, stmt), states)
                nodes.append(cond)
                continue
            small = stmt.body[0]
            if isinstance(small, cst.Pass):
                continue
            if isinstance(small, cst.Return):
                value = self._read_on_host(small.value or cst.Name("None"), stmt, states, nodes, flush)
                hoisted, value = self.hoist(value, stmt, states[0].concrete)
                self.place_hoisted(hoisted, states, pending, nodes)
                flush()
                nodes.append(Return(stmt, self.portable(value, states[0].concrete, stmt)))
                states = []
                continue
            if self.is_tensor_statement(small, states[0].concrete):
                self.place_tensor(stmt, states, pending, nodes, flush)
                continue
            hoisted, new_small = self.hoist(small, stmt, states[0].concrete)
            for line in hoisted:  # self.count.add_(int(x.sum() > 0)): the int() is host work (split_conversions)
                self.place_tensor(line, states, pending, nodes, flush)
            flush()
            check_item_write_target(small, lambda node, state=states[0].concrete: isinstance(
                self.evaluate(node, state), torch.Tensor), lambda stmt=stmt: self.rewritten.locations.resolve(stmt))
            new_stmt = stmt.with_changes(body=[self.portable(new_small, states[0].concrete, stmt)])
            self._check_host(new_stmt)
            if isinstance(small, cst.Raise):  # the path ends here, on the host, when a call gets here
                nodes.append(HostOp(new_stmt))
                states = []
                continue
            self.run_all([new_stmt], states)
            nodes.append(HostOp(folded_host_value(new_stmt, [s.concrete for s in states], self.locals)))
            if always_exits([new_stmt]):
                states = []
        flush()
        return tuple(nodes), states

    def _read_on_host(self, node: cst.BaseExpression, stmt: cst.BaseStatement, states: list[PathState],
                      nodes: list, flush: Callable[[], None]) -> cst.BaseExpression:
        """``node`` (a test, a returned value) with what its tensor code reads of a set computed by
        host operations placed first (``hcfg.host_reads``)."""
        state = states[0].concrete
        if not any(isinstance(state.get(name), torch.Tensor) for name in read_names(node)):
            return node  # host code throughout
        lines, node = split_expression_reads(node, stmt, state, self.evaluate, self._host_value)
        if lines:
            flush()
            nodes += [HostOp(line) for line in lines]
            self.run_all(lines, states)
        return node

    def place_tensor(self, stmt: cst.SimpleStatementLine, states: list[PathState], pending: list, nodes: list,
                     flush: Callable[[], None]) -> None:
        """Run and place one tensor statement in ``pending``, its host conversions first (``tensor_statement``)."""
        placed, conversions = self.tensor_statement(stmt, states, pending)
        if conversions:
            flush()
            nodes += conversions
            self.run_all([c.statement for c in conversions], states)
        pending.append(placed)
        self.run_all([placed], states, tensor=True)

    def condition(self, stmt: cst.If, test: cst.BaseExpression, states: list[PathState]
                  ) -> tuple[Cond, list[PathState]]:
        """The ``Cond`` of ``stmt`` (its tensor parts already hoisted: ``test``), both branches
        placed, and the states after it (merged where ``PathFlags`` allows)."""
        then_in, else_in = self.paths.split(stmt.test, states)
        then, then_states = self.branch(list(stmt.body.body), then_in)
        orelse, else_states = self.branch(else_body(stmt), else_in)
        cond = Cond(self._next_cond(), stmt, test, then, orelse)
        return cond, self.paths.join(then_states + else_states, self.live_after[id(stmt)])

    @property
    def _local_names(self) -> frozenset[str]:
        return frozenset(self.locals) | frozenset(self.parameters)

    def _undecided(self, stmts: list[cst.BaseStatement], current) -> Iterator[cst.BaseStatement]:
        """``stmts`` with each ``if`` that ``decided_branch`` decides replaced by its branch,
        lazily: ``current()`` gives the states where the next statement is placed."""
        for stmt in stmts:
            taken = self.decided_branch(stmt, current()) if isinstance(stmt, cst.If) and current() else None
            if taken is None:
                yield stmt
            else:
                yield from self._undecided(taken, current)

    def decided_branch(self, stmt: cst.If, states: list[PathState]) -> list[cst.BaseStatement] | None:
        """The branch of ``stmt`` that every call takes, where its test is a type test
        that the states decide (``hcfg.type_tests``); None otherwise."""
        decided = decided_type_test(stmt.test, [s.concrete for s in states], self._local_names, self.evaluate,
                                    self.paths.flags.sized)
        if decided is None:
            return None
        taken, untaken = (list(stmt.body.body), else_body(stmt)) if decided else (else_body(stmt),
                                                                                  list(stmt.body.body))
        self.paths.flags.skip(_tests(untaken))
        return taken

    def place_hoisted(self, hoisted: list[cst.SimpleStatementLine], states: list[PathState], pending: list,
                      nodes: list) -> None:
        """Run and append the tensor lines hoisted out of a test or a ``return`` to ``pending``."""
        self.run_all(hoisted, states, tensor=True)
        pending += hoisted

    def tensor_statement(self, stmt: cst.SimpleStatementLine, states: list[PathState],
                         pending: list[cst.SimpleStatementLine]
                         ) -> tuple[cst.SimpleStatementLine, list[HostOp]]:
        """Split a tensor statement's host conversions off (``split_conversions``): their tensor
        parts are run and appended to ``pending``. Returns the statement left to place and the
        conversions' host operations (to run once ``pending`` is flushed); a read of a set is
        host work too (``hcfg.host_reads``)."""
        reads, split = split_host_reads(stmt, states[0].concrete, self.evaluate, self._host_value)
        tensor_parts, conversions, placed = self.split_conversions(split, states[0].concrete)
        placed = traced_lengths(placed, lambda e: self._has_rows(e, states[0].concrete))  # stays symbolic
        if not conversions and not reads:
            self._carry_evaluated(stmt, placed, states[0].concrete)
            return placed, []
        self.run_all(tensor_parts, states, tensor=True)
        pending += tensor_parts
        return placed, [HostOp(c) for c in reads + conversions]

    def _host_value(self) -> str:
        name = self.namespace.fresh("n")
        self.locals.add(name)
        return name

    def _fresh_local(self, base: str) -> str:
        name = self.namespace.fresh(base)
        self.locals.add(name)
        return name

    def _has_rows(self, node: cst.BaseExpression, state: State) -> bool:
        value = self.evaluate(node, state)
        return isinstance(value, torch.Tensor) and value.dim() >= 1

    def _observe(self, index: int, statements: list[cst.SimpleStatementLine], state: State) -> None:
        """Keep what a sub-DNN's statements wrote (they have just run on ``state``): a value
        computed from no input of the sub-DNN is the same on every state (``hcfg.optimize``)."""
        written = set().union(*(bound_names(s) for s in statements)) & self.locals
        self.produced[index] = {name: state[name] for name in written if name in state}

    def branch(self, stmts: list[cst.BaseStatement], states: list[PathState]
               ) -> tuple[tuple[Node, ...], list[PathState]]:
        return self.block(stmts, self.paths.enter(states, _tests(stmts)))

    def _next_cond(self) -> int:
        self._cond_count += 1
        return self._cond_count - 1

    # -- executing on the example ------------------------------------------------------------------

    def run_all(self, stmts: list[cst.SimpleStatementLine], states: list[PathState], tensor: bool = False) -> None:
        """Run ``stmts`` on every state; ``tensor``: they go to a sub-DNN, and what they
        compute is kept for the explore walk (``hcfg.observations``)."""
        for stmt in stmts:
            code = self._compiled(stmt)
            inplace = updated_in_place(stmt)
            if tensor:
                check_out_arguments(stmt, lambda stmt=stmt: self.rewritten.locations.resolve(stmt))
                check_view_updates(stmt, lambda stmt=stmt: self.rewritten.locations.resolve(stmt))
            for state in (s.concrete for s in states):
                written = written_tensor_names(stmt, state)
                if written:
                    check_inplace_aliasing(written, state, lambda stmt=stmt: self.rewritten.locations.resolve(stmt),
                                           ignore=self.temporaries, arguments=self.arguments)
                reads = self.observations.reads(stmt, state) if tensor else None
                decided = None if inplace else self._bind_evaluated(stmt, state)
                if decided is None:
                    recorder = DecisionRecorder() if tensor else contextlib.nullcontext()
                    before = tensor_versions(read_names(stmt) - bound_names(stmt), state) if tensor else {}
                    layouts = argument_layouts(self.arguments) if written else None
                    try:
                        with recorder:
                            exec(code, state)  # noqa: S102 - the rewritten function's own statement
                    except Exception as exc:
                        raise self._trace_error(stmt, exc) from exc
                    if layouts is not None:
                        check_argument_layouts(layouts, self.arguments,
                                               lambda stmt=stmt: self.rewritten.locations.resolve(stmt))
                    check_seen_updates(stmt, before, state, lambda stmt=stmt: self.rewritten.locations.resolve(stmt))
                    decided = bool(recorder.decisions) if tensor else True
                if tensor:
                    self.observations.record(stmt, reads, state, decided)
        self._evaluated.clear()  # the states changed: what was evaluated before may differ now

    def _carry_evaluated(self, before: cst.SimpleStatementLine, after: cst.SimpleStatementLine, state: State) -> None:
        """``after`` computes what ``before`` does (rebuilt, nothing split off): its value has
        the tensor ``before``'s value was evaluated to, if it was."""
        old, new = before.body[0], after.body[0]
        if isinstance(old, cst.Assign) and isinstance(new, cst.Assign):
            entry = self._evaluated.get((id(old.value), id(state)))
            if entry is not None and entry[0] is old.value and entry[1] is state:
                self._evaluated[(id(new.value), id(state))] = (new.value, state, *entry[2:])

    def _bind_evaluated(self, stmt: cst.SimpleStatementLine, state: State) -> bool | None:
        """Run ``name = value`` by binding the tensor ``evaluate`` computed for ``value`` on
        this very state since it last changed (placing the statement needed it): the same
        value, without running the tensor code twice. Whether computing it made a
        data-dependent decision; None where nothing was bound."""
        small = stmt.body[0]
        if not (isinstance(small, cst.Assign) and len(small.targets) == 1
                and isinstance(small.targets[0].target, cst.Name)):
            return None
        node, seen_in, value, decided = self._evaluated.get((id(small.value), id(state)), (None, None, None, None))
        if node is not small.value or seen_in is not state or any(
                isinstance(n, cst.NamedExpr) for n in descendants(small.value)):
            return None
        state[small.targets[0].target.value] = value
        return decided

    def _compiled(self, node: cst.CSTNode, mode: str = "exec"):
        key = (id(node), mode)
        if key not in self._code:
            code = compile_statements([node], "<dycl-hcfg>") if mode == "exec" else compile_expression(
                node, "<dycl-hcfg>")
            self._code[key] = (code, node)
        return self._code[key][0]

    def evaluate(self, node: cst.BaseExpression, state: State) -> Any:
        if any(isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value in _MUTATING
               and self._may_be_container(n.func.value, state) for n in descendants(node)):
            return _Unknown
        rebound = bound_names(self._statement) if self._statement is not None else set()
        before = tensor_versions(read_names(node) - rebound, state)  # `h = self.relu(h)` gives h a new value
        try:
            with DecisionRecorder() as recorder:
                value = eval(self._compiled(node, "eval"), dict(state))  # noqa: S307 - explicit namespace
        except Exception:
            return _Unknown
        statement = self._statement
        check_seen_updates(node, before, state, lambda: self.rewritten.locations.resolve(statement))
        if is_tensor_value(value):
            self._evaluated[(id(node), id(state))] = (node, state, value, bool(recorder.decisions))
        return value

    def _may_be_container(self, receiver: cst.BaseExpression, state: State) -> bool:
        """Whether ``receiver.sort()``/``.add()``/... may mutate a Python container; a
        module (``torch.sort``), a tensor (``x.add(y)``: not in place) or an ``nn.Module``
        (``self.update(x)`` calls a submodule; a ``ModuleDict.update`` in forward is a state
        write, refused by ``rewriter.state_writes``) does not."""
        value = self.evaluate(receiver, state)
        return not isinstance(value, (torch.Tensor, type(torch), torch.nn.Module))

    def _trace_error(self, stmt: cst.CSTNode, exc: Exception) -> UnsupportedError:
        location = self.rewritten.locations.resolve(stmt)
        cache = missing_key(stmt, exc, self.rewritten.state, location)
        if cache is not None:
            return cache
        return UnsupportedError(
            f"a branch that fails on the example input ({type(exc).__name__}: {exc})", location,
            "dycl runs every branch once on the example input to learn shapes; give an example for which "
            "each branch can run")

    # -- placing statements ------------------------------------------------------------------------

    def is_tensor_statement(self, small: cst.BaseSmallStatement, state: State) -> bool:
        if isinstance(small, cst.Assign):
            if isinstance(small.value, _DISPLAYS) or any(isinstance(n, (cst.Subscript, cst.Attribute))
                                                         for t in small.targets for n in descendants(t.target)):
                return False  # an item write changes a container the host keeps: host work
            if self.is_reference(small.value, state):
                # §5.4: moving a tensor is host work; without optimisation it stays a sub-DNN output
                return not self.levers.optimize_graph and isinstance(self.evaluate(small.value, state), torch.Tensor)
            value = self.evaluate(small.value, state)
            return is_tensor_value(value) or self.reads_metadata(small.value, state) or belongs_with_tensors(
                small.value, value, lambda node: self.evaluate(node, state), is_tensor_value)
        if isinstance(small, cst.AugAssign) and isinstance(small.target, cst.Name):
            return is_tensor_value(state.get(small.target.value)) or is_tensor_value(
                self.evaluate(small.value, state))
        return False

    def split_conversions(self, stmt: cst.SimpleStatementLine, state: State):
        """A tensor statement that turns a tensor into a Python number (``x.mean().item()``,
        ``int(t)``) must not be traced as one graph: the number would be frozen. The
        tensor goes to the sub-DNN, the host converts it, and the rest of the statement
        takes the number as an input. Returns (tensor parts, host conversions, statement)."""
        tensor_parts: list[cst.SimpleStatementLine] = []
        conversions: list[cst.SimpleStatementLine] = []

        def line(target: str, value: cst.BaseExpression) -> cst.SimpleStatementLine:
            self.locals.add(target)
            assign = cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(target))], value)])
            return set_location(assign, comment_of(stmt))

        def convert(operand: cst.BaseExpression, make) -> cst.BaseExpression | None:
            if not isinstance(self.evaluate(operand, state), torch.Tensor):
                return None
            tensor = self.namespace.fresh("t")
            self.temporaries.add(tensor)
            number = self.namespace.fresh("n")
            tensor_parts.append(line(tensor, operand))
            conversions.append(line(number, make(cst.Name(tensor))))
            return cst.Name(number)

        def visit(current: cst.CSTNode) -> cst.CSTNode:
            current = map_children(current, visit)
            if (isinstance(current, cst.Call) and isinstance(current.func, cst.Attribute)
                    and current.func.attr.value in _CONVERSION_METHODS and not current.args):
                method = current.func.attr.value
                replaced = convert(current.func.value, lambda name: cst.Call(cst.Attribute(name, cst.Name(method))))
                return replaced if replaced is not None else current
            if (isinstance(current, cst.Call) and isinstance(current.func, cst.Name)
                    and current.func.value in _CONVERSIONS and len(current.args) == 1):
                function = current.func.value
                item = lambda name: cst.Call(cst.Attribute(name, cst.Name("item")))  # noqa: E731
                replaced = convert(current.args[0].value, lambda name: cst.Call(cst.Name(function),
                                                                                [cst.Arg(item(name))]))
                return replaced if replaced is not None else current
            return current

        small = stmt.body[0]
        if not any(type(n) is cst.Name and n.value in _CONVERSION_WORDS for n in descendants(small.value)):
            return tensor_parts, conversions, stmt  # nothing to split: no node is rebuilt
        new_small = small.with_changes(value=visit(small.value))
        return tensor_parts, conversions, stmt.with_changes(body=[new_small])

    def reads_metadata(self, node: cst.BaseExpression, state: State) -> bool:
        """``x.size(0)``, ``x.shape[-1]``, ``len(x)`` of a tensor, and no ``.item()``:
        a shape computation, which belongs with the tensor code that uses it."""
        found = False
        for current in descendants(node):
            if isinstance(current, cst.Call) and isinstance(current.func, cst.Name) and (
                    current.func.value in _CONVERSIONS):
                return False
            if isinstance(current, cst.Attribute) and current.attr.value in _CONVERSION_METHODS:
                return False
            if isinstance(current, cst.Attribute) and current.attr.value in _METADATA:
                found = found or isinstance(self.evaluate(current.value, state), torch.Tensor)
            if isinstance(current, cst.Call) and isinstance(current.func, cst.Name) and current.func.value == "len":
                found = found or any(isinstance(self.evaluate(a.value, state), torch.Tensor) for a in current.args)
        return found

    def portable(self, node: cst.CSTNode, state: State, stmt: cst.BaseStatement) -> cst.CSTNode:
        """``node`` as the host runs it on numpy arrays (``hcfg.portable``, ``hcfg.host_methods``)."""

        def refuse(method: str) -> None:
            raise UnsupportedError(
                f"tensor method .{method}(...) evaluated by the host, which holds numpy arrays there",
                self.rewritten.locations.resolve(stmt),
                "the host translates only amax/amin and max()/min()/sum()/any()/all()/item()/tolist() "
                "without arguments; use one of those, or compile with an example that reaches this line "
                "(then the tensor code computes it)")

        return portable_metadata(node, lambda receiver: isinstance(self.evaluate(receiver, state), torch.Tensor),
                                 refuse)

    def is_reference(self, node: cst.BaseExpression, state: State) -> bool:
        """A name, or an element of a Python list/tuple: moving it costs nothing."""
        if isinstance(node, cst.Name):
            return True
        if isinstance(node, cst.Subscript) and self.is_reference(node.value, state):
            container = self.evaluate(node.value, state)
            return isinstance(container, (list, tuple))
        return False

    def hoist(self, node: cst.CSTNode, stmt: cst.BaseStatement, state: State) -> tuple[list, cst.CSTNode]:
        """Move the tensor computations in ``node`` into fresh variables."""
        hoisted: list[cst.SimpleStatementLine] = []

        def visit(current: cst.CSTNode) -> cst.CSTNode:
            if isinstance(current, cst.BaseComp):
                return self._hoist_comprehension(current, stmt, state, hoisted)
            if isinstance(current, cst.Lambda):
                return current
            if isinstance(current, cst.BaseExpression) and not self.is_reference(current, state) and not (
                    isinstance(current, _DISPLAYS)):
                value = self.evaluate(current, state)
                if is_tensor_value(value):
                    temp = self.namespace.fresh("t")
                    self.locals.add(temp)
                    self.temporaries.add(temp)
                    traced = traced_lengths(current, lambda e: self._has_rows(e, state))  # stays symbolic
                    line = cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(temp))], traced)])
                    hoisted.append(set_location(line, comment_of(stmt)))
                    return cst.Name(temp)
            if isinstance(current, cst.AssignTarget):
                return current.with_changes(target=self._hoist_target(current.target, visit))
            return map_children(current, visit)

        if isinstance(node, cst.Assign):
            new = node.with_changes(value=visit(node.value),
                                    targets=[visit(t) for t in node.targets])
        elif isinstance(node, cst.AugAssign):
            new = node.with_changes(value=visit(node.value))
        else:
            new = visit(node)
        return hoisted, new

    def _hoist_comprehension(self, comp: cst.BaseComp, stmt: cst.BaseStatement, state: State,
                             hoisted: list[cst.SimpleStatementLine]) -> cst.BaseExpression:
        """A comprehension in host code (``hcfg.host_comprehensions``): left whole where it
        iterates no tensor; refused where building it reads tensor values; its elements
        computed by the sub-DNN as a list where they are tensors."""
        evaluate = lambda node: self.evaluate(node, state)  # noqa: E731
        if not iterates_tensors(comp, evaluate):
            return comp
        if reads_data(comp, lambda node: self._decisions(node, state)):
            raise UnsupportedError(
                "a comprehension over tensors whose elements or filter are decided on the host",
                self.rewritten.locations.resolve(stmt),
                "compute it with tensor operations (any(r.sum() > 1 for r in x) is (x.flatten(1).sum(1) > 1).any()),"
                " or write it as a for loop, which dycl unrolls")
        listed = as_tensor_list(comp, evaluate)
        if listed is None:  # no tensor elements: host code over what the host holds
            return self._host_comprehension(comp, stmt, state, hoisted)
        temp = self._fresh_local("t")
        self.temporaries.add(temp)
        line = cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(temp))], listed)])
        hoisted.append(set_location(line, comment_of(stmt)))
        return host_form(comp, temp)

    def _host_comprehension(self, comp: cst.BaseComp, stmt: cst.BaseStatement, state: State,
                            hoisted: list[cst.SimpleStatementLine]) -> cst.BaseComp:
        """``comp`` (over tensors, elements no tensors) as the host runs it: over the rows of a
        tensor, a name it holds, or a list the sub-DNN computes, reading only metadata of its
        loop variable (``hcfg.host_comprehensions``)."""
        foreign = foreign_use(comp)
        if foreign is not None:
            raise UnsupportedError(
                f"a comprehension over tensors left on the host that reads its element other than by its "
                f"shape (`{cst.Module([]).code_for_node(foreign)}`)", self.rewritten.locations.resolve(stmt),
                "the host holds numpy arrays there, not tensors: compute the value with tensor operations, "
                "or write the comprehension as a for loop, which dycl unrolls")
        iterable = rows_iterable(comp.for_in.iter)
        if not isinstance(self.evaluate(iterable, state), torch.Tensor):
            iterable = comp.for_in.iter
        if not self.is_reference(iterable, state):
            temp = self._fresh_local("t")
            self.temporaries.add(temp)
            line = cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(temp))], iterable)])
            hoisted.append(set_location(line, comment_of(stmt)))
            iterable = cst.Name(temp)
        names = loop_names(comp)
        comp = comp.with_changes(for_in=comp.for_in.with_changes(iter=iterable))
        return portable_metadata(comp, lambda receiver: isinstance(receiver, cst.Name) and receiver.value in names)

    def _decisions(self, node: cst.BaseExpression, state: State) -> int:
        """How many reads of tensor values evaluating ``node`` on ``state`` makes (0 where it fails)."""
        try:
            with DecisionRecorder() as recorder:
                eval(self._compiled(node, "eval"), dict(state))  # noqa: S307 - explicit namespace
        except Exception:  # noqa: BLE001 - not known to read data: left as it was
            return 0
        return len(recorder.decisions)

    @staticmethod
    def _hoist_target(target: cst.BaseExpression, visit) -> cst.BaseExpression:
        if isinstance(target, cst.Subscript):
            return target.with_changes(slice=[visit(s) for s in target.slice])
        return target

    def _check_host(self, stmt: cst.SimpleStatementLine) -> None:
        names = {n.value for n in descendants(stmt) if isinstance(n, cst.Name)}
        if self.self_name in names:
            raise UnsupportedError(
                "a statement that mixes the model with Python values the host must keep "
                f"({cst.Module([]).code_for_node(stmt.body[0])})",
                self.rewritten.locations.resolve(stmt),
                "return only tensors from helpers and submodules, or compute the Python value from them")


def _tests(stmts: list[cst.BaseStatement]) -> Iterator[cst.BaseExpression]:
    """The tests of the ``if`` statements in ``stmts``, walked only when read (``Paths.enter``
    reads them only for a branch no path takes)."""
    return (n.test for stmt in stmts for n in descendants(stmt) if isinstance(n, cst.If))


@dataclass(frozen=True)
class Built:
    """The annotated HCFG and what building it observed: for each sub-DNN, the values
    its statements wrote on the first path that ran them; for each tensor statement,
    what it computed from what (``hcfg.observations``)."""

    graph: HCFG
    produced: dict[int, dict[str, Any]]
    observations: Observations

    def output_examples(self) -> dict[int, Examples]:
        """One example of every sub-DNN's outputs (what ``hcfg.optimize.hoist_constants``
        reads: a constant output has the same value on every path). A value never seen
        is not a tensor: that output stays in its sub-DNN."""
        return {sub.index: Examples(outputs=[tuple(self.produced.get(sub.index, {}).get(name) for name in sub.outputs)])
                for sub in self.graph.sub_dnns}


def build(rewritten: RewrittenFunction, model: torch.nn.Module, example_args: tuple,
          levers: Levers = ALL_ON) -> Built:
    """The annotated HCFG of ``rewritten`` (inputs and outputs of every sub-DNN filled in)."""
    builder = HCFGBuilder(rewritten, model, example_args, levers)
    return Built(builder.build(), builder.produced, builder.observations)


__all__ = ["build", "Built", "HCFGBuilder", "is_tensor_value"]
