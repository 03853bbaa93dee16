"""Algorithm 2: example inputs for every sub-DNN, including untaken branches.

The HCFG is run on the example input taking both branches of every
condition (``hcfg.state``), in program order; each sub-DNN records the values
of its inputs for every structurally different state that reaches it. These
are the example inputs it is compiled for: shapes follow from them, and a
dimension that differs between two of them becomes symbolic.

Given a ``SymbolicShapes`` and the symbolic mirror of the initial state, the
same walk also runs every statement symbolically (``hcfg.symbolic``), and each
example records the symbolic shapes of its inputs and outputs: each path is one
``hcfg.state.PathState`` carrying both layers. A number a host operation reads off a tensor
(``k = int(t)``) is mirrored as a fresh symbol, so a size made from it downstream
(``torch.topk(x, k)``) is symbolic, never the example's number. Where the build walk already ran a
sub-DNN's statements on exactly these objects (``hcfg.observations``), their
results are taken from it instead of running the tensor code again.

The walk is ``Explorer``, a ``hcfg.interpreter.PathInterpreter``. It also records what
every path returns (``Returned``: the value, its symbolic mirror, and whether the path is
the example's own, followed through each condition by evaluating its test on the example's
state), so the manifest's outputs come from it (``dycl.artifact.outputs``) and nothing
runs the model again to learn them.

A size test the example cannot make take one of its branches (``if x.shape[0] == 1:``
from a batch of 2) has that branch explored on the states resized to the size that
takes it, where one size does (``hcfg.size_tests``); a ``raise`` ends its path.
"""

from __future__ import annotations

import builtins
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import libcst as cst
import sympy
import torch
from dycl.hcfg.decisions import Decision, DecisionRecorder, FrozenDecisionError
from dycl.hcfg.graph import HCFG, Block, Cond, HostOp, Return, SubDNN, source_of, walk
from dycl.hcfg.interpreter import PathInterpreter, Paths
from dycl.hcfg.list_indices import as_index_tensors, index_lists
from dycl.hcfg.liveness import reads_writes, statements_reads_writes
from dycl.hcfg.pycode import compile_statements, statement_text
from dycl.hcfg.pytree_ports import snapshot
from dycl.hcfg.shared_runs import run_key
from dycl.hcfg.size_tests import pinned_sizes, resized
from dycl.hcfg.state import PathFlags, PathState, State, signature, symbolic_signature
from dycl.hcfg.state_mutation import Watched, stale, watch
from dycl.hcfg.symbolic import SizeDependentStructure, SymbolicTensor
from dycl.hcfg.tracing_guards import skipped_when_tracing
from dycl.rewriter.errors import SourceLocation, SpecialisationWarning, UnsupportedError
from dycl.rewriter.locations import LocationTable
from dycl.rewriter.walk import read_names

if TYPE_CHECKING:
    from dycl.hcfg.observations import Observations
    from dycl.hcfg.symbolic import SymbolicShapes


@dataclass
class Examples:
    """Input values seen by one sub-DNN, one tuple per distinct signature, and
    the matching output values."""

    inputs: list[tuple[Any, ...]] = field(default_factory=list)
    outputs: list[tuple[Any, ...]] = field(default_factory=list)
    # the symbolic values matching inputs / outputs (only when traced symbolically)
    symbolic_inputs: list[tuple[Any, ...]] = field(default_factory=list)
    symbolic_outputs: list[tuple[Any, ...]] = field(default_factory=list)
    _keys: set = field(default_factory=set)

    def add(self, values: tuple[Any, ...], symbolic: tuple[Any, ...] | None = None) -> bool:
        key = signature(values) if symbolic is None else (signature(values), symbolic_signature(symbolic))
        if key in self._keys:
            return False
        self._keys.add(key)
        self.inputs.append(values)
        if symbolic is not None:
            self.symbolic_inputs.append(symbolic)
        return True


@dataclass(frozen=True)
class Returned:
    """One path's end at a ``Return``: the value it returns (containers copied), its symbolic
    mirror (None where the value could not be computed there), and whether the path stands
    for the one the example itself takes (``Explorer`` follows it through the conditions;
    where a join merged the example's state into another of the same signature, that one
    stands for it: the same types, structure, dtypes and shapes, not the same values)."""

    statement: cst.SimpleStatementLine
    value: Any
    symbolic: Any
    example: bool


