"""Run the real-world corpus (``tests/realworld/corpus.py``) and write its results table.

    python benchmarks/realworld.py [--host] [--only NAME ...] [--markdown PATH] [--json PATH]

Each case is compiled unmodified and compared with eager PyTorch; ``--host`` also
runs every passing case's saved artifact in a torch-free process. A row records
pass / clear error / crash / wrong and the first line of the error.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.realworld.corpus import STATUSES, all_cases, run_case, timm_unavailable  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", action="store_true", help="also run each artifact without torch")
    parser.add_argument("--only", nargs="*", help="case names to run (default: all)")
    parser.add_argument("--markdown", type=Path, default=Path(__file__).with_name("realworld.md"))
    parser.add_argument("--json", type=Path, default=Path(__file__).with_name("realworld.json"))
    options = parser.parse_args()
    cases = [c for c in all_cases() if not options.only or c.name in options.only]
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for case in cases:
            outcome = run_case(case, Path(scratch) if options.host else None)
            rows.append({"case": case.name, "group": case.group, "status": outcome.status,
                         "detail": outcome.detail, "paths": outcome.paths, "calls": outcome.checked,
                         "host_calls": outcome.host_checked, "seconds": round(outcome.seconds, 1)})
            print(f"{case.group:12} {case.name:40} {outcome.status:12} {outcome.seconds:6.1f}s {outcome.detail}",
                  flush=True)
    counts = Counter(row["status"] for row in rows)
    lines = ["# Real-world corpus", "", "`python benchmarks/realworld.py" + (" --host`" if options.host else "`"), "",
             "Totals: " + ", ".join(f"{counts[s]} {s}" for s in STATUSES) + f" (of {len(rows)})", ""]
    missing = timm_unavailable()
    if missing:
        lines += [f"timm cases not run: `{missing}`", ""]
    lines += ["| group | case | result | paths | calls | host calls | s | first line of the error |",
              "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        detail = row["detail"].replace("|", "\\|")
        lines.append(f"| {row['group']} | {row['case']} | {row['status']} | {row['paths']} | {row['calls']} | "
                     f"{row['host_calls']} | {row['seconds']} | {detail} |")
    options.markdown.write_text("\n".join(lines) + "\n")
    options.json.write_text(json.dumps(rows, indent=1) + "\n")
    print(" ".join(f"{s}={counts[s]}" for s in STATUSES))


if __name__ == "__main__":
    main()
