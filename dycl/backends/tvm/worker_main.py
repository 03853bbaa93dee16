"""The main function of a TVM build/tuning worker process (``workers._WORKER`` runs it).

Assumes a request file written by ``workers._run_workers``; guarantees one reply file per
job (or ``tune.pkl``) and a progress line on stdout as each finishes. It is its own module
because it needs both ``workers`` (builds) and ``tuning`` (which imports ``workers``)."""

from __future__ import annotations

import pickle
from pathlib import Path

from dycl.backends.tvm.tuning import tune_jobs
from dycl.backends.tvm.workers import MARK, build_job


def serve(request_path: str, reply_dir: str) -> None:
    """A worker's main: run the request (``("build" | "tune", jobs, options)``),
    one reply file per job, a progress line on stdout as each finishes."""
    kind, jobs, options = pickle.loads(Path(request_path).read_bytes())
    if kind == "tune":
        summary = tune_jobs(jobs, options)
        Path(reply_dir, "tune.pkl").write_bytes(pickle.dumps(summary))
        print(MARK + "tune", flush=True)
        return
    for index, job in jobs:
        result = build_job(job, options)
        Path(reply_dir, f"{index}.pkl").write_bytes(pickle.dumps(result))
        print(MARK + str(index), flush=True)


__all__ = ["serve"]
