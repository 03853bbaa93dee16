"""``make demo``: compile a zoo model, run its standalone host without torch, report.

    python -m dycl.demo [MODEL] [--out DIR]
"""

from __future__ import annotations

import argparse
import tempfile
import warnings
from pathlib import Path

import dycl
from dycl.harness import check
from dycl.harness.testing_host import run_host_without_torch
from dycl.hostgen.names import FORWARD
from dycl.zoo import resolve


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default="models.skipnet_rnn")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("-n", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3, help="timed calls per input (0 skips timing)")
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help="progress bars on stderr (default: only when stderr is a terminal)")
    args = parser.parse_args(argv)
    with warnings.catch_warnings():  # torch.onnx's export chatter, for this run only
        warnings.simplefilter("ignore")
        spec = resolve(args.model)
        compiled = dycl.compile(spec.model, spec.example, progress=args.progress)
        stats = compiled.stats
        print(f"# {spec.name}: compiled {stats['sub_dnns']} sub-DNNs ({stats['unique_compiled']} distinct) and "
              f"{stats['conditions']} conditions in {sum(stats['seconds'].values()):.1f} s")
        out = args.out or Path(tempfile.mkdtemp(prefix="dycl-demo-"))
        artifact = compiled.save(out)
        print(f"# standalone artifact: {artifact} ({', '.join(sorted(p.name for p in artifact.iterdir())[:4])}, ...)")

        host_start = compiled.host_source.index(f"    def {FORWARD}(")
        print(f"# the generated host (first lines of {FORWARD}):")
        print("\n".join(compiled.host_source[host_start:].splitlines()[:14]))

        inputs = [spec.sample(seed) for seed in range(args.n)]
        standalone = run_host_without_torch(artifact, spec.model, inputs, atol=1e-4)
        print(f"# host.py in a process without torch or dycl, {args.n} inputs ...", flush=True)
        print(f"# host.py in a process without torch or dycl: {standalone['checked']} inputs, "
              f"{len(standalone['problems'])} mismatches")
        print("# harness report (eager PyTorch vs dycl on ONNX Runtime vs the traced baseline):")
        print("# timing eager and compiled input by input, taking turns (dycl.harness.timing)", flush=True)
        report = check(spec.model, compiled, inputs, postprocess=spec.postprocess, repeat=args.repeat,
                       progress=args.progress)
        print(report.table())


if __name__ == "__main__":
    main()
