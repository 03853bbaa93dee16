"""Run the real-world corpus (``tests/realworld/corpus.py``) and write its results table.

    python benchmarks/realworld.py [--host] [--group GROUP ...] [--only NAME ...] [--markdown PATH] [--json PATH]

``--group moe`` runs the mixture-of-experts group alone (``tests/realworld/moe_corpus.py``).

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
from tests.realworld.moe_corpus import moe_cases, moe_missing  # noqa: E402

GROUPS = ("transformers", "timm", "exportdb", "moe")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", action="store_true", help="also run each artifact without torch")
    parser.add_argument("--only", nargs="*", help="case names to run (default: all)")
    parser.add_argument("--group", nargs="*", choices=GROUPS, help="groups to run (default: all)")
    parser.add_argument("--markdown", type=Path, help="default: realworld.md (realworld-GROUP.md with --group)")
    parser.add_argument("--json", type=Path, help="default: realworld.json (realworld-GROUP.json with --group)")
    options = parser.parse_args()
    stem = "realworld" + "".join(f"-{group}" for group in options.group or ())
    options.markdown = options.markdown or Path(__file__).with_name(f"{stem}.md")
    options.json = options.json or Path(__file__).with_name(f"{stem}.json")
    cases = [c for c in all_cases() + moe_cases() if (not options.only or c.name in options.only)
             and (not options.group or c.group in options.group)]
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
    command = "python benchmarks/realworld.py" + (" --host" if options.host else "")
    command += "".join(f" --group {group}" for group in options.group or ())
    lines = ["# Real-world corpus", "", f"`{command}`", "",
             "Totals: " + ", ".join(f"{counts[s]} {s}" for s in STATUSES) + f" (of {len(rows)})", ""]
    missing = timm_unavailable() if not options.group or "timm" in options.group else None
    if missing:
        lines += [f"timm cases not run: `{missing}`", ""]
    if moe_missing() and (not options.group or "moe" in options.group):
        lines += [f"MoE packages not installed (their cases not run): {', '.join(moe_missing())}", ""]
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
