"""``python -m dycl``: compile, check and inspect models from the command line.

Everything the command is given is checked before any compilation starts (the
model spec, the backend against ``--out``, the output directory); an
``UnsupportedError`` is printed whole (construct, source excerpt, hint); any
other error is one line unless ``--debug`` (accepted anywhere on the line).
Exit status: 0 success, 1 error, 2 bad usage, 3 ``check --require-coverage``
found a condition that did not take both outcomes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
import warnings
from pathlib import Path
from typing import Any

import dycl
from dycl.artifact import verify
from dycl.harness import check
from dycl.hostgen.manifest import MANIFEST_FILE
from dycl.rewriter.errors import UnsupportedError
from dycl.zoo import resolve

BACKENDS = ("onnxruntime", "tvm", "torch")
STANDALONE = ("onnxruntime", "tvm")
COVERAGE_EXIT = 3

_COMPILE_EXAMPLES = """examples:
  python -m dycl compile models.blockdrop --out build/blockdrop
  python -m dycl compile mypkg.nets:build --out build/net --dynamic all
  python -m dycl compile models.sdn_vgg19 --backend tvm --tune-trials 8 --out build/vgg
  python -m dycl compile models.ranet --out build/ranet --dynamic '{"x": {"2": "h", "3": "w"}}' --force
"""
_CHECK_EXAMPLES = """examples:
  python -m dycl check models.caption_resnext -n 100 --json
  python -m dycl check mypkg.nets:build -n 30 --require-coverage
  python -m dycl check models.skipnet_rnn --backend torch --no-traced --repeat 1
  python -m dycl check models.blockdrop -n 20 --profile   # time per sub-DNN
"""
_SHOW_EXAMPLES = """examples:
  python -m dycl show build/blockdrop              # summary only; writes nothing
  python -m dycl show build/blockdrop --picture /tmp/blockdrop.svg
"""
_ZOO_EXAMPLES = """examples:
  python -m dycl zoo -n 100 --readme README.md     # on a quiet machine: the table is timed
  python -m dycl zoo -n 10 --models sdn_vgg19,ranet
