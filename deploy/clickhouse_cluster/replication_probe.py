"""Can the embedded ClickHouse (chdb-core) replicate through a real ZooKeeper? Prints what it finds.

    make clickhouse-replication-probe        (fetches ZooKeeper first: make zookeeper)
    python -m deploy.clickhouse_cluster.replication_probe [--keep DIR]

Starts a ZooKeeper 3.9.3 server (build/zookeeper/lib, Debian's OpenJDK) on a
free loopback port, and two engine processes as two replicas of one shard
(deploy/clickhouse_cluster/cluster.py) with <zookeeper> pointing at it and an
interserver_http_port each. Creates wirelens.requests_local in its Replicated
cluster form (queries/schema/cluster), inserts through replica 1, and reports
the ZooKeeper session, the znodes and ephemeral nodes the replicas made, each
replica's state, and the engine's own errors. Exit status 0 when the findings
match docs/clickhouse-cluster.md (replicas read-only: no interserver address
in the embedded server), 1 when they do not (then replication may work: see the
output and update the docs and tests/e2e/test_clickhouse_cluster.py).
"""

from __future__ import annotations

import argparse
import shutil
import socket
import sys
import tempfile
from pathlib import Path

from deploy.clickhouse_cluster.cluster import ClusterError, LocalCluster, query
from deploy.local import stack
from wirelens_helpers import supervise

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

ZOOKEEPER_LIB = ROOT / "build" / "zookeeper" / "lib"


def four_letter(port: int, command: str) -> dict[str, str]:
    """A ZooKeeper four-letter command's answer (mntr: tab-separated key/value lines)."""
    with socket.create_connection(("127.0.0.1", port), timeout=3) as sock:
        sock.sendall(command.encode())
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return dict(line.split("\t", 1) for line in answer.decode().splitlines() if "\t" in line)


def start_zookeeper(work: Path) -> tuple[supervise.Supervised, int]:
    if not any(ZOOKEEPER_LIB.glob("zookeeper-*.jar")):
        raise ClusterError(f"no ZooKeeper jars in {ZOOKEEPER_LIB}: run `make zookeeper`")
    java = shutil.which("java")
    if not java:
        raise ClusterError("no `java` on PATH: apt-get install openjdk-17-jre-headless")
    port, = stack.free_ports(1)
    (work / "zkdata").mkdir(parents=True)
    (work / "zoo.cfg").write_text(
        f"tickTime=500\ninitLimit=10\nsyncLimit=5\ndataDir={work / 'zkdata'}\nclientPort={port}\n"
        "clientPortAddress=127.0.0.1\nadmin.enableServer=false\n4lw.commands.whitelist=ruok,mntr\n")
    process = supervise.Supervised(
        "ZooKeeper", [java, "-Xmx256m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", f"{ZOOKEEPER_LIB}/*",
                      "org.apache.zookeeper.server.ZooKeeperServerMain", str(work / "zoo.cfg")],
        work / "zookeeper.log")
    process.start()

    def answers() -> bool:
        try:
            return "zk_version" in four_letter(port, "mntr")
        except OSError:
            return False
    try:
        process.wait_ready(answers, timeout_s=60, interval_s=0.2, detail=f"127.0.0.1:{port}", error=ClusterError)
    except ClusterError:
        process.kill()
        raise
    return process, port


def probe(work: Path) -> bool:
    zookeeper, zk_port = start_zookeeper(work)
    interserver = stack.free_ports(2)
    # each replica its own interserver port: config.xml has it, the engine never gets it
    replicas = LocalCluster(work / "cluster", shards=1, replicas=2, name="wirelens",
                            extra_xml=f"<zookeeper><node><host>127.0.0.1</host><port>{zk_port}</port></node>"
                                      "</zookeeper><interserver_http_host>127.0.0.1</interserver_http_host>",
                            node_xml=lambda node: f"<interserver_http_port>{interserver[node.replica - 1]}"
                                                  "</interserver_http_port>")
    try:
        replicas.up()
        print(f"ZooKeeper {four_letter(zk_port, 'mntr')['zk_version'].split(',')[0]} on 127.0.0.1:{zk_port}; "
              f"replicas {', '.join(f'{n.name} (http {n.http_port})' for n in replicas.nodes)}")
        settings = {"WIRELENS_REQUESTS_TTL_DAYS": "30", "WIRELENS_CLICKHOUSE_CLUSTER": "wirelens",
                    "WIRELENS_CLICKHOUSE_REPLICATED": "1", "WIRELENS_CLICKHOUSE_ON_CLUSTER": "0"}
        table = next(s for s in stack.schema_statements(settings)
                     if s.startswith("CREATE TABLE IF NOT EXISTS wirelens.requests_local"))
        for node in replicas.nodes:
            query(node.url, "CREATE DATABASE IF NOT EXISTS wirelens")
            query(node.url, table)
        engine = next(line for line in table.splitlines() if line.startswith("ENGINE"))
        print(f"  created wirelens.requests_local on both: {engine}")
        mntr = four_letter(zk_port, "mntr")
        print(f"  ZooKeeper: {mntr['zk_znode_count']} znodes, {mntr['zk_ephemerals_count']} ephemeral "
              f"(an active replica holds one: is_active), {mntr['zk_num_alive_connections']} connections")
        inserted = True
        try:
            query(replicas.nodes[0].url, "INSERT INTO wirelens.requests_local (request_id) "
                                         "SETTINGS insert_keeper_max_retries = 0 VALUES ('probe')")
        except ClusterError as exc:
            inserted = False
            print(f"  INSERT through {replicas.nodes[0].name}: {str(exc).split(': ', 1)[1][:160]}")
        for node in replicas.nodes:
            state = query(node.url, "SELECT is_readonly, active_replicas, total_replicas FROM system.replicas "
                                    "WHERE table = 'requests_local' FORMAT TSV").split()
            error = query(node.url, "SELECT last_error_message FROM system.errors "
                                    "WHERE name = 'NO_ELEMENTS_IN_CONFIG' FORMAT TSV").strip()
            print(f"  {node.name}: is_readonly {state[0]}, active replicas {state[1]} of {state[2]}; "
                  f"engine error: {error or '(none)'}")
        try:
            query(replicas.nodes[0].url, "SYSTEM START LISTEN INTERSERVER HTTP")
        except ClusterError as exc:
            print(f"  SYSTEM START LISTEN INTERSERVER HTTP: {str(exc).split(': ', 1)[1][:140]}")
        as_documented = not inserted and mntr["zk_ephemerals_count"] == "0"
        print("findings match docs/clickhouse-cluster.md: replicas reach ZooKeeper but stay read-only"
              if as_documented else "findings DIFFER from docs/clickhouse-cluster.md: replication may work now")
        return as_documented
    finally:
        replicas.down()
        zookeeper.stop(grace_s=20)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keep", metavar="DIR", help="work in DIR and keep the logs (default: a temporary dir)")
    args = parser.parse_args(argv)
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="wirelens-replication-probe-"))
    try:
        return 0 if probe(work) else 1
    except ClusterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
