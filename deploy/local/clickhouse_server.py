"""Serve ClickHouse (the chdb-core engine) on loopback, native TCP and HTTP.

chdb has no server entry point. What works (measured here; the component's
row in deploy/README.md): one call of the one-shot `chdb._chdb.query` with a
`config.xml` in the current directory that names the listen host and ports, the statements `SYSTEM START LISTEN TCP;
SYSTEM START LISTEN HTTP;`, then a query that never ends, which keeps the
listeners alive. The engine cannot start twice in one process, so this file
is both a supervisor (restarts the engine process when it dies) and, with
`--engine`, the engine process itself.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
import shutil
import tempfile
from pathlib import Path
from xml.sax.saxutils import escape

from wirelens_helpers import ROOT, clickhouse
from wirelens_helpers.ports import free_ports
from wirelens_helpers.supervise import Supervised, SupervisorError

# Sleeping one row a second keeps the run (and the listeners) alive without
# burning CPU; the per-block cap is lifted so the sleep never errors out.
KEEP_ALIVE = (
    "SELECT sleepEachRow(1) FROM system.numbers "
    "SETTINGS max_block_size = 1, function_sleep_max_microseconds_per_block = 0"
)


def write_config(run_dir: Path, listen_host: str, tcp_port: int, http_port: int,
                 extra_config: Path | None = None, users_config: Path | None = None) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.xml").write_text(
        "<clickhouse>\n"
        f"  <listen_host>{escape(listen_host)}</listen_host>\n"
        f"  <tcp_port>{tcp_port}</tcp_port>\n"
        f"  <http_port>{http_port}</http_port>\n"
        "  <logger><level>warning</level><console>1</console></logger>\n"
        + (f"  <users_config>{escape(str(users_config.resolve()))}</users_config>\n" if users_config else "")
        + (extra_settings(extra_config) if extra_config else "")
        + "</clickhouse>\n"
    )


def extra_settings(path: Path) -> str:
    """The elements under an XML file's <clickhouse> root, as text to add to config.xml
    (e.g. remote_servers, macros, users_config for a cluster node)."""
    import xml.etree.ElementTree as ET

    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as exc:
        raise SystemExit(f"--extra-config {path}: {exc}") from None
    if root.tag != "clickhouse":
        raise SystemExit(f"--extra-config {path}: the root element is <{root.tag}>, expected <clickhouse>")
    taken = {"listen_host", "tcp_port", "http_port", "logger"} & {child.tag for child in root}
    if taken:
        raise SystemExit(f"--extra-config {path}: sets {', '.join(sorted(taken))}, which the command line "
                         "sets; use --listen-host/--tcp-port/--http-port")
    return "".join("  " + ET.tostring(child, encoding="unicode").strip() + "\n" for child in root)


def run_engine(data_dir: Path) -> int:
    import chdb._chdb as engine  # imported late: the supervisor never loads the engine

    data_dir.mkdir(parents=True, exist_ok=True)
    statements = f"SYSTEM START LISTEN TCP; SYSTEM START LISTEN HTTP; {KEEP_ALIVE}"
    try:
        engine.query(statements, "TabSeparated", path=str(data_dir))
    except Exception as exc:  # the engine reports startup errors as exceptions
        print(f"clickhouse engine stopped: {exc}", file=sys.stderr, flush=True)
        return 1
    print("clickhouse engine: keep-alive query ended", file=sys.stderr, flush=True)
    return 1


def supervise(args: argparse.Namespace) -> int:
    run_dir = Path(args.run_dir).resolve()
    data_dir = Path(args.data_dir).resolve()
    write_config(run_dir, args.listen_host, args.tcp_port, args.http_port,
                 Path(args.extra_config) if args.extra_config else None,
                 Path(args.users_config) if args.users_config else None)

    stopping = False
    child: subprocess.Popen | None = None

    def stop(signum, _frame):
        nonlocal stopping
        stopping = True
        if child and child.poll() is None:
            child.terminate()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    backoff = 0.5
    while not stopping:
        started = time.monotonic()
        child = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--engine", "--data-dir", str(data_dir)],
            cwd=run_dir,  # the engine reads config.xml from its working directory
        )
        print(f"clickhouse supervisor: engine pid {child.pid} on "
              f"{args.listen_host}:{args.tcp_port} (native), :{args.http_port} (http)",
              file=sys.stderr, flush=True)
        while child.poll() is None:
            try:
                child.wait(timeout=1)
            except subprocess.TimeoutExpired:
                pass
        if stopping:
            break
        print(f"clickhouse supervisor: engine exited with {child.returncode}; restarting",
              file=sys.stderr, flush=True)
        backoff = 0.5 if time.monotonic() - started > 30 else min(backoff * 2, 10)
        time.sleep(backoff)  # back-off between restarts, not synchronization

    if child and child.poll() is None:
        try:
            child.wait(timeout=15)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
    return 0


class Scratch:
    """This server on free loopback ports in a temporary directory, for tests and benchmarks:
    start() (ready when it answers SELECT 1), url, settings (the local stack's names for its
    ports), stop() (SIGTERM to the supervisor by its pid, which stops the engine; then the
    directory is removed)."""

    def __init__(self, prefix: str = "wirelens-scratch-clickhouse-") -> None:
        self.dir = Path(tempfile.mkdtemp(prefix=prefix))
        self.tcp_port, self.http_port = free_ports(2)
        self.url = f"http://127.0.0.1:{self.http_port}"
        self.settings = {"WIRELENS_CLICKHOUSE_HTTP_PORT": str(self.http_port),
                         "WIRELENS_CLICKHOUSE_TCP_PORT": str(self.tcp_port)}
        self.process = Supervised(
            "scratch ClickHouse",
            [sys.executable, "-m", "deploy.local.clickhouse_server", "--data-dir", str(self.dir / "data"),
             "--run-dir", str(self.dir), "--tcp-port", str(self.tcp_port), "--http-port", str(self.http_port)],
            self.dir / "clickhouse.log", cwd=ROOT, new_session=False)

    def start(self, timeout_s: float = 60.0, error: type[Exception] = SupervisorError) -> None:
        self.process.start()

        def answers() -> bool:
            try:
                return clickhouse.post(self.url, "SELECT 1", timeout=2).strip() == "1"
            except clickhouse.QueryError:
                return False
        self.process.wait_ready(answers, timeout_s=timeout_s, interval_s=0.1, error=error)

    def stop(self) -> None:
        self.process.stop(grace_s=20)
        shutil.rmtree(self.dir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Serve ClickHouse (chdb-core engine) on loopback over native TCP and HTTP, "
                    "restarting the engine if it dies.")
    parser.add_argument("--data-dir", required=True, help="ClickHouse data directory")
    parser.add_argument("--run-dir", help="where config.xml is written (default: DATA_DIR/..)")
    parser.add_argument("--listen-host", default="127.0.0.1")
    parser.add_argument("--tcp-port", type=int, default=9000, help="native protocol port")
    parser.add_argument("--http-port", type=int, default=8123, help="HTTP interface port")
    parser.add_argument("--extra-config", metavar="XML",
                        help="more server settings: an XML file whose <clickhouse> root's elements are added "
                             "to config.xml (remote_servers, macros, users_config, ...)")
    parser.add_argument("--users-config", metavar="XML",
                        help="the users, their passwords and grants: a users.xml, named in config.xml's "
                             "<users_config> (the engine has no CREATE USER); default: only `default`, no password")
    parser.add_argument("--engine", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.engine:
        return run_engine(Path(args.data_dir))
    if not args.run_dir:
        args.run_dir = str(Path(args.data_dir).resolve().parent)
    return supervise(args)


if __name__ == "__main__":
    sys.exit(main())
