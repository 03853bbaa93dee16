"""A module no test imports at module level: ``test_unsupported.ImportInside`` imports it inside
forward(), which dycl refuses (importing it would run its code)."""

SCALE = 2.0
