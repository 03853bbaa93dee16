"""torch's ExportDB examples (``torch/_export/db/examples`` in the installed torch),
compiled unmodified with their example arguments and compared with eager on the
example and on inputs of the same shapes with other values, in-process and as a
torch-free host. None may be wrong; the ones known to pass must pass (the full
table: ``python benchmarks/realworld.py --host``)."""

from __future__ import annotations

import pytest

from tests.realworld.corpus import exportdb_cases, run_case

CASES = exportdb_cases()
if not CASES:
    pytest.skip("this torch ships no ExportDB examples", allow_module_level=True)

FAST = {"static_if", "dynamic_shape_if_guard", "optional_input", "fn_with_kwargs", "cond_operands",
        "dynamic_shape_round"}
# The rest are refused with UnsupportedError at their line (sound; coverage to win back): assume_constant_result
# and constrain_as_size_example (.item() inside a library forward traced as one graph), model_attr_mutation
# (module state written in forward). None may crash.
KNOWN_PASS = {
    "autograd_function", "class_method", "cond_branch_class_method", "cond_branch_nested_function",
    "cond_branch_nonlocal_variables", "cond_closed_over_variable", "cond_operands", "cond_predicate",
    "constrain_as_value_example", "decorator", "dictionary", "dynamic_shape_assert", "dynamic_shape_constructor",
    "dynamic_shape_if_guard", "dynamic_shape_map", "dynamic_shape_round", "dynamic_shape_slicing",
    "dynamic_shape_view", "fn_with_kwargs", "list_contains", "list_unpack", "nested_function",
    "null_context_manager", "optional_input", "pytree_flatten", "scalar_output", "specialized_attribute",
    "static_for_loop", "static_if", "tensor_setattr", "type_reflection_method", "unsupported_operator",
    "user_input_mutation",
}


@pytest.mark.parametrize("case", [pytest.param(c, marks=[] if c.name in FAST else [pytest.mark.slow], id=c.name)
                                  for c in CASES])
def test_exportdb_example_is_never_wrong(case, tmp_path):
    outcome = run_case(case, tmp_path)
    assert outcome.status in ("pass", "clear error"), outcome.detail
    if case.name in KNOWN_PASS:
        assert outcome.status == "pass", outcome.detail
        assert outcome.checked >= 2 and outcome.host_checked == outcome.checked
