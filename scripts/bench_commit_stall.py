"""How long an exactly-once route's copy loop stops per transaction, by part: ``ferry bench`` with a
timing wrapper around the workers' :class:`ferry.worker.copying.committer.Committer`.

The bench's records/s swing with whatever else runs on the machine; the time the copy loop spends in
each commit does much less, and it is what a transaction costs the copy loop: while it commits,
nothing is copied. Each commit that committed a transaction is timed whole (the copy loop's stop) and
by part: the flush (every copy acknowledged), the offset-map segments, ``commit_transaction``, and
the rest (the source commit, mostly). Prints per run (system, workload, transaction interval) the
median and the 90th percentile of each, and the stop's share of the interval.

    python scripts/bench_commit_stall.py -- --systems ferry-eos-1w --transaction-intervals 0.1,0.25,1 \\
        --workloads 8x100:400000 --latency-seconds 0 --rounds 3

Everything after ``--`` goes to ``ferry bench`` as it is (``--workdir`` is added when absent). The
wrapper is a ``sitecustomize`` module put on the workers' ``PYTHONPATH``; it changes nothing they do.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

WRAPPER = """
import json, os, sys, time, importlib.abc, importlib.util

TARGET = "ferry.worker.copying.committer"
OUT = os.environ["FERRY_COMMIT_STALL_DIR"]


def _patch(module):
    committer = module.Committer
    config = next((a for a in sys.argv if a.endswith("-ferry.yaml")), "?")
    out = open(os.path.join(OUT, f"{os.getpid()}.jsonl"), "a", buffering=1)
    state = {}
    commit, commit_transaction, flush = committer.commit, committer._commit_transaction, committer.flush

    def timed_flush(self, timeout):
        started = time.perf_counter()
        remaining = flush(self, timeout)
        if state.get("in_transaction_commit"):
            state["flush"] = time.perf_counter() - started
        return remaining

    def timed_commit_transaction(self):
        writer = self._map_writer
        name = "write" if hasattr(writer, "write") else "write_and_wait"
        write = getattr(writer, name)

        def timed_write(*args, **kwargs):
            started = time.perf_counter()
            done = write(*args, **kwargs)
            state["segments"] = time.perf_counter() - started
            return done

        setattr(writer, name, timed_write)
        state["in_transaction_commit"] = True
        started = time.perf_counter()
        try:
            return commit_transaction(self)
        finally:
            state["transaction"] = time.perf_counter() - started
            state["in_transaction_commit"] = False
            delattr(writer, name)

    def timed_commit(self, *args, **kwargs):
        state.clear()
        started = time.perf_counter()
        done = commit(self, *args, **kwargs)
        if "transaction" in state:
            whole = time.perf_counter() - started
            flushed, segments = state.get("flush", 0.0), state.get("segments", 0.0)
            out.write(json.dumps({
                "config": config, "whole": whole, "flush": flushed, "segments": segments,
                "commit_transaction": state["transaction"] - flushed - segments,
                "rest": whole - state["transaction"],
            }) + "\\n")
        return done

    committer.flush = timed_flush
    committer._commit_transaction = timed_commit_transaction
    committer.commit = timed_commit


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != TARGET:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None:
            return None
        loader = spec.loader

        class _Loader(importlib.abc.Loader):
            def create_module(self, spec):
                return loader.create_module(spec)

            def exec_module(self, module):
                loader.exec_module(module)
                _patch(module)

        spec.loader = _Loader()
        return spec


sys.meta_path.insert(0, _Finder())
"""

PARTS = ("whole", "flush", "segments", "commit_transaction", "rest")


def _interval_of(config: str) -> float | None:
    """The transaction interval a run's config names (``...-250ms-...``), else None (the default)."""
    for part in Path(config).name.split("-"):
        if part.endswith("ms") and part[:-2].isdigit():
            return int(part[:-2]) / 1000
    return None


def summarize(lines: list[dict[str, object]]) -> list[dict[str, object]]:
    """Per worker run (its config file): count, and median and 90th percentile of each part in ms."""
    runs: dict[str, list[dict[str, object]]] = {}
    for line in lines:
        runs.setdefault(str(line["config"]), []).append(line)
    rows = []
    for config, commits in runs.items():
        row: dict[str, object] = {"run": Path(config).name.removesuffix("-ferry.yaml"), "transactions": len(commits)}
        for part in PARTS:
            values = sorted(float(c[part]) * 1000 for c in commits)  # type: ignore[arg-type]
            row[f"{part}_p50_ms"] = round(statistics.median(values), 1)
            row[f"{part}_p90_ms"] = round(values[int(0.9 * (len(values) - 1))], 1)
        interval = _interval_of(config)
        whole = sorted(float(c["whole"]) for c in commits)  # type: ignore[arg-type]
        row["stop_share_of_interval"] = round(statistics.mean(whole) / interval, 3) if interval else None
        rows.append(row)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="also write the per-run summary here")
    parser.add_argument("bench", nargs=argparse.REMAINDER, help="-- then ferry bench's arguments")
    args = parser.parse_args()
    bench = [a for a in args.bench if a != "--"]
    with tempfile.TemporaryDirectory(prefix="ferry-commit-stall-") as folder:
        wrapper = Path(folder) / "wrapper"
        wrapper.mkdir()
        (wrapper / "sitecustomize.py").write_text(WRAPPER)
        timings = Path(folder) / "timings"
        timings.mkdir()
        if "--workdir" not in bench:
            bench += ["--workdir", str(Path(folder) / "work")]
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(wrapper), *filter(None, [os.environ.get("PYTHONPATH")])]),
            "FERRY_COMMIT_STALL_DIR": str(timings),
        }
        status = subprocess.call([sys.executable, "-m", "ferry.cli", "bench", *bench], env=env)
        lines = [json.loads(line) for path in sorted(timings.glob("*.jsonl")) for line in path.read_text().splitlines()]
    rows = summarize(lines)
    for row in rows:
        print(
            f"{row['run']}: {row['transactions']} transactions; copy loop stopped p50 {row['whole_p50_ms']} ms "
            f"(p90 {row['whole_p90_ms']}): flush {row['flush_p50_ms']} (p90 {row['flush_p90_ms']}), segments "
            f"{row['segments_p50_ms']}, commit_transaction {row['commit_transaction_p50_ms']}, "
            f"rest {row['rest_p50_ms']}; share of the interval {row['stop_share_of_interval']}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
