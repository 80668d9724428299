"""A ClickHouse cluster on loopback: one engine process per node, all sharing one remote_servers.

    cluster.py up     --dir .run/cluster [--shards 2] [--replicas 1] [--name wirelens]
    cluster.py status --dir .run/cluster
    cluster.py down   --dir .run/cluster

Each node is deploy/local/clickhouse_server.py (the chdb-core engine under its
supervisor, which restarts the engine if it dies) on free loopback ports, with
--extra-config giving it the cluster (remote_servers), its macros ({cluster},
{shard}, {replica}) and, optionally, a users file. `up` prints each node's
ports; the cluster's layout and pids are kept in DIR/cluster.json for `down`.

What this engine can and cannot do as a cluster node (docs/clickhouse-cluster.md):
Distributed tables, remote_servers and macros work; ReplicatedMergeTree does not
(the embedded server never gets an interserver address, so replicas stay
read-only), nor does DDL ON CLUSTER. Apply the schema on every node
(WIRELENS_CLICKHOUSE_ON_CLUSTER=0) with WIRELENS_CLICKHOUSE_REPLICATED=0.
Replicas of a shard (--replicas 2) are then kept by the Distributed table
itself (internal_replication false: it writes every row to each replica).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Callable
from xml.sax.saxutils import escape

from deploy.local import stack  # free_ports (replication_probe.py takes it from here)
from wirelens_helpers import supervise

ROOT = Path(__file__).resolve().parents[2]
SERVER = "deploy.local.clickhouse_server"  # run as a module from the checkout root

READY_TIMEOUT_S = 60.0


class ClusterError(RuntimeError):
    """A failure the user can act on; the message says which node and where its log is."""


@dataclasses.dataclass
class Node:
    shard: int
    replica: int
    tcp_port: int
    http_port: int
    dir: str
    pid: int | None = None  # the supervisor's; it leads its own process group

    @property
    def name(self) -> str:
        return f"s{self.shard}r{self.replica}"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def log(self) -> Path:
        return Path(self.dir) / "clickhouse.log"


def query(url: str, sql: str, timeout: float = 60.0, user: str | None = None, password: str = "",
          params: dict[str, str] | None = None) -> str:
    """One statement over HTTP; ClickHouse's own error text on failure (as ClusterError)."""
    import urllib.parse

    headers = {"X-ClickHouse-User": user, "X-ClickHouse-Key": password} if user else {}
    qs = urllib.parse.urlencode({f"param_{k}": v for k, v in (params or {}).items()})
    request = urllib.request.Request(f"{url}/?{qs}", data=sql.encode(), headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.read().decode()
    except urllib.error.HTTPError as exc:
        raise ClusterError(f"{url}: {exc.read().decode(errors='replace').strip()}") from None
    except (OSError, urllib.error.URLError) as exc:
        raise ClusterError(f"{url}: not reachable: {exc}") from None


class LocalCluster:
    """Nodes on loopback; `shards` x `replicas`, each its own engine process."""

    def __init__(self, base_dir: Path, shards: int = 2, replicas: int = 1, name: str = "wirelens",
                 users_xml: Path | None = None, extra_xml: str = "",
                 node_xml: Callable[[Node], str] | None = None) -> None:
        if shards < 1 or replicas < 1:
            raise ClusterError(f"--shards {shards} --replicas {replicas}: each must be at least 1")
        self.base_dir = Path(base_dir).resolve()
        self.name = name
        self.users_xml = users_xml
        self.extra_xml = extra_xml  # more elements for every node's config (e.g. <zookeeper>)
        self.node_xml = node_xml    # and for one node (e.g. its own interserver port)
        ports = stack.free_ports(2 * shards * replicas)
        self.nodes = [Node(shard, replica, ports.pop(), ports.pop(),
                           str(self.base_dir / f"s{shard}r{replica}"))
                      for shard in range(1, shards + 1) for replica in range(1, replicas + 1)]

    # ------------------------------------------------------------ config

    def remote_servers(self) -> str:
        shards = []
        for shard in sorted({n.shard for n in self.nodes}):
            replicas = "".join(f"<replica><host>127.0.0.1</host><port>{n.tcp_port}</port></replica>"
                               for n in self.nodes if n.shard == shard)
            # No Keeper here: a shard's replicas are written by the Distributed table itself.
            shards.append(f"<shard><internal_replication>false</internal_replication>{replicas}</shard>")
        return f"<remote_servers><{self.name}>{''.join(shards)}</{self.name}></remote_servers>"

    def node_config(self, node: Node) -> str:
        users = f"<users_config>{escape(str(self.users_xml))}</users_config>" if self.users_xml else ""
        return ("<clickhouse>\n"
                f"  {self.remote_servers()}\n"
                f"  <macros><cluster>{self.name}</cluster><shard>{node.shard}</shard>"
                f"<replica>{node.name}</replica></macros>\n"
                f"  {users}{self.extra_xml}{self.node_xml(node) if self.node_xml else ''}\n"
                "</clickhouse>\n")

    # ------------------------------------------------------------ processes

    def up(self) -> None:
        self.base_dir.mkdir(parents=True, exist_ok=True)
        try:
            for node in self.nodes:
                self.start(node)
            for node in self.nodes:
                self.wait_ready(node)
        except BaseException:
            self.down()
            raise
        self.save()

    def start(self, node: Node) -> None:
        Path(node.dir).mkdir(parents=True, exist_ok=True)
        extra = Path(node.dir) / "cluster.xml"
        extra.write_text(self.node_config(node))
        process = supervise.Supervised(
            f"node {node.name}",
            [sys.executable, "-m", SERVER, "--data-dir", str(Path(node.dir) / "data"), "--run-dir", node.dir,
             "--tcp-port", str(node.tcp_port), "--http-port", str(node.http_port), "--extra-config", str(extra)],
            node.log, cwd=ROOT, log_mode="append")
        node.pid = process.start().pid
        self._processes = getattr(self, "_processes", {})
        self._processes[node.name] = process

    def wait_ready(self, node: Node, timeout_s: float = READY_TIMEOUT_S) -> None:
        def answers() -> bool:
            try:
                return query(node.url, "SELECT 1", timeout=2).strip() == "1"
            except ClusterError:
                return False
        self._processes[node.name].wait_ready(answers, timeout_s=timeout_s, interval_s=0.1, error=ClusterError,
                                              detail=f"http {node.http_port}, tcp {node.tcp_port}")

    def engine_pid(self, node: Node) -> int | None:
        """The engine process under the node's supervisor (None while it is being restarted)."""
        children = Path(f"/proc/{node.pid}/task/{node.pid}/children")
        try:
            pids = children.read_text().split()
        except OSError:
            return None
        return int(pids[0]) if pids else None

    def kill_engine(self, node: Node) -> int:
        """SIGKILL the node's engine (a crash: nothing is flushed); its supervisor starts it again."""
        pid = self.engine_pid(node)
        if pid is None:
            raise ClusterError(f"node {node.name}: no engine process under supervisor {node.pid}")
        os.kill(pid, signal.SIGKILL)
        return pid

    def down(self, grace_s: float = 20.0) -> None:
        running = [node for node in self.nodes if node.pid]
        for node in running:  # every node at once, then wait for each
            supervise.signal_group(node.pid, signal.SIGTERM)
        for node in running:
            supervise.stop_group(node.pid, grace_s)  # gone already, else SIGKILL after grace_s
            process = getattr(self, "_processes", {}).get(node.name)
            if process:
                process.process.wait(timeout=grace_s)
            node.pid = None
        (self.base_dir / "cluster.json").unlink(missing_ok=True)

    # ------------------------------------------------------------ state

    def save(self) -> None:
        (self.base_dir / "cluster.json").write_text(json.dumps(
            {"name": self.name, "nodes": [dataclasses.asdict(n) for n in self.nodes]}, indent=1))

    @classmethod
    def load(cls, base_dir: Path) -> "LocalCluster":
        path = Path(base_dir).resolve() / "cluster.json"
        try:
            state = json.loads(path.read_text())
        except OSError:
            raise ClusterError(f"no cluster in {base_dir} ({path} missing): start one with `cluster.py up`") from None
        cluster = cls.__new__(cls)
        cluster.base_dir, cluster.name, cluster.users_xml, cluster.extra_xml, cluster.node_xml = \
            Path(base_dir).resolve(), state["name"], None, "", None
        cluster.nodes = [Node(**n) for n in state["nodes"]]
        return cluster


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["up", "down", "status"])
    parser.add_argument("--dir", required=True, help="where the nodes' configs, data and logs go")
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--replicas", type=int, default=1, help="replicas per shard (written by Distributed)")
    parser.add_argument("--name", default="wirelens", help="the cluster's name in remote_servers")
    args = parser.parse_args(argv)
    try:
        if args.command == "up":
            if (Path(args.dir) / "cluster.json").exists():
                raise ClusterError(f"{args.dir} already holds a running cluster: `cluster.py down --dir {args.dir}`")
            cluster = LocalCluster(Path(args.dir), args.shards, args.replicas, args.name)
            cluster.up()
            for node in cluster.nodes:
                print(f"  {node.name}  pid {node.pid}  http {node.http_port}  tcp {node.tcp_port}  {node.dir}")
            print(f"cluster '{cluster.name}' is up; schema: WIRELENS_CLICKHOUSE_CLUSTER={cluster.name} "
                  "WIRELENS_CLICKHOUSE_REPLICATED=0 WIRELENS_CLICKHOUSE_ON_CLUSTER=0 "
                  "WIRELENS_CLICKHOUSE_HTTP_PORT=<each node's http port> python -m deploy.local.stack apply-schema")
        else:
            cluster = LocalCluster.load(Path(args.dir))
            if args.command == "down":
                cluster.down()
                print(f"cluster '{cluster.name}' stopped")
            else:
                healthy = True
                for node in cluster.nodes:
                    try:
                        up = query(node.url, "SELECT 1", timeout=2).strip() == "1"
                    except ClusterError:
                        up = False
                    healthy &= up
                    print(f"  {node.name}  pid {node.pid}  http {node.http_port}  {'up' if up else 'DOWN'}")
                return 0 if healthy else 1
    except ClusterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
