"""deploy/kubernetes's backend configs, run for real on loopback (no cluster needed).

From `kustomize build deploy/kubernetes` this takes what the pods would get —
the Collector's ConfigMaps, arguments and environment, ClickHouse's users file,
the generated Secret's password, the schema container's script and the
wirelens-schema ConfigMap — and runs them: ClickHouse (the chdb-core engine of
the local stack) with the cluster's users, the real Collector binary with the
cluster's merged config (plus one more --config that moves its listeners to
free loopback ports), the schema script (with a clickhouse-client stand-in that
speaks HTTP), then one access-log record shipped by logship. The record must
land in wirelens.requests, written by the `collector` user.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.e2e.conftest import free_ports
from wirelens_helpers import clickhouse
from wirelens_helpers.wait import wait_for

from envoy import wiring  # the short names the filter publishes the record under
from wirelens_helpers import programs

ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / "bin"
DEADLINE_S = 60

# The stock users.xml of the clickhouse/clickhouse-server image, in short: the
# users.d file of deploy/kubernetes is merged over it, as in the image.
STOCK_USERS = """<clickhouse>
  <profiles><default/><readonly><readonly>1</readonly></readonly></profiles>
  <quotas><default/></quotas>
  <users>
    <default>
      <password/>
      <networks><ip>::/0</ip></networks>
      <profile>default</profile>
      <quota>default</quota>
      <access_management>1</access_management>
    </default>
  </users>
</clickhouse>
"""

CLIENT_STANDIN = """#!{python}
# clickhouse-client stand-in for the schema script: --query or --multiquery
# (statements on stdin) over ClickHouse's HTTP interface.
import argparse, sys
from deploy.local import stack
from wirelens_helpers.clickhouse import QueryError, post
p = argparse.ArgumentParser()
p.add_argument("--host"); p.add_argument("--port"); p.add_argument("--query"); p.add_argument("--multiquery", action="store_true")
a = p.parse_args()
assert a.host == "127.0.0.1" and a.port == {tcp_port!r}, (a.host, a.port)
statements = [a.query] if a.query else stack.split_sql(sys.stdin.read())
for statement in statements:
    try:
        sys.stdout.write(post({http!r}, statement))
    except QueryError as e:
        sys.stderr.write(str(e)); sys.exit(1)
