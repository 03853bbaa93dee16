"""``hcfg.path_lengths``: which lists have a length fixed by the path, and which may follow data."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest
from dycl.hcfg.path_lengths import path_fixed_lengths


def lengths(source: str) -> frozenset[str]:
    return path_fixed_lengths([cst.parse_module(textwrap.dedent(source))])


def test_a_list_appended_to_under_ifs_has_a_path_length():
    assert lengths("""
        parts = []
        if x.sum() > 0:
            parts.append(x)
            parts.insert(0, x * 2)
        if parts and len(parts) > 1:
            y = torch.stack(parts)[0]
            parts[0] = y
    """) == {"parts"}


@pytest.mark.parametrize("change", [
    "parts.extend(x.unbind(0))",          # as many as the data's rows
    "parts += x.tolist()",                # a conversion's length
    "other = parts",                      # an alias may be extended
    "parts = [r for r in x.tolist()]",    # a comprehension's length
    "parts = x.tolist()",                 # a conversion
    "parts[1:] = x.tolist()",             # a slice write
    "parts = [*x]",                       # a starred display
    "for p in parts: pass",               # read by a loop the rewriter left
])
def test_a_list_whose_length_may_follow_data_is_left_out(change):
    assert lengths(f"parts = []\nparts.append(x)\n{change}\nif parts:\n    y = 1\n") == frozenset()
