"""Run one saved query from queries/*.sql: a thin wrapper of `bin/wirelens query`.

    python -m queries.saved latency_bytes_by_operation --since 1h [--run-id ID] [--format PrettyCompact]
    python -m queries.saved compare_protocols --param operation=catalog.GetProduct \
        --param protocol_a=rest --param protocol_b=grpc [--param resamples=200]
    python -m queries.saved what_if_protocol --run-id ID [--param resamples=200]

The runner is the Go CLI's (cli/internal/report: parameters from the
window and --param, passed as ClickHouse query parameters, never spliced);
this script keeps the old flags. The user comes from --user or CLICKHOUSE_USER,
its password from CLICKHOUSE_PASSWORD (the local stack's read-only reporter
and its password are in .run/local/credentials.env). Programs that read the
answers themselves use wirelens_helpers.clickhouse (tools/pyhelpers).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

QUERIES = Path(__file__).resolve().parent
WIRELENS = QUERIES.parent / "bin" / "wirelens"


def command(argv: list[str] | None = None) -> list[str]:
    """The `bin/wirelens query` command line for these flags."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("name", help="saved query, the file name in queries/ without .sql")
    parser.add_argument("--since", default="1h", help="window length ending now (30s, 15m, 2h, 1d); default 1h")
    parser.add_argument("--run-id", default="", help="only calls of this load run (in the --since window)")
    parser.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                        help="another query parameter, e.g. operation=catalog.GetProduct (repeatable)")
    parser.add_argument("--format", default="PrettyCompactMonoBlock", help="ClickHouse output format")
    parser.add_argument("--clickhouse-url", default=os.environ.get(
        "WIRELENS_CLICKHOUSE_URL", f"http://127.0.0.1:{os.environ.get('WIRELENS_CLICKHOUSE_HTTP_PORT', '8123')}"),
        help="ClickHouse HTTP interface (env WIRELENS_CLICKHOUSE_URL)")
    parser.add_argument("--user", default=os.environ.get("CLICKHOUSE_USER", ""),
                        help="ClickHouse user (env CLICKHOUSE_USER; its password from CLICKHOUSE_PASSWORD); "
                             "default: ClickHouse's default user")
    args = parser.parse_args(argv)
    cmd = [str(WIRELENS), "query", args.name, "--since", args.since, "--format", args.format,
           "--clickhouse-url", args.clickhouse_url, "--queries", str(QUERIES), "--param", f"run_id={args.run_id}"]
    for item in args.param:
        cmd += ["--param", item]
    if args.user:
        cmd += ["--user", args.user]
    return cmd


def main(argv: list[str] | None = None) -> int:
    cmd = command(argv)
    if not WIRELENS.exists():
        print(f"error: {WIRELENS} is missing: run `make services`", file=sys.stderr)
        return 1
    return subprocess.run(cmd).returncode


if __name__ == "__main__":
    sys.exit(main())