"""


def find(docs: list[dict], kind: str, prefix: str) -> dict:
    return next(d for d in docs if d["kind"] == kind and d["metadata"]["name"].startswith(prefix))


@pytest.fixture
def processes():
    started: list[subprocess.Popen] = []
    yield started
    for proc in started:  # our own process groups, by pid
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
    for proc in started:
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_cluster_configs_carry_a_record_into_wirelens_requests(tmp_path, processes):
    if not (BIN / "kustomize").exists():
        subprocess.run([str(ROOT / "tools" / "manifest-tools")], check=True, timeout=1800)
    for tool in ("otelcol-wirelens", "logship"):
        if not (BIN / tool).exists():
            pytest.fail(f"bin/{tool} is missing: make bootstrap")
    rendered = subprocess.run([str(BIN / "kustomize"), "build", str(ROOT / "deploy" / "kubernetes")],
                              capture_output=True, text=True, check=True).stdout
    docs = [d for d in yaml.safe_load_all(rendered) if d]
    password = base64.b64decode(find(docs, "Secret", "wirelens-clickhouse")["data"]["collector-password"]).decode()
    clickhouse_config = find(docs, "ConfigMap", "clickhouse-config")["data"]
    tcp_port, http_port, otlp_port, health_port, metrics_port, nobody_port = free_ports(6)
    clickhouse_url = f"http://127.0.0.1:{http_port}"
    logs: list[Path] = []

    def query(sql: str, **credentials: str) -> str:
        return clickhouse.post(clickhouse_url, sql, timeout=10, **credentials)

    def wait_for_it(what: str, probe) -> None:
        # Not there yet: ClickHouse not answering or refusing (OSError: a log not written yet).
        wait_for(what, probe, timeout_s=DEADLINE_S, interval_s=0.2, processes=processes,
                 retry_on=(clickhouse.QueryError, OSError), state=lambda: "\n".join(
                     f"--- {log.name}\n{log.read_text()[-3000:]}" for log in logs if log.exists()))

    # ClickHouse with the cluster's users (users.d/wirelens-users.xml over the stock users.xml).
    run_dir = tmp_path / "clickhouse"
    (run_dir / "users.d").mkdir(parents=True)
    (run_dir / "config.xml").write_text(
        f"<clickhouse><listen_host>127.0.0.1</listen_host><tcp_port>{tcp_port}</tcp_port>"
        f"<http_port>{http_port}</http_port><users_config>users.xml</users_config>"
        "<logger><level>warning</level><console>1</console></logger></clickhouse>\n")
    (run_dir / "users.xml").write_text(STOCK_USERS)
    (run_dir / "users.d" / "wirelens-users.xml").write_text(clickhouse_config["wirelens-users.xml"])
    statefulset = find(docs, "StatefulSet", "clickhouse")["spec"]["template"]["spec"]
    ch_env = {e["name"]: password for e in statefulset["containers"][0]["env"]
              if e.get("valueFrom", {}).get("secretKeyRef", {}).get("key") == "collector-password"}
    assert ch_env, "ClickHouse gets no password from the Secret"
    log = tmp_path / "clickhouse.log"
    logs.append(log)
    processes.append(subprocess.Popen(
        programs.command("deploy.local.clickhouse_server", "--engine", "--data-dir", str(run_dir / "data")),
        cwd=run_dir, env=programs.environment({**os.environ, **ch_env}), stdout=log.open("w"), stderr=subprocess.STDOUT,
        start_new_session=True))
    wait_for_it("ClickHouse answers", lambda: query("SELECT 1").strip() == "1")
    assert query("SELECT currentUser()", user="collector", password=password).strip() == "collector"
    with pytest.raises(clickhouse.QueryError, match="AUTHENTICATION_FAILED|password is incorrect"):
        query("SELECT 1", user="collector", password="not-the-password")

    # The Collector: the pod's --config files, environment and Secret; listeners on free loopback ports.
    deployment = find(docs, "Deployment", "otel-collector")["spec"]["template"]["spec"]
    container = deployment["containers"][0]
    volumes = {v["name"]: v["configMap"]["name"] for v in deployment["volumes"] if "configMap" in v}
    config_maps = {d["metadata"]["name"]: d["data"] for d in docs if d["kind"] == "ConfigMap"}
    args = []
    for arg in container["args"]:
        path = arg.split("=", 1)[1]
        mount = next(m for m in container["volumeMounts"] if path.startswith(m["mountPath"] + "/"))
        local = tmp_path / "collector" / path.lstrip("/")
        local.parent.mkdir(parents=True, exist_ok=True)
        local.write_text(config_maps[volumes[mount["name"]]][path.rsplit("/", 1)[1]])
        args.append(f"--config={local}")
    loopback = tmp_path / "collector" / "loopback.yaml"
    loopback.write_text(yaml.safe_dump({
        "extensions": {"health_check": {"endpoint": f"127.0.0.1:{health_port}"}},
        "receivers": {"otlp": {"protocols": {"grpc": {"endpoint": f"127.0.0.1:{otlp_port}"}}}},
        "service": {"telemetry": {"metrics": {"readers": [
            {"pull": {"exporter": {"prometheus": {"host": "127.0.0.1", "port": metrics_port}}}}]}}},
    }))
    env = {e["name"]: e.get("value", "") for e in container["env"]}
    env.update({
        "WIRELENS_CLICKHOUSE_PASSWORD": password,
        "WIRELENS_CLICKHOUSE_ENDPOINT": f"tcp://127.0.0.1:{tcp_port}?dial_timeout=5s",
        "WIRELENS_JAEGER_OTLP_ENDPOINT": f"127.0.0.1:{nobody_port}",  # spans: best effort, nobody listens
        "WIRELENS_COLLECTOR_STORAGE_DIR": str(tmp_path / "collector" / "queue"),
    })
    log = tmp_path / "collector.log"
    logs.append(log)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("WIRELENS_")}
    processes.append(subprocess.Popen([str(BIN / "otelcol-wirelens"), *args, f"--config={loopback}"],
                                      env={**clean, **env}, stdout=log.open("w"), stderr=subprocess.STDOUT,
                                      start_new_session=True))
    wait_for_it("the Collector's exporter creates otel.otel_logs",
                lambda: query("EXISTS TABLE otel.otel_logs").strip() == "1")

    # The schema container's script, with the wirelens-schema ConfigMap.
    schema_dir = tmp_path / "schema"
    schema_dir.mkdir()
    for name, text in find(docs, "ConfigMap", "wirelens-schema")["data"].items():
        (schema_dir / name).write_text(text)
    standin = tmp_path / "standin-bin" / "clickhouse-client"
    standin.parent.mkdir()
    standin.write_text(CLIENT_STANDIN.format(python=sys.executable,
                                             tcp_port=str(tcp_port), http=f"http://127.0.0.1:{http_port}/"))
    standin.chmod(0o755)
    script = tmp_path / "apply-schema.sh"
    script.write_text(clickhouse_config["apply-schema.sh"])
    log = tmp_path / "schema.log"
    logs.append(log)
    processes.append(subprocess.Popen(
        ["bash", str(script)], stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True,
        env={**clean, "PATH": f"{standin.parent}:{os.environ['PATH']}", "WIRELENS_SCHEMA_DIR": str(schema_dir),
             "PYTHONPATH": str(ROOT),  # the stand-in imports deploy.local.stack
             "WIRELENS_CLICKHOUSE_TCP_PORT": str(tcp_port), "WIRELENS_REQUESTS_TTL_DAYS": "7"}))
    wait_for_it("the schema script applies queries/schema", lambda: "schema: applied" in log.read_text())
    assert "toIntervalDay(7)" in query("SHOW CREATE TABLE wirelens.requests")

    # One access-log record, as Envoy writes it (the filter's short names),
    # through logship and the Collector.
    short = wiring.record_short_names()
    record = {"wirelens.protocol": "grpc-web", "wirelens.operation": "hello.SayHello",
              "rpc.service": "wirelens.v1.Hello", "rpc.method": "SayHello", "wirelens.streaming": "unary",
              "rpc.grpc.status_code": 0, "wirelens.request.header.size": 311, "http.request.body.size": 17,
              "http.response.body.size": 29, "wirelens.duration_us": 850}
    line = {"time": f"{time.time():.9f}", "trace_id": "0af7651916cd43dd8448eb211c80319c",
            "span_id": "b7ad6b7169203331", "body": "POST /wirelens.v1.Hello/SayHello HTTP/1.1 200",
            "attributes": {"wirelens.record": json.dumps({short[k]: v for k, v in record.items()}),
                           "wirelens.run_id": "k8s-config",
                           "wirelens.request_id": "k8s-config-1", "http.request.method": "POST",
                           "http.response.status_code": "200", "network.protocol.version": "HTTP/1.1"}}
    # The same call as the current filter publishes it (record format 2: by position, the operation map's key
    # instead of the four labels), which the Collector's copy of the map (ConfigMap otel-collector-opmap) restores.
    from tests.e2e.test_record_formats import format2  # noqa: PLC0415
    line2 = {**line, "attributes": {**line["attributes"], "wirelens.request_id": "k8s-config-2",
                                    "wirelens.record": format2(record)}}
    access_log = tmp_path / "access.jsonl"
    access_log.write_text(json.dumps(line) + "\n" + json.dumps(line2) + "\n")
    log = tmp_path / "logship.log"
    logs.append(log)
    processes.append(subprocess.Popen(
        [str(BIN / "logship"), "-file", str(access_log), "-endpoint", f"127.0.0.1:{otlp_port}"],
        stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True))
    sql = ("SELECT request_id, protocol, operation, rpc_service, rpc_method, streaming, grpc_status, "
           "request_header_bytes, request_body_bytes, response_body_bytes, duration_us FROM wirelens.requests FINAL "
           "WHERE run_id = 'k8s-config' ORDER BY request_id FORMAT TabSeparated")
    wait_for_it("both records in wirelens.requests", lambda: len(query(sql).strip().splitlines()) == 2)
    same = ["grpc-web", "hello.SayHello", "wirelens.v1.Hello", "SayHello", "unary", "0", "311", "17", "29", "850"]
    assert [row.split("\t") for row in query(sql).strip().splitlines()] == [["k8s-config-1", *same],
                                                                           ["k8s-config-2", *same]]
