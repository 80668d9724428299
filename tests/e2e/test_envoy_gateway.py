"""End to end: wirelens in Envoy Gateway v1.9.1, run standalone next to the local stack.

Envoy Gateway (bin/envoy-gateway, built from its Go module) reads the
resources deploy/envoy_gateway/manifests.py renders (Gateway API routes,
Backends, the EnvoyExtensionPolicy with the wirelens wasm, the EnvoyProxy
telemetry) from a directory it watches, and runs the project's Envoy 1.40
itself (Host infrastructure). The wasm comes as an OCI image (`make
wasm-image`, build/oci) that Envoy Gateway pulls by digest from a registry on
loopback (bin/wasm-image registry, HTTPS with a CA made for the run, trusted
through the policy's tls.caCertificateRef); the test finds that digest in the
registry's log, the pulled module in Envoy Gateway's wasm cache, and its
sha256 in the Envoy config. Known calls of every protocol go through the
gateway: each is exactly one row in ClickHouse with its operation, protocol,
body and message sizes, and one span in Jaeger. Then the EnvoyExtensionPolicy
changes on disk (sample_rate 0, then 1 again) and Envoy follows, with every
process still the one that started, while numbered calls run through both
changes (tests/e2e/numbered_calls.py): every call answered, one row each at
sample_rate 1, none at 0, the missing or doubled named by number.

Every test runs once per build of the filter (envoy/wiring.py, MODULES): the
policy's wasm, and the native dynamic module the EnvoyProxy registers by path
(WIRELENS_FILTER_MODULE=native), each in a gateway of its own.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
import uuid
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from tests.e2e.conftest import ARTIFACTS, free_ports, rows, stack
from tests.e2e.numbered_calls import NumberedCalls
from wirelens_helpers.wait import wait_for
from tests.e2e.test_inject import call, check_rows_and_spans
from tests.e2e.test_local_stack import HELLO_REPLY, HELLO_REQUEST, REST_REPLY, counts_by_protocol, traceparent

from deploy.envoy_gateway import gateway
from deploy.envoy_gateway import manifests
from deploy.kubernetes.images import wasm_image
from envoy import wiring


PROTOCOLS = ("rest", "rest-proto", "grpc", "grpc-web", "grpc-web-text")
CALLS_PER_PROTOCOL = 3
# The clusters Envoy Gateway makes for each route rule (manifests.gateway_resources).
GRPC_WEB_CLUSTER = f"httproute/{manifests.NAMESPACE}/wirelens-http/rule/0"
REST_CLUSTER = f"httproute/{manifests.NAMESPACE}/wirelens-http/rule/1"
GRPC_CLUSTER = f"grpcroute/{manifests.NAMESPACE}/wirelens-grpc/rule/0"


# The wirelens filter's name in the gateway's listener, per build (Envoy Gateway v1.9.1's naming).
FILTER_NAMES = {
    "wasm": f"envoy.filters.http.wasm//{manifests.NAMESPACE}/{manifests.NAME}/wasm/0",
    "native": f"envoy.filters.http.dynamic_modules//{manifests.NAMESPACE}/{manifests.NAME}/dynamic-module/0",
}


@pytest.fixture(scope="module", params=wiring.MODULES)
def envoy_gateway(request, local_stack, tmp_path_factory):
    if not gateway.ENVOY_GATEWAY.exists():
        pytest.fail(f"{gateway.ENVOY_GATEWAY} is missing: {gateway.BUILD_HINT}")
    module = request.param
    names = list(manifests.load_ports({}))
    environ = {**local_stack, **dict(zip(names, map(str, free_ports(len(names)))))}
    environ["WIRELENS_GATEWAY_STATE_DIR"] = str(tmp_path_factory.mktemp(f"envoy-gateway-{module}"))
    environ["WIRELENS_GATEWAY_CONCURRENCY"] = "1"
    environ["WIRELENS_FILTER_MODULE"] = module
    settings = gateway.load_settings(environ)
    lines: list[str] = []
    try:
        t0 = time.monotonic()
        gateway.up(settings, log=lines.append)
        lines.append(f"  up in {time.monotonic() - t0:.1f}s")
        yield settings
    finally:
        envoy = gateway.envoy_pid(settings)
        t0 = time.monotonic()
        gateway.down(settings, log=lines.append)
        lines.append(f"  down in {time.monotonic() - t0:.1f}s")
        ARTIFACTS.mkdir(exist_ok=True)
        for log in (Path(settings["WIRELENS_STATE_DIR"]) / "logs").glob("*.log"):
            (ARTIFACTS / f"e2e-gateway-{module}-{log.name}").write_bytes(log.read_bytes())
        print("\n".join(lines), file=sys.stderr)
        assert envoy is None or not Path(f"/proc/{envoy}").exists() or \
            Path(f"/proc/{envoy}/stat").read_text().rsplit(") ", 1)[1].startswith("Z"), \
            f"the gateway's Envoy (pid {envoy}) outlived `gateway.py down`"


def cluster_requests(settings) -> dict[str, int]:
    return {name: gateway.envoy_stat(settings, f"cluster.{name}.upstream_rq_total") or 0
            for name in (GRPC_WEB_CLUSTER, REST_CLUSTER, GRPC_CLUSTER)}


def test_every_protocol_through_envoy_gateway_is_one_row_and_one_span(envoy_gateway):
    settings = envoy_gateway
    port = int(settings["WIRELENS_GATEWAY_PORT"])
    # What Envoy Gateway made of the resources: wirelens first, before grpc_web and the router,
    # on a listener that only loopback reaches.
    names = [f["name"] for f in gateway.http_filters(settings)]
    assert names[0] == FILTER_NAMES[settings["WIRELENS_FILTER_MODULE"]], names
    assert "envoy.filters.http.grpc_web" in names and names[-1] == "envoy.filters.http.router", names
    assert gateway.listening_addresses(port) == {"127.0.0.1"}

    run_id = f"gateway-{uuid.uuid4().hex[:8]}"
    before = cluster_requests(settings)
    expected = {}
    for protocol in PROTOCOLS:
        for _ in range(CALLS_PER_PROTOCOL):
            trace_id, tp = traceparent()
            answer = call(protocol, port, {}, None, {"traceparent": tp, "x-wirelens-run": run_id})
            assert answer.status in ("200", "OK"), (protocol, answer)
            if protocol == "rest":
                assert answer.body == REST_REPLY, answer
            elif protocol != "grpc-web-text":   # the others carry the reply message as is
                assert HELLO_REPLY in answer.body, (protocol, answer)
            expected[trace_id] = (protocol, answer)

    # Every call one row with its operation, protocol, body bytes, messages and status; every span in Jaeger.
    check_rows_and_spans(settings, {"name": "envoy-gateway"}, run_id, expected)
    assert counts_by_protocol(settings, run_id) == {p: CALLS_PER_PROTOCOL for p in PROTOCOLS}
    # gRPC message payloads, counted here independently of the filter.
    payloads = rows(settings, f"SELECT protocol, request_message_bytes, response_message_bytes, count() "
                              f"FROM wirelens.requests FINAL WHERE run_id = '{run_id}' "
                              f"GROUP BY ALL ORDER BY protocol")
    assert payloads == [[p, *(("0", "0") if p.startswith("rest") else (str(len(HELLO_REQUEST)), str(len(HELLO_REPLY)))),
                         str(CALLS_PER_PROTOCOL)] for p in sorted(PROTOCOLS)]

    # gRPC-Web went through the HTTPRoute rule for it (grpc_web turned it into gRPC for the
    # gRPC service), gRPC through the GRPCRoute, REST through the `/` rule.
    after = cluster_requests(settings)
    assert {name: after[name] - before[name] for name in after} == {
        GRPC_WEB_CLUSTER: 2 * CALLS_PER_PROTOCOL, REST_CLUSTER: 2 * CALLS_PER_PROTOCOL,
        GRPC_CLUSTER: CALLS_PER_PROTOCOL}


def test_the_module_envoy_runs_is_the_image_pulled_by_digest(envoy_gateway):
    """Envoy Gateway pulled build/oci's wirelens-filter by digest over HTTPS from our registry, kept it in its
    wasm cache, and Envoy runs exactly those bytes (the .wasm's sha256 in its config)."""
    settings = envoy_gateway
    if gateway.native(settings):
        # Not an image: the EnvoyProxy registers the .so by its path on the proxy's host, and no registry runs.
        policy = next(YAML(typ="safe").load_all(gateway.policy_path(settings).read_text()))
        assert "wasm" not in policy["spec"] and policy["spec"]["dynamicModule"], policy["spec"]
        assert stack.read_pid(settings, "wasm-registry") is None, "a registry runs for the native build"
        names = [f["name"] for f in gateway.http_filters(settings)]
        assert FILTER_NAMES["native"] in names, names
        return
    digest = wasm_image.digests()[wasm_image.FILTER]
    module = gateway.WASM.read_bytes()
    module_sha = hashlib.sha256(module).hexdigest()
    image = gateway.filter_image(settings)
    assert image == f"127.0.0.1:{settings['WIRELENS_GATEWAY_WASM_PORT']}/wirelens/wirelens-filter@{digest}"

    # The policy names the image by digest, with the manifest digest as its sha256 and our CA.
    policy = next(YAML(typ="safe").load_all(gateway.policy_path(settings).read_text()))
    code = policy["spec"]["wasm"][0]["code"]
    assert code == {"type": "Image", "image": {
        "url": image, "sha256": digest.removeprefix("sha256:"),
        "tls": {"caCertificateRef": {"kind": "Secret", "name": manifests.REGISTRY_CA_SECRET}}}}, code

    # The registry served that manifest by digest (its request log), over TLS (no other listener).
    registry_log = stack.log_path(settings, "wasm-registry").read_text()
    assert f"GET /v2/wirelens/wirelens-filter/manifests/{digest}" in registry_log, registry_log[-2000:]

    # Envoy Gateway's wasm cache: <sha256 of the image name>/<manifest digest>.wasm, the module's bytes.
    name = f"oci://127.0.0.1:{settings['WIRELENS_GATEWAY_WASM_PORT']}/wirelens/wirelens-filter"
    cached = gateway.paths(settings)["wasm_cache"] / hashlib.sha256(name.encode()).hexdigest() / \
        f"{digest.removeprefix('sha256:')}.wasm"
    assert cached.exists(), sorted(str(p) for p in gateway.paths(settings)["wasm_cache"].rglob("*"))
    assert cached.read_bytes() == module, f"{cached} is not {gateway.WASM}"

    # Envoy fetched it from Envoy Gateway's wasm server and checks the .wasm's own sha256.
    wasm_filters = [f for f in gateway.http_filters(settings) if f["name"] == FILTER_NAMES["wasm"]]
    assert wasm_filters, [f["name"] for f in gateway.http_filters(settings)]
    remote = wasm_filters[0]["typed_config"]["config"]["vm_config"]["code"]["remote"]
    assert remote["sha256"] == module_sha, json.dumps(remote)
    assert remote["http_uri"]["uri"].startswith("https://") and ":18002/" in remote["http_uri"]["uri"], remote
    assert (gateway.envoy_stat(settings, "wasm.envoy.wasm.runtime.v8.active") or 0) > 0
    print(f"pulled {image} (module sha256 {module_sha}) into {cached}", file=sys.stderr)


def edit_policy(settings, sample_rate: float) -> None:
    """Change the EnvoyExtensionPolicy file as a user would: its config's sample_rate, one rename."""
    path = gateway.paths(settings)["resources"] / "wirelens-policy.yaml"
    yaml = YAML()
    documents = list(yaml.load_all(path.read_text()))
    spec = documents[0]["spec"]
    (spec["dynamicModule"] if gateway.native(settings) else spec["wasm"])[0]["config"]["sample_rate"] = sample_rate
    temporary = path.with_name(f".{path.name}.edit")   # names starting with '.' are not read
    with open(temporary, "w") as out:
        yaml.dump_all(documents, out)
    temporary.replace(path)


def processes(settings) -> dict[str, int | None]:
    found = {"envoy-gateway": stack.read_pid(settings, "envoy-gateway"), "envoy": gateway.envoy_pid(settings)}
    if not gateway.native(settings):   # the native build is a file on this host: no registry
        found["wasm-registry"] = stack.read_pid(settings, "wasm-registry")
    return found


def rest_calls(settings, run_id: str, n: int) -> None:
    for _ in range(n):
        answer = call("rest", int(settings["WIRELENS_GATEWAY_PORT"]), {}, None, {"x-wirelens-run": run_id})
        assert answer.status == "200", answer


def logged_calls(settings, run_id: str) -> int:
    """Access-log records of a run in otel.otel_logs: every call, sampled or not."""
    return int(rows(settings, f"SELECT count() FROM otel.otel_logs "
                              f"WHERE LogAttributes['wirelens.run_id'] = '{run_id}'")[0][0])


def measured_calls(settings, run_id: str) -> int:
    return int(rows(settings, f"SELECT count() FROM wirelens.requests FINAL WHERE run_id = '{run_id}'")[0][0])


def numbered_rest_call(settings, run_id: str):
    """One numbered REST call through the gateway (tests/e2e/numbered_calls.py's send)."""
    def send(number: int, tp: str) -> str | None:
        answer = call("rest", int(settings["WIRELENS_GATEWAY_PORT"]), {}, None,
                      {"x-wirelens-run": run_id, "traceparent": tp})
        return None if answer.status == "200" and answer.body == REST_REPLY else \
            f"status {answer.status}, body {answer.body[:80]!r}"
    return send


def test_policy_change_on_disk_takes_effect_without_restarting_anything(envoy_gateway):
    settings = envoy_gateway
    started = processes(settings)
    assert all(started.values()), started
    updates = gateway.envoy_stat(settings, "listener_manager.lds.update_success")
    run = f"gateway-live-{uuid.uuid4().hex[:8]}"
    n = 10
    # Numbered calls all through both changes (tests/e2e/numbered_calls.py): every one answered, one row
    # each while sample_rate is 1, none while it is 0, the calls in each change's window one row or none.
    through = NumberedCalls(numbered_rest_call(settings, f"{run}-through"), rate_per_s=25,
                            name=f"numbered calls through the policy changes ({settings['WIRELENS_FILTER_MODULE']})")
    try:
        through.start()
        for sample_rate, phase in ((0, "unsampled"), (1, "sampled")):
            with through.change(f"EnvoyExtensionPolicy sample_rate {sample_rate}", sample_rate):
                edit_policy(settings, sample_rate)
                # The known point: the active listener's wasm filter runs the new plugin configuration.
                wait_for(f"Envoy running the wirelens filter with sample_rate {sample_rate}",
                         lambda: (gateway.active_plugin_config(settings) or {}).get("sample_rate"),
                         lambda seen: seen == sample_rate, timeout_s=60, interval_s=0.1)
            print(through.timeline()[-1], file=sys.stderr)
            rest_calls(settings, f"{run}-{phase}", n)
    finally:
        through.stop()

    # Envoy logs every call; the filter measured only those made while sampling was on.
    for phase in ("unsampled", "sampled"):
        wait_for(f"{n} access-log records of {run}-{phase} in otel.otel_logs",
                 lambda: logged_calls(settings, f"{run}-{phase}"), lambda seen: seen >= n)
    wait_for(f"{n} rows of {run}-sampled", lambda: measured_calls(settings, f"{run}-sampled"), lambda seen: seen >= n)
    assert measured_calls(settings, f"{run}-unsampled") == 0
    assert measured_calls(settings, f"{run}-sampled") == n
    assert logged_calls(settings, f"{run}-unsampled") == n
    counts = through.check(settings, f"{run}-through")
    print(through.summary(counts), file=sys.stderr)

    assert processes(settings) == started, "a process was restarted"
    assert gateway.envoy_stat(settings, "listener_manager.lds.update_success") >= updates + 2


CORS_POLICY = f"""\
apiVersion: gateway.envoyproxy.io/v1alpha1
kind: SecurityPolicy
metadata:
  name: cors-for-the-test
  namespace: {manifests.NAMESPACE}
spec:
  targetRefs:
  - group: gateway.networking.k8s.io
    kind: Gateway
    name: {manifests.NAME}
  cors:
    allowOrigins: ["https://wirelens.example"]
    allowMethods: ["POST"]
"""


def test_wirelens_stays_first_when_a_policy_adds_a_filter_envoy_gateway_puts_ahead_of_wasm(envoy_gateway):
    """Envoy Gateway orders CORS before wasm by default; the EnvoyProxy's filterOrder keeps wirelens first."""
    settings = envoy_gateway
    path = gateway.paths(settings)["resources"] / "cors-for-the-test.yaml"
    names = lambda: [f["name"] for f in gateway.http_filters(settings)]  # noqa: E731
    manifests.write_atomic(path, CORS_POLICY)
    try:
        chain = wait_for("the CORS filter in the gateway's listener", names,
                         lambda seen: "envoy.filters.http.cors" in seen, timeout_s=60, interval_s=0.1)
        assert chain[0] == FILTER_NAMES[settings["WIRELENS_FILTER_MODULE"]], chain
        assert chain.index("envoy.filters.http.cors") == 1, chain
    finally:
        path.unlink()
    wait_for("the CORS filter gone again", names, lambda seen: "envoy.filters.http.cors" not in seen,
             timeout_s=60, interval_s=0.1)
