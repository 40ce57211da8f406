"""A/B of a 2,000-player night: this tree on a local lake, another tree (``--baseline``: a commit
or a folder) on a local lake, and this tree on S3 (moto behind the counting proxy of
``tests/s3_proxy.py``), alternating, every arm a whole ``tourneylake run`` process against
:mod:`benchmarks.bench_server` (20 ms, concurrency 16, as benchmark 1), then a whole ``tourneylake
rebuild --date`` of that night from the lake it made; ``night_s`` is the run up to its "run ok" line,
``models_s`` the models job after it. Medians of ``--repeats``; the S3 arm also
gives the store's requests for the night (PUT, GET, LIST) and, with ``--list-sizes``, the LIST
requests of nights of other sizes (they should not grow with the answers).

``python -m benchmarks.ab [--baseline COMMIT|DIR] [--repeats N] [--players N] [--latency-ms MS]``
(in the bench environment; the baseline runs with this environment's packages). Prints one JSON
document; the figures go in ``benchmarks/RESULTS.md`` by hand, with the machine and the date.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
from collections.abc import Iterator
from io import BytesIO
from pathlib import Path
from typing import Any

import orjson

from benchmarks.common import NIGHT, ROOT, BenchServer, measure, roster, run_env, write_watchlist

CONCURRENCY = 16
#: What ``tourneylake run`` prints once its night is over, before its models job.
NIGHT_DONE = b"run ok in "


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@contextlib.contextmanager
def baseline_tree(baseline: str) -> Iterator[Path]:
    """The baseline's source: a folder as it is, or a commit of this repository unpacked."""
    if Path(baseline).is_dir():
        yield Path(baseline).resolve()
        return
    archive = subprocess.run(["git", "archive", baseline], cwd=ROOT, capture_output=True, check=True).stdout
    with tempfile.TemporaryDirectory(prefix="tl-ab-baseline-") as folder:
        with tarfile.open(fileobj=BytesIO(archive)) as tar:
            tar.extractall(folder, filter="data")
        yield Path(folder)


def night(server: BenchServer, tree: Path, work: Path, label: str, extra: dict[str, str], data_dir: Path) -> dict[str, Any]:
    """One whole ``tourneylake run`` and one whole ``tourneylake rebuild --date`` of its night."""
    server.reset()
    watchlist = work / "watchlist.yaml"
    home = work / f"{label}-dagster-{uuid.uuid4().hex[:6]}"
    env = run_env(server.base_url, data_dir, watchlist, home, CONCURRENCY, tree=tree, **extra)
    env["PYTHONUNBUFFERED"] = "1"  # the night's last line ("run ok in …") seen when it is printed
    run = measure(
        [sys.executable, "-m", "tourneylake.pipelines.cli", "run", "--date", NIGHT.isoformat()],
        env=env,
        cwd=tree,
        timeout=1800,
        mark=NIGHT_DONE,
    )
    stats = server.stats()
    if run.returncode != 0:
        raise RuntimeError(f"{label}: tourneylake run exited {run.returncode}: {run.stderr[-2000:]}")
    rebuild = measure(
        [sys.executable, "-m", "tourneylake.pipelines.cli", "rebuild", "--date", NIGHT.isoformat()],
        env=env,
        cwd=tree,
        timeout=1800,
    )
    if rebuild.returncode != 0:
        raise RuntimeError(f"{label}: tourneylake rebuild exited {rebuild.returncode}: {rebuild.stderr[-2000:]}")
    fetching = (stats["last_at"] - stats["first_at"]) if stats["first_at"] else None
    return {
        "run_s": run.seconds,
        # The night (the process up to its "run ok" line) and the models job after it (dbt's
        # views and tests, the coach's report; a tree before them has none).
        "night_s": run.marked_s,
        "models_s": None if run.marked_s is None else run.seconds - run.marked_s,
        "run_cpu_s": run.user_s + run.sys_s,
        "fetching_s": fetching,
        "peak_rss_mb": run.tree_peak_rss_mb,
        "rebuild_s": rebuild.seconds,
        "summaries": stats["counts"].get("summary", 0),
        "steal_pct": run.steal_pct,
    }


