"""``python -m dycl.fuzz``: differential fuzzing of dycl against eager PyTorch.

Prints one line per failing program (every program with ``-v``), per feature the number
of programs using it and how they ended, per refusal reason the programs refused for it and
the share refused (training mode aside), and, last, the summary line (with the share of
programs using each feature); exits 1 if some program was inconsistent or made dycl raise (other than
``UnsupportedError``), else 0.
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

from dycl.fuzz.campaign import run_campaign
from dycl.fuzz.generator import FEATURES, KNOWN_BUGS
from dycl.hcfg.levers import Levers

# regression files go to the checkout only when asked (--regressions tests/fuzz_regressions)
DEFAULT_REGRESSIONS = Path(tempfile.gettempdir()) / "dycl-fuzz-regressions"
BACKENDS = {"torch": ["torch"], "onnxruntime": ["onnxruntime"], "both": ["torch", "onnxruntime"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dycl.fuzz", description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100, help="number of programs to check (default 100)")
    parser.add_argument("--seed", type=int, default=0, help="campaign seed (default 0)")
    parser.add_argument("--backend", choices=sorted(BACKENDS), default="both", help="default: both")
    parser.add_argument("--regressions", type=Path, default=DEFAULT_REGRESSIONS,
                        help="where shrunk failures (inconsistencies and compile errors, never refusals) are "
                        f"written as pytest files (default {DEFAULT_REGRESSIONS}: outside the checkout; "
                        "give tests/fuzz_regressions to add them to the suite)")
    parser.add_argument("--out", type=Path, help="where generated programs are written (default: a temporary "
                        "directory, removed at the end)")
    parser.add_argument("--exclude", default="", help="comma-separated features not to generate ('known': those "
                        "with a known dycl bug): " + "; ".join(f"{k} ({v})" for k, v in FEATURES.items()))
    parser.add_argument("--xfail", action="store_true", help="mark the regression tests written as strict xfail "
                        "(known bugs that keep the suite green until they are fixed)")
    parser.add_argument("--max-shrinks", type=int, default=10, help="shrink the first N failures, and up to N more "
                        "with an error message not seen before (default 10)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds allowed per compile (default 300)")
    parser.add_argument("--levers", default="", help="comma-separated compile-time levers (dycl.hcfg.levers.Levers) "
                        "to compile every program with, e.g. single_graph=on or merge_into_producers=false")
    parser.add_argument("-v", "--verbose", action="store_true", help="print each program's result")
    args = parser.parse_args(argv)
    try:
        levers = levers_of(args.levers)
    except ValueError as error:
        parser.error(str(error))
    names = {name.strip() for name in args.exclude.split(",") if name.strip()}
    if "known" in names:
        names = (names - {"known"}) | set(KNOWN_BUGS)
    exclude = frozenset(names)
    unknown = exclude - set(FEATURES)
    if unknown:
        parser.error(f"unknown features {sorted(unknown)}; known: {', '.join(FEATURES)}")

    _quiet_onnxruntime()
    out_dir = args.out or Path(tempfile.mkdtemp(prefix="dycl-fuzz-"))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            summary = run_campaign(args.n, args.seed, BACKENDS[args.backend], out_dir, args.regressions,
                                   exclude=exclude, verbose=args.verbose, max_shrinks=args.max_shrinks,
                                   timeout=args.timeout, xfail=args.xfail, echo=lambda line: print(line, flush=True),
                                   levers=levers)
    finally:
        if args.out is None:
            shutil.rmtree(out_dir, ignore_errors=True)
    if summary.programs:
        print(f"fuzz: {summary.check_seconds / summary.programs:.3f} s per program checking "
              f"({summary.seconds / summary.programs:.3f} s per program in all, {summary.shrink_seconds:.1f} s "
              f"shrinking {sum(f.shrunk is not None for f in summary.failures)} of {len(summary.failures)} failures)")
        written = sorted({str(f.regression) for f in summary.failures if f.regression})
        for path in written:
            print(f"fuzz: regression test {path}")
    for line in summary.feature_lines() + summary.refusal_lines():
        print(line)
    print(summary.line(), flush=True)
    return 1 if summary.failed else 0


def levers_of(text: str) -> Levers | None:
    """The ``Levers`` that ``--levers`` names (``single_graph=on,reuse_identical=false``); None for
    none named (``dycl.compile``'s default). Raises ``ValueError`` naming an unknown lever or value."""
    pairs = [item.strip() for item in text.split(",") if item.strip()]
    if not pairs:
        return None
    fields = {field.name: field.type for field in dataclasses.fields(Levers)}
    chosen: dict[str, bool | str] = {}
    for pair in pairs:
        name, _, value = pair.partition("=")
        name, value = name.strip(), value.strip()
        if name not in fields:
            raise ValueError(f"--levers: unknown lever {name!r}; known: {', '.join(fields)}")
        if fields[name] in (bool, "bool"):
            if value.lower() not in ("true", "false", "on", "off", "1", "0"):
                raise ValueError(f"--levers: {name} takes true or false, not {value!r}")
            chosen[name] = value.lower() in ("true", "on", "1")
        else:
            chosen[name] = value
    return Levers(**chosen)


def _quiet_onnxruntime() -> None:
    """ONNX Runtime logs failed runs to stderr itself; the fuzzer reports them, so keep only fatal messages."""
    try:
        import onnxruntime
    except ImportError:  # pragma: no cover - the torch backend alone does not need it
        return
    onnxruntime.set_default_logger_severity(4)


if __name__ == "__main__":
    sys.exit(main())
