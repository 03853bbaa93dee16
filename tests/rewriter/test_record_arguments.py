"""Golden: an argument and a return value holding records (``dycl.model.records``) at the
rewritten function's boundary. The argument becomes one input per array and is built once,
first (forward may update it in place, so every read is of that one object); a return holding
records gives its arrays from the compiled code and the plain form to the host. Eager
equivalence on both paths: ``tests/compile/test_boundary_records.py``."""

from __future__ import annotations

import dycl
from dycl.model.library import object_output
from tests.compile.test_boundary_records import Streaming, _chunks, _memory
from tests.rewriter.golden import golden


def _source(returns: bool) -> str:
    model = Streaming().eval()
    passed = {"chunk": _chunks(1)[0], "memory": _memory(1)}
    form = object_output(model, passed) if returns else None
    result = dycl.rewriter.rewrite(model, example=passed, returns=form)
    return result.locations.strip(result.source).strip() + "\n"


def test_an_argument_holding_a_record_is_one_input_per_array_built_first():
    assert _source(returns=False) == golden("""
        def forward(self, chunk, memory_total, memory_last) -> Step:
            memory = memory_structure(memory_total, memory_last)
            h = self.proj(chunk)
            if h.mean() > 0:
                total = memory.total + h.sum(1)
            else:
                total = h.sum(1)
            return Step(total.softmax(-1), Memory(total, h[:, -1], memory.device))
    """)


def test_a_return_holding_records_gives_its_arrays_and_the_plain_form():
    plain = ("{'record': 'Step', 'fields': {'scores': out, 'memory': {'record': 'Memory', "
             "'fields': {'total': out_1, 'last': out_2, 'device': 'cpu'}}}}")
    assert [line.strip() for line in _source(returns=True).splitlines()[-2:]] == [
        "out, out_1, out_2 = _dycl_leaves(Step(total.softmax(-1), Memory(total, h[:, -1], memory.device)))",
        f"return {plain}"]
