"""``python -m dycl``: compile, check and inspect models from the command line."""

from __future__ import annotations

import argparse
import json
import sys
import traceback
import warnings
from pathlib import Path

import dycl
from dycl.harness import check
from dycl.zoo import resolve


def _backend_options(args: argparse.Namespace) -> dict[str, int]:
    return {} if args.tune_trials is None else {"tune_trials": args.tune_trials}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dycl", description="Compile PyTorch networks with "
                                     "data-dependent control flow.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    commands = parser.add_subparsers(dest="command", required=True)

    compile_cmd = commands.add_parser("compile", help="compile MODEL into an artifact directory")
    compile_cmd.add_argument("model", help="a zoo module (models.skipnet_rnn) or pkg.mod:factory")
    compile_cmd.add_argument("--backend", default="onnxruntime", choices=["onnxruntime", "tvm", "torch"])
    compile_cmd.add_argument("--out", required=True, type=Path)
    compile_cmd.add_argument("--tune-trials", type=int, help="tvm: MetaSchedule trials per distinct kernel")

    check_cmd = commands.add_parser("check", help="measure eta/delta against eager PyTorch")
    check_cmd.add_argument("model")
    check_cmd.add_argument("-n", type=int, default=100, help="number of inputs (seeds 0..n-1)")
    check_cmd.add_argument("--backend", default="onnxruntime", choices=["onnxruntime", "tvm", "torch"])
    check_cmd.add_argument("--tune-trials", type=int, help="tvm: MetaSchedule trials per distinct kernel")
    check_cmd.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    check_cmd.add_argument("--no-traced", action="store_true", help="skip the traced baseline")

    show_cmd = commands.add_parser("show", help="summarise an artifact and draw its HCFG")
    show_cmd.add_argument("directory", type=Path)
    show_cmd.add_argument("--picture", type=Path, help="where to write the HCFG picture (default DIR/hcfg.png)")

    zoo_cmd = commands.add_parser("zoo", help="check every zoo model; print (or write into README) the table")
    zoo_cmd.add_argument("-n", type=int, default=100)
    zoo_cmd.add_argument("--readme", type=Path, help="replace the table between the zoo-table markers in this file")

    args = parser.parse_args(argv)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return {"compile": _compile, "check": _check, "show": _show, "zoo": _zoo}[args.command](args)
    except Exception as exc:  # noqa: BLE001 - one clear line unless --debug
        if args.debug:
            traceback.print_exc()
        else:
            first = str(exc).splitlines()[0] if str(exc) else ""
            print(f"dycl: error: {type(exc).__name__}: {first}", file=sys.stderr)
        return 1


def _compile(args) -> int:
    spec = resolve(args.model)
    compiled = dycl.compile(spec.model, spec.example, backend=args.backend, **_backend_options(args))
    target = compiled.save(args.out)
    stats = compiled.stats
    print(f"{spec.name}: {stats['sub_dnns']} sub-DNNs ({stats['unique_compiled']} compiled), "
          f"{stats['conditions']} conditions -> {target}")
    return 0


def _check(args) -> int:
    spec = resolve(args.model)
    compiled = dycl.compile(spec.model, spec.example, backend=args.backend, **_backend_options(args))
    inputs = [spec.sample(seed) for seed in range(args.n)]
    report = check(spec.model, compiled, inputs, postprocess=spec.postprocess, traced=not args.no_traced)
    print(f"# {spec.name} on {args.backend}")
    print(report.table())
    if args.json:
        print(json.dumps({"model": spec.name, "backend": args.backend, **report.to_json()}))
    return 0


def _show(args) -> int:
    directory: Path = args.directory
    compiled = dycl.load(directory)
    manifest = compiled.manifest
    files = sorted({entry["file"] for entry in manifest["sub_dnns"].values()})
    print(f"model      {manifest['model']}")
    print(f"backend    {manifest['backend']}   (dycl {manifest['dycl_version']})")
    for spec in manifest["inputs"]:
        shape = ", ".join(str(dim) for dim in spec["shape"])  # a symbolic dim by its name
        print(f"input      {spec['name']}: {spec['dtype']} [{shape}]")
    print(f"sub-DNNs   {len(manifest['sub_dnns'])} variants in {len(files)} files")
    layout_file = directory / "hcfg.json"
    if layout_file.is_file():
        from hcfg.draw import draw_layout

        picture = args.picture or directory / "hcfg.png"
        draw_layout(json.loads(layout_file.read_text()), str(picture))
        print(f"picture    {picture}")
    return 0


START, END = "<!-- zoo-table:start -->", "<!-- zoo-table:end -->"


def _zoo(args) -> int:
    from models import ZOO

    lines = [f"Regenerate with `python -m dycl zoo -n {args.n} --readme README.md` ({args.n} inputs per model, "
             "ONNX Runtime backend).", "",
             "| model | paths | η | δ | traced η | traced δ | eager ms | dycl ms | speed-up |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name in ZOO:
        spec = resolve(name)
        compiled = dycl.compile(spec.model, spec.example)
        report = check(spec.model, compiled, [spec.sample(s) for s in range(args.n)], postprocess=spec.postprocess)
        traced_delta = "inf" if report.traced_delta is None or report.traced_delta == float("inf") else (
            f"{report.traced_delta:.2f}")
        row = (f"| {name.split('.')[-1]} | {report.paths} | {report.eta:.2f} | {report.delta:.2f} | "
               f"{report.traced_eta:.2f} | {traced_delta} | {report.eager_ms:.2f} | {report.compiled_ms:.2f} | "
               f"{report.eager_ms / report.compiled_ms:.2f}x |")
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
