"""What a host whose control flow runs inside one graph reports in place of its own conditions.

A host lowered to one graph (``dycl.backends.single_graph``) calls one sub-DNN and picks the return
of the path it took: its own ``if`` lines are that pick, not the model's conditions. The graph
outputs, beside the path, a vector with one entry per condition of the model's HCFG (program
order, as ``HCFG.conditions`` lists them): 1 where the call found it true, 0 false, -1 not reached.
``Decisions`` says which local of the emitted method holds that vector after the call, each
condition's ``where`` and ``test`` (as the host form's ``FORWARD_LINES`` has them) and the
model's control flow as a skeleton (``skeleton``: its sub-DNN calls, conditions and returns), from
which ``replay`` tells the conditions visited (in visit order) and the sub-DNNs run, as the host
form's line tracer (``dycl.harness.coverage``) records them. The host carries it as
``FORWARD_DECISIONS`` (``to_json``), so a loaded artifact reports what the compiled model does.

Guarantees: ``replay`` raises ``ValueError`` where the vector disagrees with the skeleton (a
condition reached without an outcome, or an outcome for one the path does not reach): coverage is
never made up."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

#: a skeleton node: ["call", sub-DNN index], ["if", condition number, then, orelse] or ["return"]
Skeleton = list[Any]


@dataclass(frozen=True)
class Decisions:
    """See the module docstring. ``code``: the user's source line of each condition, known in the
    compiling process only (a host's table keeps ``where`` and ``test``, as ``FORWARD_LINES`` does)."""

    variable: str
    conditions: tuple[tuple[str, str], ...]
    skeleton: tuple[Skeleton, ...]
    code: tuple[str, ...] = field(default=(), compare=False)

    @property
    def sub_dnns(self) -> list[int]:
        """The model's sub-DNNs, in order."""
        return sorted({node[1] for node in _nodes(self.skeleton) if node[0] == "call"})

    def replay(self, outcomes: Sequence[int]) -> tuple[tuple[tuple[int, bool], ...], frozenset[int]]:
        """The conditions a call visited with their outcomes (visit order) and the sub-DNNs it ran,
        from the graph's vector ``outcomes``."""
        if len(outcomes) != len(self.conditions):
            raise ValueError(f"the graph reported {len(outcomes)} condition outcomes for {len(self.conditions)}")
        visited: list[tuple[int, bool]] = []
        ran: set[int] = set()

        def run(block: Sequence[Skeleton]) -> bool:  # whether it returned
            for node in block:
                if node[0] == "call":
                    ran.add(node[1])
                elif node[0] == "return":
                    return True
                else:
                    value = int(outcomes[node[1]])
                    if value not in (0, 1):
                        raise ValueError(f"condition {node[1]} was reached but the graph reports no outcome")
                    visited.append((node[1], bool(value)))
                    if run(node[2] if value else node[3]):
                        return True
            return False

        run(self.skeleton)
        reported = {number for number, value in enumerate(outcomes) if int(value) != -1}
        if reported != {number for number, _ in visited}:
            raise ValueError(f"the graph reports outcomes of conditions {sorted(reported)}, "
                             f"the path it took visits {sorted(number for number, _ in visited)}")
        return tuple(visited), frozenset(ran)

    def to_json(self) -> dict[str, Any]:
        return {"variable": self.variable, "conditions": [list(c) for c in self.conditions],
                "skeleton": list(self.skeleton)}

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> Decisions:
        return cls(value["variable"], tuple((where, test) for where, test in value["conditions"]),
                   tuple(value["skeleton"]))


def _nodes(block: Sequence[Skeleton]) -> list[Skeleton]:
    found = []
    for node in block:
        found.append(node)
        if node[0] == "if":
            found += _nodes(node[2]) + _nodes(node[3])
    return found


__all__ = ["Decisions", "Skeleton"]
