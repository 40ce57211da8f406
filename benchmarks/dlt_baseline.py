"""The generic-loader baseline: dlt's ``rest_api`` source harvesting the same summaries.

dlt fetches exactly the URLs our client fetches (``/api/demo/networks/{network}/players/{player}/summary``
with path segments quoted the same way, the same ``Username``/``Password`` headers from
:func:`tourneylake.api.encode_password`, ``Accept: application/json``), from the same warm
sandbox process, with the same concurrency (the child resource is ``parallelized`` and dlt's
extract thread pool gets ``workers`` threads). It lands the nested JSON as dlt's normalised
tables (one child table per nested list) in Parquet, either on the ``filesystem`` destination
or in ``duckdb`` with the ``parquet`` loader file format. Timed: ``pipeline.run`` (extract +
normalise + load), inside this process, after the imports.

Run as a child process by :mod:`benchmarks.run`; prints one JSON line::

    python -m benchmarks.dlt_baseline --base-url http://127.0.0.1:PORT --players 2000 --destination filesystem
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import orjson


def configure_env(workers: int, normalize_workers: int) -> None:
    os.environ["RUNTIME__DLTHUB_TELEMETRY"] = "false"
    os.environ["EXTRACT__WORKERS"] = str(workers)
    os.environ["NORMALIZE__WORKERS"] = str(normalize_workers)
    os.environ.setdefault("RUNTIME__LOG_LEVEL", "WARNING")


def run(
    base_url: str, players: list[tuple[str, str]], workdir: Path, destination: str, workers: int, filter: str = ""
) -> dict[str, Any]:
    import dlt
    from dlt.sources.rest_api import rest_api_source

    from benchmarks.common import APPNAME, headers
    from tourneylake.api.calls import segment

    @dlt.resource(name="roster", selected=False)
    def roster_resource():
        yield [{"network": segment(n), "player": segment(p)} for n, p in players]

    source = rest_api_source(
        {
            "client": {"base_url": f"{base_url}/api/{APPNAME}/", "headers": headers("json")},
            "resource_defaults": {"write_disposition": "append"},
            "resources": [
                roster_resource,
                {
                    "name": "summaries",
                    "parallelized": True,
                    "endpoint": {
                        "path": "networks/{network}/players/{player}/summary",
                        "params": {
                            "network": {"type": "resolve", "resource": "roster", "field": "network"},
                            "player": {"type": "resolve", "resource": "roster", "field": "player"},
                            **({"filter": filter} if filter else {}),
                        },
                        "paginator": "single_page",
                        "data_selector": "$",
                    },
                },
            ],
        }
    )
    if destination == "filesystem":
        dest = dlt.destinations.filesystem(bucket_url=(workdir / "lake").as_uri())
    elif destination == "duckdb":
        dest = dlt.destinations.duckdb(str(workdir / "dlt.duckdb"))
    else:
        raise SystemExit(f"unknown destination {destination!r}")
    pipeline = dlt.pipeline(
        pipeline_name="bench_" + destination,
        destination=dest,
        dataset_name="summaries_data",
        pipelines_dir=str(workdir / "pipelines"),
    )
    t0 = time.perf_counter()
    pipeline.extract(source, loader_file_format="parquet")
    t1 = time.perf_counter()
    pipeline.normalize()
    t2 = time.perf_counter()
    info = pipeline.load()
    t3 = time.perf_counter()
    info.raise_on_failed_jobs()
    rows = dict(pipeline.last_trace.last_normalize_info.row_counts) if pipeline.last_trace.last_normalize_info else {}
    rows = {k: v for k, v in rows.items() if not k.startswith("_dlt")}
    fetched = rows.get("summaries", 0)
    return {
        "tool": f"dlt-{destination}",
        "seconds": t3 - t0,
        "extract_s": t1 - t0,
        "normalize_s": t2 - t1,
        "load_s": t3 - t2,
        "fetched": fetched,
        "tables": len(rows),
        "rows": sum(rows.values()),
        "dlt_version": dlt.__version__,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--players", type=int, required=True)
    parser.add_argument("--destination", default="filesystem", choices=["filesystem", "duckdb"])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--normalize-workers", type=int, default=1)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--filter", default="", help="the filter query parameter (the one tourneylake sends)")
    args = parser.parse_args(argv)
    configure_env(args.workers, args.normalize_workers)
    from benchmarks.common import roster

    players = roster(args.players)
    result = run(args.base_url, players, Path(args.workdir), args.destination, args.workers, args.filter)
    result["normalize_workers"] = args.normalize_workers
    sys.stdout.write(orjson.dumps(result).decode() + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