class S3:
    """moto behind the counting proxy, for the S3 arm: a fresh bucket per night."""

    def __init__(self, stack: contextlib.ExitStack) -> None:
        from tests.s3_proxy import running_moto, running_proxy

        self.moto = stack.enter_context(running_moto())
        self.proxy = stack.enter_context(running_proxy(self.moto))

    def env(self, work: Path, *, counted: bool = True) -> dict[str, str]:
        """A fresh bucket's settings; through the counting proxy, or (``counted`` false) to moto itself."""
        import fsspec

        bucket = f"ab-{uuid.uuid4().hex[:8]}"
        fsspec.filesystem("s3", endpoint_url=self.moto, key="bench", secret="bench", skip_instance_cache=True).mkdir(bucket)
        self.proxy.reset()
        return {
            "TOURNEYLAKE_DATA_DIR": f"s3://{bucket}/lake",
            "TOURNEYLAKE_WAREHOUSE": str(work / f"{bucket}.duckdb"),
            "AWS_ENDPOINT_URL": self.proxy.url if counted else self.moto,
            "AWS_ACCESS_KEY_ID": "bench",
            "AWS_SECRET_ACCESS_KEY": "bench",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_EC2_METADATA_DISABLED": "true",
        }


def _medians(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    keys = [k for k, v in rounds[0].items() if isinstance(v, int | float)]
    return {k: round(statistics.median(r[k] for r in rounds if r.get(k) is not None), 3) for k in keys}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", help="a commit or a source folder to compare with (default: none)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--players", type=int, default=2000)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--no-s3", action="store_true")
    parser.add_argument("--s3-direct", action="store_true", help="one more S3 arm: moto itself, without the counting proxy")
    parser.add_argument("--baseline-s3", action="store_true", help="one more S3 arm: the baseline tree, its requests counted")
    parser.add_argument("--list-sizes", default="", help="comma-separated night sizes whose S3 LIST requests are counted too")
    args = parser.parse_args(argv)
    rounds: dict[str, list[dict[str, Any]]] = {}
    requests: dict[str, list[dict[str, Any]]] = {}
    lists: dict[int, int] = {}
    started = time.monotonic()
    with contextlib.ExitStack() as stack, tempfile.TemporaryDirectory(prefix="tl-ab-") as scratch:
        work = Path(scratch)
        arms: list[tuple[str, Path, bool | str]] = [("ours/local", ROOT, False)]
        baseline = stack.enter_context(baseline_tree(args.baseline)) if args.baseline else None
        if baseline is not None:
            arms.append(("baseline/local", baseline, False))
        s3 = None if args.no_s3 else S3(stack)
        if s3 is not None:
            arms.append(("ours/s3", ROOT, True))
            if baseline is not None and args.baseline_s3:
                arms.append(("baseline/s3", baseline, True))
            if args.s3_direct:
                arms.append(("ours/s3-direct", ROOT, "direct"))
        sizes = sorted({args.players, *(int(x) for x in args.list_sizes.split(",") if x)})
        with BenchServer(max(sizes), args.latency_ms, distinct=min(2000, max(sizes))) as server:
            write_watchlist(work / "watchlist.yaml", roster(args.players))
            for repeat in range(args.repeats):
                for label, tree, on_s3 in arms if repeat % 2 == 0 else list(reversed(arms)):
                    data_dir = work / f"{label.replace('/', '-')}-{repeat}"
                    extra = s3.env(work, counted=on_s3 is True) if on_s3 and s3 is not None else {}
                    figures = night(server, tree, work, label.replace("/", "-"), extra, data_dir)
                    if on_s3 is True and s3 is not None:
                        requests.setdefault(label, []).append(s3.proxy.stats()["counts"])
                    rounds.setdefault(label, []).append(figures)
                    log(f"round {repeat + 1} {label}: {orjson.dumps(figures).decode()}")
            if s3 is not None:
                for size in sizes:
                    if size == args.players:
                        continue
                    write_watchlist(work / "watchlist.yaml", roster(size))
                    night(server, ROOT, work, f"lists-{size}", s3.env(work), work / f"lists-{size}")
                    lists[size] = s3.proxy.stats()["counts"].get("LIST", 0)
                if requests.get("ours/s3"):
                    lists[args.players] = int(statistics.median(r.get("LIST", 0) for r in requests["ours/s3"]))
    medians = {label: _medians(r) for label, r in rounds.items()}
    out: dict[str, Any] = {"players": args.players, "latency_ms": args.latency_ms, "repeats": args.repeats, "medians": medians}
    local = medians["ours/local"]
    for label, figures in medians.items():
        if label != "ours/local":
            out[f"{label} / ours/local"] = {
                k: round(figures[k] / local[k], 3)
                for k in ("run_s", "night_s", "fetching_s", "rebuild_s", "run_cpu_s")
                if local.get(k) and figures.get(k)
            }
    for label, counted in requests.items():
        name = "s3_requests_per_night" if label == "ours/s3" else f"s3_requests_per_night ({label})"
        out[name] = {k: int(statistics.median(r.get(k, 0) for r in counted)) for k in counted[0]}
    if lists:
        out["s3_list_requests_by_night_size"] = {str(size): count for size, count in lists.items()}
    out["elapsed_s"] = round(time.monotonic() - started, 1)
    print(orjson.dumps(out, option=orjson.OPT_INDENT_2).decode())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