@dataclass
class Exploration:
    """What exploring a graph found: each sub-DNN's examples (by index) and every
    path's returned value, in the order the paths reached their ``Return`` (a path whose
    return expression fails on the example's values, one no call can take, gives none)."""

    examples: dict[int, Examples]
    returns: list[Returned]


def explore(graph: HCFG, globals_: dict[str, Any], initial: State, shapes: SymbolicShapes | None = None,
            symbolic_initial: State | None = None, locations: LocationTable | None = None,
            observations: Observations | None = None) -> Exploration:
    """Run ``graph`` along every branch from ``initial`` (a state holding the
    parameters); the examples of each sub-DNN by index and the values every path
    returns. With ``shapes``, ``symbolic_initial`` mirrors ``initial`` (fake tensors
    with symbolic dims) and every example and returned value also gets its symbolic shapes.

    Raises ``UnsupportedError`` when a sub-DNN reads a tensor's value into Python
    (``hcfg.decisions``): its export would freeze that value. ``locations`` turns
    the statements' location comments into full paths for that error.

    ``observations`` (from the build walk over the same example objects) stand in
    for running a sub-DNN's statements concretely where they saw exactly these
    inputs (``hcfg.observations``); the symbolic run is made all the same."""
    explorer = Explorer(graph, {"__builtins__": builtins, **globals_}, shapes, locations, observations)
    mirror = None if shapes is None else {**explorer.globals, **initial, **(symbolic_initial or {})}
    start = PathState({**explorer.globals, **initial}, mirror).fork()
    explorer.example = start
    with torch.no_grad():
        explorer.run([start])
    return Exploration(explorer.examples, explorer.returns)


