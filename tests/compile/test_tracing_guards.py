"""``hcfg.tracing_guards``: a library decision behind ``not is_tracing(...) and`` is one the
exporter's trace skips; any other decision is still refused."""

from __future__ import annotations

import textwrap

from dycl.hcfg.tracing_guards import skipped_when_tracing
from dycl.rewriter.errors import SourceLocation

LIBRARY = textwrap.dedent('''\
    def packed(mask):
        if not is_tracing(mask) and (mask[:, -1] == 0).all():
            return None
        return mask


    def skip_mask(padding_mask):
        if (
            not (is_torchdynamo_exporting() or (padding_mask is not None and is_tracing(padding_mask)))
            and (padding_mask is None or padding_mask.all())
        ):
            return True
        return False


    def unguarded(x):
        if x.all() and not is_tracing(x):
            return x
        if not torch.compiler.is_compiling() and x.any():
            return x
        return -x


    def early_exit(padding_mask, q_length):
        if is_torchdynamo_exporting() or (padding_mask is not None and is_tracing(padding_mask)):
            return False
        if q_length == 1 and padding_mask.all():
            return True
        for row in padding_mask:
            if row.any():
                return True
        return False


    def not_an_exit(mask):
        if is_tracing(mask):
            mask = mask + 1
        if not is_tracing(mask):
            return None
        if mask.all():
            return True

        def inner(m):
            return m.any()
        return inner
''')


def test_only_decisions_after_a_tracing_guard_are_skipped(tmp_path):
    path = tmp_path / "library.py"
    path.write_text(LIBRARY)

    def skipped(line: int) -> bool:
        return skipped_when_tracing(SourceLocation(str(path), line))

    assert skipped(2)  # the guard and the decision on one line
    assert skipped(10)  # a multi-line test, the guard nested in `not (... or (... and is_tracing(m)))`
    assert not skipped(9)  # the guard's own line reads no tensor
    assert not skipped(17)  # the decision comes before the guard
    assert not skipped(19)  # dynamo's predicate is false while torch.onnx traces
    assert not skipped(4) and not skipped(1)
    assert skipped(27) and skipped(30)  # after an early exit on tracing, in a nested block too
    assert not skipped(25)  # the exit's own test
    assert not skipped(40)  # the `if` does not exit; the exit's test is `not is_tracing`
    assert not skipped(44)  # a nested function runs later: no exit of its own
    assert not skipped_when_tracing(None)
    assert not skipped_when_tracing(SourceLocation(str(tmp_path / "missing.py"), 2))
