"""Differential fuzzing of dycl: random control-flow programs, compiled vs eager.

``python -m dycl.fuzz --n 1000 --seed 0`` generates programs (:mod:`dycl.fuzz.generator`),
writes and imports them (:mod:`dycl.fuzz.loader`), compiles and compares each one
(:mod:`dycl.fuzz.runner`), shrinks failures (:mod:`dycl.fuzz.shrink`) and writes them as
pytest regression files (:mod:`dycl.fuzz.regression`).
"""