"""
MODEL_HELP = ("a zoo module with build()/sample()/postprocess (models.skipnet_rnn), or pkg.mod:factory naming a "
              "function that returns (model, example_input)")


def _formatter(prog: str) -> argparse.HelpFormatter:
    return argparse.RawDescriptionHelpFormatter(prog, max_help_position=32)


def _compile_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--backend", default="onnxruntime", choices=BACKENDS,
                        help="what compiles each sub-DNN (default: onnxruntime; torch runs in-process only and "
                             "cannot be saved)")
    parser.add_argument("--dynamic", default="batch", metavar="SPEC",
                        help="symbolic input dims: batch (default), all, none, or JSON {input: {axis: name}} "
                             "such as '{\"x\": {\"2\": \"h\"}}' (see dycl.model.dynamic)")
    parser.add_argument("--no-optimize", action="store_true",
                        help="skip the HCFG optimisations (constant hoisting, merging into producers)")
    parser.add_argument("--tune-trials", type=int, metavar="N",
                        help="tvm: MetaSchedule trials per distinct kernel (tuning records are cached)")
    parser.add_argument("--backend-option", action="append", default=[], metavar="KEY=VALUE",
                        help="a backend option, repeatable; VALUE is read as JSON when it parses "
                             "(tvm: target=x86-64-v3, jobs=2, specialize=false, schedule=...)")
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help="progress bars (default: only when stderr is a terminal)")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m dycl", formatter_class=_formatter,
        description="Compile PyTorch networks with data-dependent control flow.",
        epilog="run `python -m dycl COMMAND --help` for each command's options and examples")
    parser.add_argument("--version", action="version", version=f"dycl {dycl.__version__}")
    parser.add_argument("--debug", action="store_true", help="show full tracebacks (accepted anywhere)")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    compile_cmd = commands.add_parser("compile", help="compile MODEL into an artifact directory",
                                      formatter_class=_formatter, epilog=_COMPILE_EXAMPLES,
                                      description="Compile MODEL and save the standalone artifact (host.py, "
                                                  "manifest.json, one file per distinct sub-DNN).")
    compile_cmd.add_argument("model", help=MODEL_HELP)
    compile_cmd.add_argument("--out", required=True, type=Path, metavar="DIR",
                             help="the artifact directory (must be empty or absent unless --force)")
    compile_cmd.add_argument("--force", action="store_true",
                             help="replace the artifact already in DIR (its listed files are removed first)")
    _compile_options(compile_cmd)

    check_cmd = commands.add_parser("check", help="measure η, δ, branch coverage and latency against eager",
                                    formatter_class=_formatter, epilog=_CHECK_EXAMPLES,
                                    description="Compile MODEL, run it and eager PyTorch on N inputs "
                                                "(sample(seed) for seeds 0..N-1) and report correctness, "
                                                "which condition outcomes the inputs exercised, and latency "
                                                "(median and IQR, warmed up, timed interleaved and by "
                                                "blocks; see dycl.harness.timing).")
    check_cmd.add_argument("model", help=MODEL_HELP)
    check_cmd.add_argument("-n", type=int, default=100, metavar="N", help="number of inputs (default 100)")
    check_cmd.add_argument("--repeat", type=int, default=3, metavar="R",
                           help="timed calls per input and contender; an input's time is the best (default 3; "
                                "0 skips timing)")
    check_cmd.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    check_cmd.add_argument("--no-traced", action="store_true", help="skip the traced baseline")
    check_cmd.add_argument("--profile", action="store_true",
                           help="also time each sub-DNN call through the host and print where the time goes")
    check_cmd.add_argument("--require-coverage", action="store_true",
                           help=f"exit with status {COVERAGE_EXIT} unless every condition took both outcomes")
    _compile_options(check_cmd)

    show_cmd = commands.add_parser("show", help="summarise an artifact and draw its HCFG (never runs host.py)",
                                   formatter_class=_formatter, epilog=_SHOW_EXAMPLES,
                                   description="Print an artifact's inputs and sub-DNNs from manifest.json; "
                                               "with --picture, draw its HCFG (hcfg.json) as SVG or PNG.")
    show_cmd.add_argument("directory", type=Path, help="an artifact directory written by compile")
    show_cmd.add_argument("--picture", type=Path, metavar="FILE",
                          help="draw the HCFG to FILE (.svg or .png; repeatable); nothing is written without it",
                          action="append", default=[])

    zoo_cmd = commands.add_parser("zoo", help="check every zoo model; print (or write into README) the table",
                                  formatter_class=_formatter, epilog=_ZOO_EXAMPLES,
                                  description="Run check on every zoo model with the ONNX Runtime backend and "
                                              "print a markdown table stating machine, threads and date.")
    zoo_cmd.add_argument("-n", type=int, default=100, metavar="N", help="inputs per model (default 100)")
    zoo_cmd.add_argument("--repeat", type=int, default=3, metavar="R", help="timed calls per input (default 3)")
    zoo_cmd.add_argument("--models", default="", metavar="A,B", help="comma-separated zoo names (default: all)")
    zoo_cmd.add_argument("--readme", type=Path, metavar="FILE",
                         help="replace the table between the zoo-table markers in FILE")
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    args = _parser().parse_args([a for a in argv if a != "--debug"])
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return {"compile": _compile, "check": _check, "show": _show, "zoo": _zoo}[args.command](args)
    except Exception as exc:  # noqa: BLE001 - a clear message unless --debug
        if debug:
            traceback.print_exc()
        elif isinstance(exc, UnsupportedError):
            print(f"dycl: error: UnsupportedError: {exc}", file=sys.stderr)
        else:
            first = str(exc).splitlines()[0] if str(exc) else ""
            print(f"dycl: error: {type(exc).__name__}: {first}", file=sys.stderr)
        return 1


def _compile_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for item in args.backend_option:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--backend-option {item!r}: expected KEY=VALUE")
        try:
            options[key] = json.loads(value)
        except json.JSONDecodeError:
            options[key] = value
    if args.tune_trials is not None:
        options["tune_trials"] = args.tune_trials
    if options and args.backend != "tvm":
        raise ValueError(f"backend {args.backend!r} takes no options, got {sorted(options)} (only --backend tvm "
                         "takes --tune-trials and --backend-option)")
    return {"backend": args.backend, "optimize": not args.no_optimize, "progress": args.progress,
            "dynamic": _dynamic(args.dynamic), **options}


def _dynamic(text: str) -> Any:
    named = {"batch": True, "all": "all", "none": False}
    if text in named:
        return named[text]
    try:
        spec = json.loads(text)
    except json.JSONDecodeError:
        raise ValueError(f"--dynamic {text!r}: expected batch, all, none or a JSON object "
                         "{input: {axis: name}}") from None
    if not isinstance(spec, dict):
        raise ValueError(f"--dynamic {text!r}: expected a JSON object {{input: {{axis: name}}}}")

    def axes(value: Any) -> Any:  # JSON object keys are strings; dycl.model.dynamic wants int axes
        return {int(axis): name for axis, name in value.items()} if isinstance(value, dict) else value

    return {key: axes(value) for key, value in spec.items()}


def _check_output(directory: Path, force: bool) -> None:
    """Refuse before compiling: a file in the way, an unwritable place, or an old artifact without --force."""
    if directory.exists() and not directory.is_dir():
        raise ValueError(f"--out {directory} is a file, not a directory")
    if directory.is_dir() and any(directory.iterdir()):
        if not force:
            raise ValueError(f"--out {directory} is not empty: pass --force to replace the artifact there, or "
                             "choose an empty directory (old and new files would otherwise mix)")
        if not (directory / MANIFEST_FILE).is_file():
            raise ValueError(f"--out {directory} is not empty and holds no dycl artifact (no {MANIFEST_FILE}): "
                             "--force replaces only an artifact; choose another directory")
    parent = next((p for p in [directory, *directory.parents] if p.exists()), Path("."))
    if not os.access(parent, os.W_OK):
        raise ValueError(f"--out {directory}: {parent} is not writable")


def _compile(args: argparse.Namespace) -> int:
    if args.backend not in STANDALONE:
        raise ValueError(f"backend {args.backend!r} runs only in-process and cannot be saved with --out; use "
                         f"--backend onnxruntime or tvm (or `check --backend {args.backend}`)")
    _check_output(args.out, args.force)
    kwargs = _compile_kwargs(args)
    spec = resolve(args.model)
    compiled = dycl.compile(spec.model, spec.example, **kwargs)
    target = compiled.save(args.out)  # replaces an old artifact atomically (dycl.artifact.write_artifact)
    stats = compiled.stats
    print(f"{spec.name}: {stats['sub_dnns']} sub-DNNs ({stats['unique_compiled']} compiled), "
          f"{stats['conditions']} conditions -> {target}")
    return 0


def _check(args: argparse.Namespace) -> int:
    kwargs = _compile_kwargs(args)
    spec = resolve(args.model)
    compiled = dycl.compile(spec.model, spec.example, **kwargs)
    inputs = [spec.sample(seed) for seed in range(args.n)]
    report = check(spec.model, compiled, inputs, postprocess=spec.postprocess, traced=not args.no_traced,
                   repeat=args.repeat, progress=args.progress)
    by_blocks = _block_timing(spec.model, compiled, inputs, args.repeat)
    print(f"# {spec.name} on {args.backend}")
    print(report.table())
    if by_blocks:
        print(_block_lines(by_blocks))
    for text in report.warnings:
        print(f"dycl: warning: {text}", file=sys.stderr)
    for text in report.noise:
        print(f"dycl: warning: timing noise: {text}", file=sys.stderr)
    if args.profile:
        from dycl.harness import positional_arguments
        from dycl.harness.profile import profile

        print(profile(compiled, [positional_arguments(item) for item in inputs]).table())
    if args.json:
        blocks_json = {f"{name}_blocks_ms": timing.median_ms for name, timing in by_blocks.items()}
        print(json.dumps({"model": spec.name, "backend": args.backend, **report.to_json(), **blocks_json}))
    if args.require_coverage and report.warnings:
        print(f"dycl: coverage: {report.coverage} conditions took both outcomes (--require-coverage)",
              file=sys.stderr)
        return COVERAGE_EXIT
    return 0


def _block_timing(model: Any, compiled: Any, inputs: list[Any], rounds: int) -> dict[str, Any]:
    """Eager and compiled timed by blocks (``dycl.harness.timing.blocks``; ``rounds`` 0: not timed)."""
    if not rounds:
        return {}
    from dycl.harness.timing import blocks
    from dycl.rewriter.arguments import positional_arguments

    return blocks({"eager": model, "compiled": compiled}, [positional_arguments(item) for item in inputs],
                  rounds=rounds)


def _block_lines(by_blocks: dict[str, Any]) -> str:
    from dycl.harness.timing import machine, taken

    eager, fast = by_blocks["eager"], by_blocks["compiled"]
    return "\n".join([f"by blocks: eager            {eager}",
                      f"by blocks: compiled         {fast}  ({eager.median_ms / fast.median_ms:.2f}x)",
                      f"timed on {machine()}; {taken()} (above: interleaved; by blocks: each on all inputs "
                      "back to back)"])


def _show(args: argparse.Namespace) -> int:
    # Reads data files only, after checking them: host.py is code and is never run here.
    directory: Path = args.directory
    manifest = verify(directory)
    files = sorted({entry.file for entry in manifest.sub_dnns.values()})
    print(f"model      {manifest.model}")
    print(f"backend    {manifest.backend}   (dycl {manifest.dycl_version})")
    for port in manifest.inputs:
        shape = ", ".join(str(dim) for dim in port.shape)  # a symbolic dim by its name
        print(f"input      {port.name}: {port.dtype} [{shape}]")
    print(f"sub-DNNs   {len(manifest.sub_dnns)} variants in {len(files)} files")
    if args.picture:
        from dycl.hcfg.draw import render_artifact

        for picture in args.picture:
            how = render_artifact(directory, picture)
            print(f"picture    {picture}   ({how})")
    return 0


START, END = "<!-- zoo-table:start -->", "<!-- zoo-table:end -->"


def _zoo_blocks(spec: Any, compiled: Any, args: argparse.Namespace) -> str:
    """The zoo row's two cells timed by blocks ("— | —" with ``--repeat 0``)."""
    by_blocks = _block_timing(spec.model, compiled, [spec.sample(s) for s in range(args.n)], args.repeat)
    if not by_blocks:
        return "— | —"
    return " | ".join(f"{t.median_ms:.2f} ({t.p25_ms:.2f}–{t.p75_ms:.2f})" for t in by_blocks.values())


