"""Golden before/after snippets of ``dycl.in_process.input_renaming`` (one behaviour each); the
eager-equivalence checks are in tests/soundness/test_input_mutation.py."""

from __future__ import annotations

import textwrap

import libcst as cst

from dycl.in_process.input_renaming import renamed_definition


def _renamed(source: str, names=("x",)) -> str | None:
    definition = cst.parse_module(textwrap.dedent(source)).body[0]
    renamed = renamed_definition(definition, names)
    return None if renamed is None else cst.Module([renamed]).code


def _same(actual: str | None, expected: str) -> None:
    assert actual == textwrap.dedent(expected).lstrip("\n").rstrip(" "), actual


def test_an_assignment_and_the_reads_after_it_get_a_fresh_name():
    _same(_renamed("""
        def forward(self, x):
            x.mul_(2)
            x = x + 1
            y = x * x
            return x, y
        """), """
        def forward(self, x):
            x.mul_(2)
            x_1 = x + 1
            y = x_1 * x_1
            return x_1, y
        """)


def test_branches_that_end_with_different_names_meet_in_one_join_name():
    _same(_renamed("""
        def forward(self, x):
            x.add_(1)
            if x.sum() > 0:
                x = self.fc(x)
            return torch.tanh(x)
        """), """
        def forward(self, x):
            x.add_(1)
            if x.sum() > 0:
                x_1 = self.fc(x)
                x_2 = x_1
            else:
                x_2 = x
            return torch.tanh(x_2)
        """)


def test_a_branch_that_returns_adds_no_join():
    _same(_renamed("""
        def forward(self, x):
            x.add_(1)
            if x.sum() > 0:
                x = x * 2
                return x
            return x - 1
        """), """
        def forward(self, x):
            x.add_(1)
            if x.sum() > 0:
                x_1 = x * 2
                return x_1
            return x - 1
        """)


def test_names_in_use_are_not_reused_and_other_names_are_left_alone():
    _same(_renamed("""
        def forward(self, x, x_1):
            x, h = x * 2, x_1.x
            return f(x=x, h=h)
        """), """
        def forward(self, x, x_1):
            x_2, h = x * 2, x_1.x
            return f(x=x_2, h=h)
        """)


def test_a_walrus_on_the_name_or_a_nested_function_renames_nothing():
    assert _renamed("""
        def forward(self, x):
            x.add_(1)
            y = (x := x * 2) + x
            return y
        """) is None
    assert _renamed("""
        def forward(self, x):
            def inner():
                return x
            x = x * 2
            return inner()
        """) is None


def test_a_body_that_never_assigns_the_name_is_returned_as_it_is():
    definition = cst.parse_module("def forward(self, x):\n    x.add_(1)\n    return x\n").body[0]
    assert renamed_definition(definition, ["x"]) is definition


def test_a_name_object_shared_by_a_target_and_a_read_is_renamed_by_its_place():
    """Inlined code may use one ``Name`` object twice (``x = x * 0.5``): the read keeps the value
    before the statement, the target gets the fresh name (found by the fuzzer: ``x_1 = x_1 * 0.5``)."""
    name = cst.Name("x")
    line = cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(name)], cst.BinaryOperation(
        name, cst.Multiply(), cst.Float("0.5")))])
    update = cst.parse_statement("x.add_(1)\n")
    definition = cst.parse_module("def forward(self, x):\n    return x\n").body[0]
    body = [update, line, *definition.body.body]
    definition = definition.with_changes(body=definition.body.with_changes(body=body))
    renamed = renamed_definition(definition, ["x"])
    assert cst.Module([renamed]).code == "def forward(self, x):\n    x.add_(1)\n    x_1 = x * 0.5\n    return x_1\n"
