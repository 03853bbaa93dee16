"""One path interpreter over the HCFG, with override points (as torch.fx's ``Interpreter``).

Every question dycl asks about the paths of a graph — the example inputs of each sub-DNN,
their symbolic shapes, what the function returns (``hcfg.trace``), what the host
computes on one input (``tests/hcfg``) — is a walk over the same structure: run the
nodes of a block in order on a set of states, fork the states into both branches of a
condition, and merge them again at the join. ``PathInterpreter`` is that walk once;
a subclass overrides what one kind of node does:

=====================  ===========================================================
override               called for
=====================  ===========================================================
``run_sub_dnn``        a ``SubDNN`` on the states that reach it
``run_host_op``        a ``HostOp`` (not a ``raise``)
``run_raise``          a host ``raise`` (default: every path ends there)
``entering``           a condition's branch: the states that go into it
``run_return``         a ``Return`` (default: nothing; every path ends there)
``merge``              the join after a condition (default: ``Paths.join``)
=====================  ===========================================================

``Paths`` is the fork/split/merge bookkeeping a walk over every path needs, shared with
``hcfg.build.HCFGBuilder`` (which walks the *source* while it makes the graph, so it
cannot run on one): which states enter each branch (``hcfg.state.PathFlags``: flags and
type tests route a state into the one branch it takes), forking a branch's states, and
merging states at a join by signature.

Assumes: the graph is annotated (liveness; ``HCFG.check`` holds) and each state holds the
function's parameters. Guarantees: every node is visited in program order on every
structurally different state that reaches it (a ``Cond`` before its branches, each branch
once with the states that enter it, even none, so that a flag's pending tests are
counted); after a ``Return`` or a ``raise`` no state goes on; the states after a block
are the ones that fall off its end.
"""

from __future__ import annotations

from collections.abc import Iterable

import libcst as cst
from dycl.hcfg.graph import HCFG, Block, Cond, HostOp, Node, Return, SubDNN, raises, walk
from dycl.hcfg.state import PathFlags, PathState


class Paths:
    """Fork, split and merge of the states of a walk over every path (``hcfg.state``)."""

    def __init__(self, flags: PathFlags) -> None:
        self.flags = flags

    def split(self, test: cst.BaseExpression, states: list[PathState]) -> tuple[list[PathState], list[PathState]]:
        """The states that enter the then-branch and the else-branch of ``if test``."""
        return self.flags.split(test, states)

    def enter(self, states: list[PathState], tests: Iterable[cst.BaseExpression]) -> list[PathState]:
        """Fresh copies of ``states`` for a branch whose ``if`` tests are ``tests``; with no
        state, those tests are in code no path reaches (``PathFlags.skip``)."""
        if not states:
            self.flags.skip(tests)
        return [state.fork() for state in states]

    def join(self, states: list[PathState], live: frozenset[str]) -> list[PathState]:
        """``states`` at a join, merged where ``PathFlags`` allows (by signature over ``live``)."""
        return self.flags.merge(states, live)

    def kept_for(self, state: PathState, kept: list[PathState], live: frozenset[str]) -> PathState | None:
        """The state of ``kept`` (a ``join``'s result) that stands for ``state``: itself, or
        the one with its signature and its flags that the merge kept instead."""
        if any(other is state for other in kept):
            return state
        flags = sorted(flag for flag in self.flags.names if self.flags.pending[flag] > 0)  # as PathFlags.merge
        key = (tuple(state.concrete.get(flag) for flag in flags), state.signature(live))
        return next((other for other in kept
                     if (tuple(other.concrete.get(flag) for flag in flags), other.signature(live)) == key), None)


class PathInterpreter:
    """Runs ``graph`` over every path from a list of states (see the module note)."""

    def __init__(self, graph: HCFG, paths: Paths) -> None:
        self.graph = graph
        self.paths = paths
        self.live_after = graph.liveness.after

    def run(self, states: list[PathState]) -> list[PathState]:
        """Walk the whole body; the states that reach its end without returning."""
        return self.block(self.graph.body, states)

    def block(self, block: Block, states: list[PathState]) -> list[PathState]:
        for node in block:
            if not states:
                return []
            states = self.run_node(node, states)
        return states

    def run_node(self, node: Node, states: list[PathState]) -> list[PathState]:
        if isinstance(node, SubDNN):
            return self.run_sub_dnn(node, states)
        if raises(node):
            return self.run_raise(node, states)
        if isinstance(node, HostOp):
            return self.run_host_op(node, states)
        if isinstance(node, Cond):
            return self.run_cond(node, states)
        self.run_return(node, states)
        return []

    def run_cond(self, cond: Cond, states: list[PathState]) -> list[PathState]:
        then_in, else_in = self.paths.split(cond.test, states)
        after = []
        for block, entering, outcome in ((cond.then, then_in, True), (cond.orelse, else_in, False)):
            after += self.run_branch(cond, block, outcome, self.entering(cond, entering, outcome))
        return self.merge(after, self.live_after[id(cond)])

    def run_branch(self, cond: Cond, block: Block, outcome: bool, states: list[PathState]) -> list[PathState]:
        """Run one branch of ``cond`` (taken when its test is ``outcome``) on forks of ``states``."""
        return self.block(block, self.paths.enter(states, (n.test for n in walk(block) if isinstance(n, Cond))))

    # -- override points ------------------------------------------------------------------------

    def run_sub_dnn(self, sub: SubDNN, states: list[PathState]) -> list[PathState]:
        return states

    def run_host_op(self, op: HostOp, states: list[PathState]) -> list[PathState]:
        return states

    def run_raise(self, op: HostOp, states: list[PathState]) -> list[PathState]:
        """A host ``raise``: the paths that reach it end there."""
        return []

    def entering(self, cond: Cond, states: list[PathState], outcome: bool) -> list[PathState]:
        """The states that go into the branch of ``cond`` taken when its test is ``outcome``
        (``states``: those ``Paths.split`` sends there)."""
        return states

    def run_return(self, ret: Return, states: list[PathState]) -> None:
        """The paths of ``states`` end here, returning ``ret.value``."""

    def merge(self, states: list[PathState], live: frozenset[str]) -> list[PathState]:
        return self.paths.join(states, live)


__all__ = ["PathInterpreter", "Paths"]