def _zoo(args: argparse.Namespace) -> int:
    from dycl.harness.timing import machine, taken
    from dycl.zoo import zoo_hint

    try:
        from models import ZOO
    except ImportError as exc:
        raise ValueError(f"cannot import the zoo: {exc}{zoo_hint(exc)}") from None

    names = [f"models.{name}" for name in args.models.split(",")] if args.models else list(ZOO)
    unknown = [name.removeprefix("models.") for name in names if name not in ZOO]
    if unknown:  # before any work
        raise ValueError(f"--models: unknown zoo model(s) {', '.join(unknown)}; the zoo has "
                         f"{', '.join(name.removeprefix('models.') for name in ZOO)}")
    command = f"python -m dycl zoo -n {args.n} --readme README.md"
    timed = (f"{args.repeat} timed calls per input, `dycl.harness.timing`" if args.repeat else
             "not timed: `--repeat 0`, run the command on a quiet machine for the latency columns")
    lines = [f"Regenerate with `{command}` ({args.n} inputs per model, ONNX Runtime backend, {timed}). "
             f"Generated {taken()} on {machine()}; latency timed interleaved and by blocks "
             "(`dycl.harness.timing`).", "",
             "| model | paths | both outcomes | η | δ | traced η | traced δ | eager ms (IQR) | dycl ms (IQR) | "
             "eager ms by blocks | dycl ms by blocks |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name in names:
        spec = resolve(name)
        compiled = dycl.compile(spec.model, spec.example)
        report = check(spec.model, compiled, [spec.sample(s) for s in range(args.n)], postprocess=spec.postprocess,
                       repeat=args.repeat)

        def num(value: float | None) -> str:
            return "inf" if value is None or value == float("inf") else f"{value:.2f}"

        def ms(median: float, iqr: tuple[float, float]) -> str:
            return f"{median:.2f} ({iqr[0]:.2f}–{iqr[1]:.2f})" if args.repeat else "—"

        row = (f"| {name.split('.')[-1]} | {report.paths} | {report.coverage} | {report.eta:.2f} | "
               f"{num(report.delta)} | {num(report.traced_eta)} | {num(report.traced_delta)} | "
               f"{ms(report.eager_ms, report.eager_iqr_ms)} | {ms(report.compiled_ms, report.compiled_iqr_ms)} | "
               f"{_zoo_blocks(spec, compiled, args)} |")
        lines.append(row)
        print(row, flush=True)
    table = "\n".join(lines)
    if args.readme:
        text = args.readme.read_text()
        if START not in text or END not in text:
            raise ValueError(f"{args.readme} has no {START} ... {END} markers")
        head, rest = text.split(START, 1)
        _, tail = rest.split(END, 1)
        args.readme.write_text(f"{head}{START}\n{table}\n{END}{tail}")
        print(f"updated {args.readme}")
    return 0
