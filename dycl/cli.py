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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dycl", description="Compile PyTorch networks with "
                                     "data-dependent control flow.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    commands = parser.add_subparsers(dest="command", required=True)

    compile_cmd = commands.add_parser("compile", help="compile MODEL into an artifact directory")
    compile_cmd.add_argument("model", help="a zoo module (models.skipnet_rnn) or pkg.mod:factory")
    compile_cmd.add_argument("--backend", default="onnxruntime", choices=["onnxruntime", "torch"])
    compile_cmd.add_argument("--out", required=True, type=Path)

    check_cmd = commands.add_parser("check", help="measure eta/delta against eager PyTorch")
    check_cmd.add_argument("model")
    check_cmd.add_argument("-n", type=int, default=100, help="number of inputs (seeds 0..n-1)")
    check_cmd.add_argument("--backend", default="onnxruntime", choices=["onnxruntime", "torch"])
    check_cmd.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    check_cmd.add_argument("--no-traced", action="store_true", help="skip the traced baseline")

    show_cmd = commands.add_parser("show", help="summarise an artifact and draw its HCFG")
    show_cmd.add_argument("directory", type=Path)
    show_cmd.add_argument("--picture", type=Path, help="where to write the HCFG picture (default DIR/hcfg.png)")

    args = parser.parse_args(argv)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return {"compile": _compile, "check": _check, "show": _show}[args.command](args)
    except Exception as exc:  # noqa: BLE001 - one clear line unless --debug
        if args.debug:
            traceback.print_exc()
        else:
            first = str(exc).splitlines()[0] if str(exc) else ""
            print(f"dycl: error: {type(exc).__name__}: {first}", file=sys.stderr)
        return 1


def _compile(args) -> int:
    spec = resolve(args.model)
    compiled = dycl.compile(spec.model, spec.example, backend=args.backend)
    target = compiled.save(args.out)
    stats = compiled.stats
    print(f"{spec.name}: {stats['sub_dnns']} sub-DNNs ({stats['unique_compiled']} compiled), "
          f"{stats['conditions']} conditions -> {target}")
    return 0


def _check(args) -> int:
    spec = resolve(args.model)
    compiled = dycl.compile(spec.model, spec.example, backend=args.backend)
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
        print(f"input      {spec['name']}: {spec['dtype']} {spec['shape']}")
    print(f"sub-DNNs   {len(manifest['sub_dnns'])} variants in {len(files)} files")
    layout_file = directory / "hcfg.json"
    if layout_file.is_file():
        from hcfg.draw import draw_layout

        picture = args.picture or directory / "hcfg.png"
        draw_layout(json.loads(layout_file.read_text()), str(picture))
        print(f"picture    {picture}")
    return 0
