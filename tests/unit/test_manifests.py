"""The Kubernetes, Istio and Envoy Gateway manifests, checked as users' CI would.

`kustomize build` + `kubeconform -strict` against schemas generated offline from
the CRDs (tools/k8s-schemas), the Istio mesh config through istio.io/api's
MeshConfig (tools/meshconfig-check), the Collector's and Jaeger's configs through
their own `validate` (tools/validate-manifests). And each check is shown to fail
on a broken manifest, naming the field.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from envoy import wiring  # RECORD_FIELDS
from wirelens_helpers import programs

ROOT = Path(__file__).resolve().parents[2]

PY = sys.executable
BIN = ROOT / "bin"
VALIDATE = ROOT / "tools" / "validate-manifests"
OPMAP = ROOT / "build" / "opmap.json"


@pytest.fixture(scope="module", autouse=True)
def tools():
    """kustomize, kubeconform and meshconfig-check in bin/ (`make manifest-tools`; installed here when missing)."""
    if not all((BIN / name).exists() for name in ("kustomize", "kubeconform", "meshconfig-check")):
        subprocess.run([str(ROOT / "tools" / "manifest-tools")], check=True, timeout=1800)


def validate(*args: str) -> tuple[int, list[dict]]:
    result = subprocess.run([PY, str(VALIDATE), "--json", *args], cwd=ROOT, capture_output=True, text=True,
                            timeout=900)
    assert result.stdout.strip(), f"validate-manifests printed no report:\n{result.stderr}"
    return result.returncode, json.loads(result.stdout)


def kustomize(directory: str) -> list[dict]:
    out = subprocess.run([str(BIN / "kustomize"), "build", str(ROOT / directory)], capture_output=True, text=True,
                         check=True, timeout=300).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def find(docs: list[dict], kind: str, name: str) -> dict:
    for doc in docs:
        if doc["kind"] == kind and re.fullmatch(rf"{re.escape(name)}(-[a-z0-9]{{10}})?", doc["metadata"]["name"]):
            return doc
    raise AssertionError(f"no {kind} {name} in {[(d['kind'], d['metadata']['name']) for d in docs]}")


def show(checks: list[dict]) -> None:
    for c in checks:
        print(f"{'ok  ' if c['ok'] else 'FAIL'} {c['target']}: {c['check']}" + ("" if c["ok"] else f": {c['detail']}"))


# ---------------------------------------------------------------- everything shipped is valid


def test_every_manifest_passes_kustomize_kubeconform_and_config_checks():
    code, checks = validate()
    show(checks)  # the validation output, in the test log
    failed = [c for c in checks if not c["ok"]]
    assert code == 0 and not failed, f"failed checks: {failed}"
    kinds = {(c["target"], c["check"].split(": ", 1)[1].split(" (")[0])
             for c in checks if c["check"].startswith("kubeconform")}
    for expected in [("deploy/kubernetes", "Deployment otel-collector"), ("deploy/kubernetes", "StatefulSet clickhouse"),
                     ("deploy/kubernetes", "Deployment jaeger"), ("deploy/kubernetes", "NetworkPolicy clickhouse"),
                     ("deploy/kubernetes", "NetworkPolicy otel-collector"), ("deploy/istio", "WasmPlugin wirelens"),
                     ("deploy/istio", "Telemetry wirelens")]:
        assert expected in kinds, f"{expected} was not validated"
    if (ROOT / "deploy" / "envoy_gateway").exists():
        eg = {k for t, k in kinds if t == "deploy/envoy_gateway"}
        assert any(k.startswith("EnvoyExtensionPolicy ") for k in eg), eg
        assert any(k.startswith("EnvoyProxy ") for k in eg), eg
    checked = {c["check"].split(" (")[0] for c in checks}
    assert "meshconfig-check" in checked
    # The Collector's and Jaeger's configs as the pods get them, by the programs themselves.
    assert any(c["check"].startswith("otelcol-wirelens validate") and c["ok"] for c in checks)
    assert any(c["check"].startswith("jaeger validate") and c["ok"] for c in checks)


# ---------------------------------------------------------------- and each check can fail


def test_a_broken_manifest_is_rejected_naming_the_field(tmp_path):
    docs = kustomize("deploy/kubernetes") + kustomize("deploy/istio")
    collector = find(docs, "Deployment", "otel-collector")
    container = collector["spec"]["template"]["spec"]["containers"][0]
    container["resource"] = container.pop("resources")                     # unknown field
    find(docs, "Service", "otel-collector")["spec"]["ports"][0]["port"] = "four"  # wrong type
    plugin = find(docs, "WasmPlugin", "wirelens")
    plugin["spec"]["failStrategy"] = "OPEN"                                # not in the CRD's enum
    tags = find(docs, "Telemetry", "wirelens")["spec"]["tracing"][0]["customTags"]
    tags["wirelens.record"] = {"formater": tags["wirelens.record"]["formatter"]}  # misspelt, inside a map
    broken = tmp_path / "broken.yaml"
    broken.write_text(yaml.safe_dump_all(docs, sort_keys=False))

    code, checks = validate(str(broken))
    show(checks)
    assert code == 1
    errors = {c["check"].split(": ", 1)[1].split(" (")[0]: c["detail"] for c in checks if not c["ok"]}
    assert "additional properties 'resource' not allowed" in errors["Deployment otel-collector"]
    assert "/spec/template/spec/containers/0" in errors["Deployment otel-collector"]
    assert "/spec/ports/0/port" in errors["Service otel-collector"]
    assert "/spec/failStrategy" in errors["WasmPlugin wirelens"] and "FAIL_OPEN" in errors["WasmPlugin wirelens"]
    assert "'formater' not allowed" in errors["Telemetry wirelens"]
    assert len(errors) == 4, errors  # everything else in the stream still validates


def test_a_missing_validator_fails_the_check_instead_of_skipping_it(tmp_path, monkeypatch):
    """A Collector config nobody validated is not "ok": with no bin/otelcol-wirelens the check fails, naming it."""
    import importlib.machinery
    import importlib.util

    loader = importlib.machinery.SourceFileLoader("validate_manifests", str(VALIDATE))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))
    monkeypatch.setitem(sys.modules, loader.name, module)  # its dataclasses look their module up there
    loader.exec_module(module)
    monkeypatch.setattr(module, "BIN", tmp_path / "empty-bin")
    report = module.Report()
    stream = subprocess.run([str(BIN / "kustomize"), "build", str(ROOT / "deploy" / "kubernetes")],
                            capture_output=True, text=True, check=True, timeout=300).stdout
    module.validate_program_configs(stream, tmp_path / "work", report, "deploy/kubernetes")
    collector = [c for c in report.checks if c["check"].startswith("otelcol-wirelens validate")]
    assert collector and all(not c["ok"] for c in collector), report.checks
    assert "bin/otelcol-wirelens is missing" in collector[0]["detail"], collector[0]


def test_a_broken_collector_config_is_rejected_by_the_collector(tmp_path):
    if not (BIN / "otelcol-wirelens").exists():
        pytest.fail("bin/otelcol-wirelens is missing: make collector builds it")
    docs = kustomize("deploy/kubernetes")
    overrides = find(docs, "ConfigMap", "otel-collector-kubernetes")
    overrides["data"]["kubernetes.yaml"] = overrides["data"]["kubernetes.yaml"].replace(
        "username: collector", "usernam: collector")
    broken = tmp_path / "broken.yaml"
    broken.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    code, checks = validate(str(broken))
    failed = [c for c in checks if not c["ok"]]
    assert code == 1 and len(failed) == 1, failed
    assert failed[0]["check"].startswith("otelcol-wirelens validate") and "usernam" in failed[0]["detail"]


def test_a_broken_mesh_config_is_rejected_naming_the_field(tmp_path):
    text = (ROOT / "deploy" / "istio" / "mesh-config.yaml").read_text()
    for old, new, named in [("logFormat:", "logFormats:", "logFormats"),
                            ("port: 4317", "port: four", "port"),
                            ("envoyOtelAls:", "envoyOtelALS:", "envoyOtelALS")]:
        broken = tmp_path / f"mesh-{named}.yaml"
        broken.write_text(text.replace(old, new, 1))
        result = subprocess.run([str(BIN / "meshconfig-check"), str(broken)], capture_output=True, text=True)
        assert result.returncode == 1, result.stdout
        assert named in result.stderr, result.stderr


def test_meshconfig_check_go_tests():
    env = dict(os.environ)
    env.setdefault("GOMODCACHE", str(ROOT / ".cache" / "go" / "mod"))
    env.setdefault("GOCACHE", str(ROOT / ".cache" / "go" / "build"))
    env.setdefault("GOFLAGS", "-modcacherw")
    env.setdefault("GOTOOLCHAIN", "local")
    result = subprocess.run(["go", "test", "./..."], cwd=ROOT / "tools" / "meshconfig-check", env=env,
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr


# ---------------------------------------------------------------- Istio: the record, as in the local stack


def load(path: str) -> dict:
    return yaml.safe_load((ROOT / path).read_text())


def test_istio_manifests_are_rendered_from_the_current_sources():
    if not OPMAP.exists():
        pytest.fail("build/opmap.json is missing: make proto builds it")
    result = subprocess.run([*programs.command("deploy.istio.render"), "--check"], cwd=ROOT, capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_istio_sends_the_same_record_as_the_local_stack():
    mesh = load("deploy/istio/mesh-config.yaml")["meshConfig"]
    providers = {p["name"]: p for p in mesh["extensionProviders"]}
    als = providers["wirelens-otel-als"]["envoyOtelAls"]
    # Attribute name -> Envoy format string: exactly the local stack's access-log attributes.
    assert als["logFormat"]["labels"] == {name: fmt for name, fmt, _ in wiring.RECORD_FIELDS}
    assert als["logFormat"]["text"] == wiring.ACCESS_LOG_BODY
    assert als["service"] == providers["wirelens-otel-tracing"]["opentelemetry"]["service"]
    telemetry = load("deploy/istio/telemetry.yaml")["spec"]
    tracing = telemetry["tracing"][0]
    assert {k: v["formatter"]["value"] for k, v in tracing["customTags"].items()} == {
        name: fmt for name, fmt, is_tag in wiring.RECORD_FIELDS if is_tag}
    named = [p["name"] for rule in telemetry["accessLogging"] + telemetry["tracing"] for p in rule["providers"]]
    assert named and all(name in providers for name in named), (named, list(providers))
    # The Collector the providers name is the Service deploy/kubernetes creates.
    service = find(kustomize("deploy/kubernetes"), "Service", "otel-collector")
    assert als["service"] == f"{service['metadata']['name']}.{service['metadata']['namespace']}.svc.cluster.local"
    assert als["port"] in [p["port"] for p in service["spec"]["ports"]]


def test_wasm_plugin_runs_first_fail_open_with_the_operation_map():
    spec = load("deploy/istio/wasmplugin.yaml")["spec"]
    assert spec["phase"] == "AUTHN" and spec["priority"] > 0
    assert spec["failStrategy"] == "FAIL_OPEN"
    assert spec["pluginName"] == "wirelens" and spec["type"] == "HTTP"
    assert spec["url"].startswith("oci://")
    if OPMAP.exists():
        assert spec["pluginConfig"] == json.loads(OPMAP.read_text())


# ---------------------------------------------------------------- Kubernetes: real configs, closed network


def test_collector_config_map_is_the_real_collector_config():
    docs = kustomize("deploy/kubernetes")
    assert find(docs, "ConfigMap", "otel-collector-config")["data"]["config.yaml"] == \
        (ROOT / "collector" / "config.yaml").read_text()
    schema = find(docs, "ConfigMap", "wirelens-schema")["data"]
    assert schema == {p.name: p.read_text() for p in sorted((ROOT / "queries" / "schema").glob("*.sql"))}, \
        "queries/kustomization.yaml must list every file of queries/schema/"
    # Every ${env:VAR} of the two config files is set on the container.
    container = find(docs, "Deployment", "otel-collector")["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"] for e in container["env"]}
    overrides = find(docs, "ConfigMap", "otel-collector-kubernetes")["data"]["kubernetes.yaml"]
    used = set(re.findall(r"\$\{env:(\w+)", (ROOT / "collector" / "config.yaml").read_text() + overrides))
    assert used <= env, f"not set on the Collector: {sorted(used - env)}"


def test_the_collectors_restore_the_labels_from_the_filters_operation_map():
    """Record format 2 leaves rpc.service, rpc.method, wirelens.streaming and http.route to the Collector's copy of
    the operation map: the ConfigMap otel-collector-opmap holds collector.opmap's fragment of the very map the
    WasmPlugin gives the filter, and every Collector that writes rows (the single one, the tier's gateways) is
    started with it as the --config after collector/config.yaml and kubernetes.yaml."""
    from collector import opmap

    plugin_config = load("deploy/istio/wasmplugin.yaml")["spec"]["pluginConfig"]
    expected = opmap.fragment([plugin_config])
    committed = (ROOT / "deploy" / "kubernetes" / "collector" / "opmap.yaml").read_text()
    assert committed == expected, ("deploy/kubernetes/collector/opmap.yaml is not the fragment of the WasmPlugin's "
                                   "map: python -m collector.opmap build/opmap.json -o "
                                   "deploy/kubernetes/collector/opmap.yaml")
    assert 'where log.attributes["wirelens.opmap.key"] ==' in committed  # restores something
    for directory, kind, name in (("deploy/kubernetes", "Deployment", "otel-collector"),
                                  ("deploy/kubernetes-tier", "StatefulSet", "otel-gateway")):
        docs = kustomize(directory)
        assert find(docs, "ConfigMap", "otel-collector-opmap")["data"] == {"opmap.yaml": expected}
        pod = find(docs, kind, name)["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        volumes = {v["name"]: re.sub(r"-[a-z0-9]{10}$", "", v["configMap"]["name"])
                   for v in pod["volumes"] if "configMap" in v}
        configs = []
        for arg in container["args"]:
            path = arg.removeprefix("--config=")
            (mount,) = [m for m in container["volumeMounts"] if path.startswith(m["mountPath"] + "/")]
            configs.append((volumes[mount["name"]], path.rsplit("/", 1)[1]))
        assert configs == [("otel-collector-config", "config.yaml"), ("otel-collector-kubernetes", "kubernetes.yaml"),
                           ("otel-collector-opmap", "opmap.yaml")], (directory, configs)


def test_network_policies_let_only_proxies_reach_the_collector_and_only_it_reach_clickhouse():
    docs = kustomize("deploy/kubernetes")
    policies = {d["metadata"]["name"]: d["spec"] for d in docs if d["kind"] == "NetworkPolicy"}
    deny = policies["default-deny-ingress"]
    assert deny["podSelector"] == {} and deny["policyTypes"] == ["Ingress"] and not deny.get("ingress")

    clickhouse = policies["clickhouse"]
    assert clickhouse["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "clickhouse"}
    peers = [peer for rule in clickhouse["ingress"] for peer in rule["from"]]
    assert peers == [{"podSelector": {"matchLabels": {"app.kubernetes.io/name": "otel-collector"}}}]
    collector_pod = find(docs, "Deployment", "otel-collector")["spec"]["template"]["metadata"]["labels"]
    assert collector_pod["app.kubernetes.io/name"] == "otel-collector"

    collector = policies["otel-collector"]
    (rule,) = collector["ingress"]
    assert rule["ports"] == [{"port": 4317, "protocol": "TCP"}]
    selectors = [peer["podSelector"] for peer in rule["from"]]
    assert {"matchLabels": {"security.istio.io/tlsMode": "istio"}} in selectors
    assert {"matchLabels": {"app.kubernetes.io/name": "envoy", "app.kubernetes.io/component": "proxy",
                            "app.kubernetes.io/managed-by": "envoy-gateway"}} in selectors
    assert all(peer.get("podSelector") for peer in rule["from"]), "a peer without a pod selector admits everyone"


def test_only_the_collector_user_logs_in_to_clickhouse_over_the_network():
    users = (ROOT / "deploy" / "kubernetes" / "clickhouse" / "wirelens-users.xml").read_text()
    default = users.split("<default>", 1)[1].split("</default>", 1)[0]
    assert re.findall(r"<ip>([^<]+)</ip>", default) == ["::1", "127.0.0.1"]
    assert 'replace="replace"' in default
    docs = kustomize("deploy/kubernetes")
    password_env = re.search(r'from_env="(\w+)"', users).group(1)
    clickhouse = find(docs, "StatefulSet", "clickhouse")["spec"]["template"]["spec"]["containers"][0]
    assert password_env in {e["name"] for e in clickhouse["env"]}
    secret = find(docs, "Secret", "wirelens-clickhouse")
    for container in (clickhouse, find(docs, "Deployment", "otel-collector")["spec"]["template"]["spec"]["containers"][0]):
        refs = [e["valueFrom"]["secretKeyRef"] for e in container["env"] if "valueFrom" in e]
        assert [r["name"] for r in refs] == [secret["metadata"]["name"]], refs


def test_egctl_finds_a_reference_error_it_exits_0_on(tmp_path):
    """egctl x translate exits 0 when a route names a backend that does not exist; the check reads the status."""
    rendered = tmp_path / "rendered"
    subprocess.run([*programs.command("deploy.envoy_gateway.manifests"), "-o", str(rendered),
                    "--backend-host", "wirelens-services.example"], cwd=ROOT, check=True, capture_output=True)
    docs = [d for path in sorted(rendered.glob("*.yaml")) for d in yaml.safe_load_all(path.read_text()) if d]
    route = next(d for d in docs if d["kind"] == "HTTPRoute")
    route["spec"]["rules"][-1]["backendRefs"][0]["name"] = "no-such-backend"
    broken = tmp_path / "broken-gateway.yaml"
    broken.write_text(yaml.safe_dump_all(docs))
    code, checks = validate(str(broken))
    failed = [c for c in checks if not c["ok"]]
    assert code == 1
    assert any(c["check"].startswith("egctl x translate: /httpRoutes[0]") and "ResolvedRefs=False" in c["detail"]
               and "no-such-backend" in c["detail"] for c in failed), failed


# ---------------------------------------------------------------- the filter's settings in Envoy Gateway and Istio


def rendered_policy_config(directory: Path) -> dict:
    (policy,) = yaml.safe_load_all((directory / "wirelens-policy.yaml").read_text().split("\n", 1)[1])
    (wasm,) = policy["spec"]["wasm"]
    return wasm["config"]


def test_envoy_gateway_policy_carries_the_counterfactual_settings(tmp_path):
    if not OPMAP.exists():
        pytest.fail("build/opmap.json is missing: make proto builds it")
    renderer = programs.command("deploy.envoy_gateway.manifests")
    plain, tuned = tmp_path / "plain", tmp_path / "tuned"
    subprocess.run([*renderer, "-o", str(plain)], cwd=ROOT, check=True, capture_output=True)
    subprocess.run([*renderer, "-o", str(tuned), "--sample-rate", "0.5", "--counterfactual-rate", "0.05",
                    "--counterfactual-max-bytes", "16384"], cwd=ROOT, check=True, capture_output=True)
    opmap = json.loads(OPMAP.read_text())
    assert rendered_policy_config(plain) == opmap  # nothing given: the filter's defaults
    assert rendered_policy_config(tuned) == {**opmap, "sample_rate": 0.5, "counterfactual_rate": 0.05,
                                             "counterfactual_max_bytes": 16384}
    for flag, value in (("--counterfactual-rate", "1.5"), ("--counterfactual-max-bytes", "-1"), ("--sample-rate", "2")):
        result = subprocess.run([*renderer, "-o", str(tmp_path / "bad"), flag, value], cwd=ROOT,
                                capture_output=True, text=True)
        assert result.returncode == 2 and f"{flag}={value!r}: expected" in result.stderr, result.stderr
        assert not (tmp_path / "bad").exists()


def test_envoy_gateway_set_commands_change_one_setting_and_keep_the_others(tmp_path):
    from deploy.envoy_gateway import gateway
    from deploy.envoy_gateway import manifests

    if not (OPMAP.exists() and gateway.WASM.exists()):
        pytest.fail("build/opmap.json or the filter is missing: make proto filter builds them")
    environ = {k: v for k, v in os.environ.items() if not k.startswith("WIRELENS_")}
    settings = gateway.load_settings({**environ, "WIRELENS_GATEWAY_STATE_DIR": str(tmp_path / "state")})
    # The standalone gateway follows the local stack's counterfactual settings (1 and 1 MiB there), like its Envoy.
    assert (gateway.inputs(settings).counterfactual_rate, gateway.inputs(settings).counterfactual_max_bytes) == \
        (1.0, 1 << 20)
    assert gateway.inputs({**settings, "WIRELENS_COUNTERFACTUAL_RATE": "0.2"}).counterfactual_rate == 0.2
    assert gateway.policy_settings(settings) == {}   # no policy on disk yet
    path = gateway.set_counterfactual_rate(settings, 0.3)
    assert path == gateway.policy_path(settings)
    assert gateway.policy_settings(settings) == {"counterfactual_rate": 0.3, "counterfactual_max_bytes": 1 << 20}
    gateway.set_sample_rate(settings, 0.1)
    assert gateway.policy_settings(settings) == {"sample_rate": 0.1, "counterfactual_rate": 0.3,
                                                 "counterfactual_max_bytes": 1 << 20}
    gateway.set_counterfactual_rate(settings, 0)
    config = rendered_policy_config(path.parent)
    assert (config["sample_rate"], config["counterfactual_rate"]) == (0.1, 0)
    assert config["operations"] == json.loads(OPMAP.read_text())["operations"]
    with pytest.raises(ValueError, match=r"counterfactual rate=2: expected a number in \[0, 1\]"):
        manifests.extension_policy(gateway.inputs(settings, counterfactual_rate=2))
    with pytest.raises(ValueError, match="counterfactual max bytes=-5"):
        manifests.extension_policy(gateway.inputs(settings, counterfactual_max_bytes=-5))
    with pytest.raises(SystemExit):
        gateway.main(["set-counterfactual-rate", "1.5"])


def test_istio_wasm_plugin_carries_the_counterfactual_settings(tmp_path):
    if not OPMAP.exists():
        pytest.fail("build/opmap.json is missing: make proto builds it")
    renderer = programs.command("deploy.istio.render")
    flags = ["--counterfactual-rate", "0.05", "--counterfactual-max-bytes", "16384"]
    subprocess.run([*renderer, "--out-dir", str(tmp_path), *flags], cwd=ROOT, check=True, capture_output=True)
    spec = yaml.safe_load((tmp_path / "wasmplugin.yaml").read_text())["spec"]
    assert spec["pluginConfig"] == {**json.loads(OPMAP.read_text()), "counterfactual_rate": 0.05,
                                    "counterfactual_max_bytes": 16384}
    # --check compares with the same settings; the committed file (rendered without them) differs only there.
    assert subprocess.run([*renderer, "--out-dir", str(tmp_path), "--check", *flags]).returncode == 0
    result = subprocess.run([*renderer, "--check", *flags], capture_output=True, text=True)
    assert result.returncode == 1 and "wasmplugin.yaml" in result.stderr
    assert sorted(line for line in result.stdout.splitlines() if line.startswith("+ ")) == [
        "+    counterfactual_max_bytes: 16384", "+    counterfactual_rate: 0.05"]
    result = subprocess.run([*renderer, "--out-dir", str(tmp_path / "bad"), "--counterfactual-rate", "-0.1"],
                            capture_output=True, text=True)
    assert result.returncode == 2 and "--counterfactual-rate='-0.1': expected a number in [0, 1]" in result.stderr
    assert not (tmp_path / "bad").exists()


def test_envoy_gateway_native_build_set_commands_keep_the_dynamic_module(tmp_path):
    """WIRELENS_FILTER_MODULE=native: the policy's dynamicModule carries the settings, the EnvoyProxy registers
    a content-addressed copy of the .so (no wasm server), and the set commands keep the native build."""
    from deploy.envoy_gateway import gateway
    from deploy.envoy_gateway import manifests
    from envoy import wiring

    if not (OPMAP.exists() and wiring.MODULE_FILES["native"].exists()):
        pytest.fail("build/opmap.json or the native filter is missing: make proto native builds them")
    environ = {k: v for k, v in os.environ.items() if not k.startswith("WIRELENS_")}
    settings = gateway.load_settings({**environ, "WIRELENS_GATEWAY_STATE_DIR": str(tmp_path / "state"),
                                      "WIRELENS_FILTER_MODULE": "native"})
    inputs = gateway.inputs(settings)
    assert gateway.native(settings) and inputs.module == "native"
    placed = Path(inputs.native_path)
    assert placed.parent == tmp_path / "state" / "native" and placed.name.startswith("libwirelens-")
    assert [c.name for c in gateway.COMPONENTS if c.enabled(settings)] == ["envoy-gateway"]
    inputs.envoy_certs.mkdir(parents=True)
    for name in ("tls.crt", "tls.key", "ca.crt"):
        (inputs.envoy_certs / name).write_text(f"fixed {name}\n")
    files = manifests.render_files(inputs)
    (proxy,) = files["envoyproxy.yaml"]
    assert proxy["spec"]["dynamicModules"] == [{"name": "wirelens", "source": {"type": "Local",
                                                                               "local": {"path": str(placed)}}}]
    assert {entry["name"] for entry in proxy["spec"]["filterOrder"]} == {"envoy.filters.http.dynamic_modules"}
    assert "envoy.filters.http.wasm" in [entry["before"] for entry in proxy["spec"]["filterOrder"]]
    patches = files["standalone.yaml"][1]["spec"]["jsonPatches"]
    assert manifests.WASM_CLUSTER not in [patch["name"] for patch in patches]
    gateway.set_sample_rate(settings, 0.1)
    gateway.set_counterfactual_rate(settings, 0)
    assert gateway.policy_settings(settings) == {"sample_rate": 0.1, "counterfactual_rate": 0,
                                                 "counterfactual_max_bytes": 1 << 20}
    (policy,) = yaml.safe_load_all(gateway.policy_path(settings).read_text())
    assert "wasm" not in policy["spec"]
    (module,) = policy["spec"]["dynamicModule"]
    assert (module["name"], module["filterName"]) == ("wirelens", "wirelens")
    assert module["config"]["operations"] == json.loads(OPMAP.read_text())["operations"]
    with pytest.raises(ValueError, match="absolute path"):
        manifests.envoy_proxy(manifests.Inputs(**{**vars(inputs), "native_path": "libwirelens.so"}))
