"""Stands for an installed package (transformers-style attention) in the shape-guard tests:
``tests/compile/test_shape_guards.py`` makes dycl treat this folder as library code,
which is traced, not rewritten."""