class Explorer(PathInterpreter):
    """The explore walk (``PathInterpreter``): runs every sub-DNN and host operation on
    each state, concretely and on its symbolic mirror, records the examples of every
    sub-DNN and the value of every ``Return``, and follows the example's own path."""

    def __init__(self, graph: HCFG, globals_: dict[str, Any], shapes: SymbolicShapes | None = None,
                 locations: LocationTable | None = None, observations: Observations | None = None) -> None:
        nodes = list(walk(graph.body))
        statements = [s for n in nodes for s in (n.statements if isinstance(n, SubDNN) else
                                                  (n.statement,) if isinstance(n, HostOp) else ())]
        super().__init__(graph, Paths(PathFlags(statements, [n.test for n in nodes if isinstance(n, Cond)],
                                                graph.parameters)))
        self.observations = observations
        self.locations = locations
        self.globals = globals_
        self.shapes = shapes
        self.names = frozenset(graph.locals)
        self.examples: dict[int, Examples] = {sub.index: Examples() for sub in graph.sub_dnns}
        self.returns: list[Returned] = []
        self.example: PathState | None = None  # the state on the example's own path, while known
        self._code: dict[int, Any] = {}
        self._run_keys: dict[int, tuple | None] = {}
        self._fingerprints: dict[int, tuple] = {}
        self._tests: dict[int, tuple[Any, set[str]]] = {}  # id of a Cond -> its compiled test and the names it reads

    def code(self, key: int, statements) -> Any:
        if key not in self._code:
            self._code[key] = compile_statements(statements, self.code_name(key))
        return self._code[key]

    # -- the override points of PathInterpreter ---------------------------------------------------

    def run_sub_dnn(self, sub: SubDNN, states: list[PathState]) -> list[PathState]:
        code = self.code(sub.index, sub.statements)
        examples = self.examples[sub.index]
        for path in states:
            state = path.concrete
            # copy containers: host operations later write into the same lists, dicts and objects
            values = tuple(snapshot(state[name]) for name in sub.inputs)
            symbolic = self.symbolic_values(path, sub.inputs)
            fresh = examples.add(values, symbolic)
            watched = watch(state[name] for name in sub.inputs)  # a KV cache it may grow in place
            if watched or self.observations is None or not self.observations.replay(sub.statements, state):
                before = dict(state) if watched else {}
                with DecisionRecorder() as recorder:
                    exec(code, state)  # noqa: S102 - the rewritten function's own statements
                # a decision the exporter's trace skips (``not is_tracing(x) and x.all()``) is not frozen
                decisions = [d for d in recorder.decisions if not skipped_when_tracing(d.where)]
                if decisions:
                    raise self.frozen_decision(sub, decisions[0])
                if watched:
                    self.check_stale(sub, watched, before, state)
            self.run_symbolic(sub, code, path, symbolic)
            if fresh:
                examples.outputs.append(tuple(snapshot(state[name]) for name in sub.outputs))
                if symbolic is not None:
                    examples.symbolic_outputs.append(self.symbolic_values(path, sub.outputs))
        return states

    def run_host_op(self, op: HostOp, states: list[PathState]) -> list[PathState]:
        code = self.code(-1 - id(op), [op.statement])
        for path in states:
            exec(code, path.concrete)  # noqa: S102
            self.run_symbolic(op, code, path, None)
        return states

    def entering(self, cond: Cond, states: list[PathState], outcome: bool) -> list[PathState]:
        return self.sized_for(cond, states, outcome)

    def run_branch(self, cond: Cond, block: Block, outcome: bool, states: list[PathState]) -> list[PathState]:
        position = next((i for i, state in enumerate(states) if state is self.example), None)
        if position is None:  # the example's path is elsewhere (or no longer known)
            return super().run_branch(cond, block, outcome, states)
        takes = self.example_takes(cond)
        forks = self.paths.enter(states, (n.test for n in walk(block) if isinstance(n, Cond)))
        self.example = forks[position] if takes == outcome else None if takes is None else self.example
        return self.block(block, forks)

    def merge(self, states: list[PathState], live: frozenset[str]) -> list[PathState]:
        kept = super().merge(states, live)
        if any(state is self.example for state in states):  # else it is on a path not joined here yet
            self.example = self.paths.kept_for(self.example, kept, live)
        return kept

    def run_raise(self, op: HostOp, states: list[PathState]) -> list[PathState]:
        self.ended(states)
        return super().run_raise(op, states)

    def run_return(self, ret: Return, states: list[PathState]) -> None:
        code = self._expression(ret, ret.value)
        for path in states:
            try:
                value = snapshot(eval(code, path.concrete))  # noqa: S307 - the function's own return value
            except Exception:  # noqa: BLE001 - a path the example's values cannot end (its host code fails)
                continue
            symbolic = None
            if path.symbolic is not None:
                try:
                    symbolic = eval(code, {**path.concrete, **path.symbolic})  # noqa: S307
                except Exception:  # noqa: BLE001 - a value the mirror cannot compute: no symbolic shapes
                    symbolic = None
            self.returns.append(Returned(ret.statement, value, symbolic, path is self.example))
        self.ended(states)

    def ended(self, states: list[PathState]) -> None:
        """The paths of ``states`` end here: if the example's is one, it is no longer followed."""
        if any(state is self.example for state in states):
            self.example = None

    # -- the example's own path -------------------------------------------------------------------

    def example_takes(self, cond: Cond) -> bool | None:
        """The outcome of ``cond``'s test on the example's state (None where it cannot be told)."""
        try:
            return bool(eval(self._expression(cond, cond.test), self.example.concrete))  # noqa: S307
        except Exception:  # noqa: BLE001 - e.g. a value only the host's numpy form answers
            return None

    def _expression(self, node: Cond | Return, expression: cst.BaseExpression) -> Any:
        key = -1 - id(expression)
        if key not in self._code:
            self._code[key] = compile(cst.Module([]).code_for_node(expression), self.code_name(key), "eval")
        return self._code[key]

    def sized_for(self, cond: Cond, states: list[PathState], outcome: bool) -> list[PathState]:
        """``states`` to explore the branch of ``cond`` taken when its test is ``outcome``:
        where the test is a size test the example cannot make come out so, and a size makes
        it (``batch == 1``), each state resized to that size (``hcfg.size_tests``)."""
        if self.shapes is None:
            return states
        test = cond.test
        while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):  # bool() would pin it
            test, outcome = test.expression, not outcome
        if id(cond) not in self._tests:
            text = cst.Module([]).code_for_node(test)
            self._tests[id(cond)] = (compile(text, self.code_name(-1 - id(cond)), "eval"), read_names(test))
        code, reads = self._tests[id(cond)]
        sized = []
        for path in states:
            relation = None if path.symbolic is None else self.shapes.test_relation(code, path.symbolic, reads)
            at_example = None if relation is None else relation.xreplace(self.shapes.examples)
            if at_example not in (sympy.true, sympy.false) or bool(at_example) == outcome:
                sized.append(path)
                continue
            sizes = pinned_sizes(relation, outcome)
            other = None if sizes is None else resized(path, sizes, self.shapes)
            sized.append(path if other is None else other)
        return sized

    def frozen_decision(self, sub: SubDNN, decision: Decision) -> FrozenDecisionError:
        """The error for a tensor value read by Python inside ``sub``'s code."""
        where = decision.where
        statement = sub.statements[0]
        if where is not None and where.path == self.code_name(sub.index):
            statement = _statement_at(sub, where.line)
            where = None
        if where is None:
            where = self.location_of(statement)
        caller = self.location_of(statement)  # None: dycl's own call of a library model
        called = f", called from `{source_of(statement.body[0])}` ({caller})" if caller is not None else ""
        return FrozenDecisionError(
            f"{decision.what} of a tensor inside code that is exported as one graph{called}: "
            "the exported graph would keep the example's value for every input", where,
            "dycl moves bool()/int()/.item() of a tensor to the host only in code it rewrites (forward(), and "
            "your helpers and submodules, not installed packages or torch); compute the Python value there, or "
            "keep the computation in tensors (torch.where instead of if, tensor arithmetic instead of .item())",
            decision.library_code)

    def check_stale(self, sub: SubDNN, watched: Watched, before: dict[str, Any], after: dict[str, Any]) -> None:
        """Refuse a state object ``sub`` changed in place that a live host variable still holds
        (``hcfg.state_mutation``)."""
        names = stale(watched, before, after, sub.outputs, self.live_after.get(id(sub)))
        if names:
            raise UnsupportedError(
                f"`{names[0]}`, an object whose attributes a compiled part changes in place (a KV cache that "
                "grows), read again after it: the compiled part changes a copy", self.location_of(sub.statements[0]),
                f"bind the changed object again from what the call returns (`{names[0]} = out.past_key_values`)")

    def specialise(self, sub: SubDNN, structure: SizeDependentStructure, mirror: dict[str, Any],
                   reads: set[str]) -> None:
        """Make the dim symbols ``sub`` reads static at the example's sizes (its values differ in
        structure between sizes), warning with the statement that made them differ."""
        statement = self.structure_statement(sub, structure, mirror, reads)
        sizes = self.shapes.specialise(structure.sizes[0])
        names = ", ".join(f"{symbol} = {size}" for symbol, size in sizes.items())
        where = self.location_of(statement)
        warnings.warn(SpecialisationWarning(
            f"{where or 'dycl'}: `{source_of(statement.body[0])}`, in code exported as one graph, gives values "
            f"whose structure follows a symbolic size ({structure}: e.g. torch.split or unbind along it); dycl "
            f"compiles the model for {names} only, and the compiled model refuses other sizes. To keep the dim "
            "symbolic, split into a fixed number of pieces (torch.chunk(x, n)) or slice with fixed bounds; "
            "dynamic=False (or a dynamic= dict without that dim) says it is static."), stacklevel=2)

    def structure_statement(self, sub: SubDNN, structure: SizeDependentStructure, mirror: dict[str, Any],
                            reads: set[str]) -> cst.SimpleStatementLine:
        """The first statement of ``sub`` whose values differ in structure at the two sizes
        (running longer and longer prefixes of the sub-DNN: only on this rare path)."""
        for count in range(1, len(sub.statements) + 1):
            prefix = sub.statements[:count]
            writes = statements_reads_writes(prefix, self.names, self.graph.effects)[1]
            code = compile_statements(prefix, self.code_name(sub.index))
            try:
                if self.shapes.differs_in_structure(code, mirror, reads, writes, structure):
                    return prefix[-1]
            except Exception:  # noqa: BLE001 - a prefix that cannot run alone: keep looking
                continue
        return sub.statements[-1]

    def run_key(self, sub: SubDNN, state: dict[str, Any]) -> tuple | None:
        """``sub``'s ``hcfg.shared_runs.run_key`` (its paths reach the same values on every path)."""
        if sub.index not in self._run_keys:
            self._run_keys[sub.index] = run_key(sub.statements, state, self.names, self._fingerprints)
        return self._run_keys[sub.index]

    def location_of(self, statement: cst.CSTNode) -> SourceLocation | None:
        return (self.locations or LocationTable()).resolve(statement)

    @staticmethod
    def code_name(key: int) -> str:
        return f"<dycl-subdnn-{key}>"

    # -- the symbolic mirror ----------------------------------------------------------------------

    def symbolic_values(self, path: PathState, names: tuple[str, ...]) -> tuple[Any, ...] | None:
        if self.shapes is None or path.symbolic is None:
            return None
        mirror = path.symbolic
        return tuple(snapshot(mirror.get(name, path.concrete[name])) for name in names)

    def index_lists_as_tensors(self, sub: SubDNN, state: State, mirror: dict[str, Any]) -> None:
        """The lists of ints ``sub`` reads only as an index, mirrored as the 1-d int64 tensors it is
        compiled with (``hcfg.list_indices``), of a fresh length: the rows they select are as many."""
        if not all(name in state for name in sub.inputs):
            return
        values = tuple(state[name] for name in sub.inputs)
        names = index_lists(sub, [values])
        for name, value in zip(sub.inputs, as_index_tensors(sub, values, names)):
            if name in names:
                mirror[name] = self.shapes.lift(value, symbolic_dims=True, prefix=name)

    def run_symbolic(self, node: SubDNN | HostOp, code: Any, path: PathState, inputs: tuple[Any, ...] | None) -> None:
        """Run ``node`` on the symbolic mirror of ``path`` (which has run it concretely);
        where it cannot run symbolically, mirror the concrete values it wrote."""
        if self.shapes is None or path.symbolic is None:
            return
        state, mirror = path.concrete, path.symbolic
        reads, writes = reads_writes(node, self.names, self.graph.effects)
        if isinstance(node, SubDNN):
            self.index_lists_as_tensors(node, state, mirror)
            observed = {name: state[name] for name in writes if name in state}  # it has just run on ``state``
            try:
                shared = self.run_key(node, state)
                done = (self.shapes.run_tensor_code(code, mirror, reads, writes, observed, shared)
                        or self.shapes.probe_tensor_code(code, mirror, reads, writes, node.name))
            except SizeDependentStructure as structure:  # static at the example from now on, then run again
                self.specialise(node, structure, mirror, reads)
                done = self.shapes.run_tensor_code(code, mirror, reads, writes, observed)
        else:
            done = self.shapes.run_host(code, mirror)
        if done:
            return
        symbolic_inputs = any(self.shapes.has_symbols(v) for v in inputs or ())
        if not symbolic_inputs and isinstance(node, SubDNN):  # a size from data is symbolic whatever dynamic= says
            symbolic_inputs = self.shapes.sizes_from_data(code, mirror, reads, writes)
        # a number the host reads off a tensor (int(t), t.item()) is data: a symbol, never the example's number
        from_data = isinstance(node, HostOp) and any(isinstance(mirror.get(name), SymbolicTensor) for name in reads)
        for name in writes:
            if name in state and from_data:
                mirror[name] = self.shapes.lift_data_numbers(state[name], prefix=name)
            elif name in state:
                prefix = f"{node.name}_{name}" if isinstance(node, SubDNN) else name
                mirror[name] = self.shapes.lift(state[name], symbolic_dims=symbolic_inputs, prefix=prefix)


def _statement_at(sub: SubDNN, line: int) -> cst.SimpleStatementLine:
    """The statement of ``sub`` on ``line`` of its compiled code (``compile_statements``)."""
    for statement in sub.statements:
        line -= len(statement_text(statement).splitlines())
        if line <= 0:
            return statement
    return sub.statements[-1]
