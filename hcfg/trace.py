"""Algorithm 2: example inputs for every sub-DNN, including untaken branches.

The HCFG is run on the example input taking both branches of every
condition (``hcfg.state``), in program order; each sub-DNN records the values
of its inputs for every structurally different state that reaches it. These
are the example inputs it is compiled for: shapes follow from them, and a
dimension that differs between two of them becomes symbolic.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass, field
from typing import Any

import libcst as cst
import torch

from hcfg.graph import HCFG, Block, Cond, HostOp, Return, SubDNN
from hcfg.state import State, fork, merge, signature


@dataclass
class Examples:
    """Input values seen by one sub-DNN, one tuple per distinct signature, and
    the matching output values."""

    inputs: list[tuple[Any, ...]] = field(default_factory=list)
    outputs: list[tuple[Any, ...]] = field(default_factory=list)
    _keys: set = field(default_factory=set)

    def add(self, values: tuple[Any, ...]) -> bool:
        key = signature(values)
        if key in self._keys:
            return False
        self._keys.add(key)
        self.inputs.append(values)
        return True


def trace_examples(graph: HCFG, globals_: dict[str, Any], initial: State) -> dict[int, Examples]:
    """Run ``graph`` along every branch from ``initial`` (a state holding the
    parameters); return the examples of each sub-DNN by index."""
    tracer = _Tracer(graph, {"__builtins__": builtins, **globals_})
    with torch.no_grad():
        tracer.block(graph.body, [fork({**tracer.globals, **initial})])
    return tracer.examples


class _Tracer:
    def __init__(self, graph: HCFG, globals_: dict[str, Any]) -> None:
        self.graph = graph
        self.globals = globals_
        self.names = frozenset(graph.locals)
        self.examples: dict[int, Examples] = {sub.index: Examples() for sub in graph.sub_dnns}
        self._code: dict[int, Any] = {}

    def code(self, key: int, statements) -> Any:
        if key not in self._code:
            self._code[key] = compile(cst.Module(list(statements)).code, f"<dycl-subdnn-{key}>", "exec")
        return self._code[key]

    def block(self, block: Block, states: list[State]) -> list[State]:
        for node in block:
            if not states:
                return []
            if isinstance(node, SubDNN):
                code = self.code(node.index, node.statements)
                examples = self.examples[node.index]
                for state in states:
                    # copy lists: host operations later append to the same list objects
                    values = tuple(list(state[name]) if isinstance(state[name], list) else state[name]
                                   for name in node.inputs)
                    fresh = examples.add(values)
                    exec(code, state)  # noqa: S102 - the rewritten function's own statements
                    if fresh:
                        examples.outputs.append(tuple(state[name] for name in node.outputs))
            elif isinstance(node, HostOp):
                code = self.code(-1 - id(node), [node.statement])
                for state in states:
                    exec(code, state)  # noqa: S102
            elif isinstance(node, Cond):
                then = self.block(node.then, [fork(s) for s in states])
                orelse = self.block(node.orelse, [fork(s) for s in states])
                states = merge(then + orelse, self.names)
            elif isinstance(node, Return):
                return []
        return states
