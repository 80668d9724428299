"""deploy/istio/local.py: the resources of the Istio gateway run, and its settings (no process started).

The run itself (istiod's translation, Envoy, rows and spans) is tests/e2e/test_istio.py.
"""

from __future__ import annotations

import pytest
import yaml

from deploy.istio import local, render
from wirelens_helpers.ports import free_ports


@pytest.fixture
def settings(tmp_path):
    environ = dict(zip(local.PORTS, map(str, free_ports(len(local.PORTS)))))
    environ.update(WIRELENS_ISTIO_STATE_DIR=str(tmp_path / "istio"), WIRELENS_STATE_DIR=str(tmp_path / "stack"))
    return local.load_settings(environ)


def by_kind(resources: dict[str, list[dict]]) -> dict[tuple[str, str], dict]:
    return {(doc["kind"], doc["metadata"]["name"]): doc for docs in resources.values() for doc in docs}


@pytest.mark.parametrize("variable, value, named", [
    ("WIRELENS_ISTIO_PORT", "http", "WIRELENS_ISTIO_PORT='http'"),
    ("WIRELENS_ISTIO_XDS_PORT", "70000", "WIRELENS_ISTIO_XDS_PORT='70000'"),
    ("WIRELENS_ISTIO_MODULE_SOURCE", "s3", "WIRELENS_ISTIO_MODULE_SOURCE='s3'"),
    ("WIRELENS_ISTIO_CONCURRENCY", "0", "WIRELENS_ISTIO_CONCURRENCY='0'"),
    ("WIRELENS_FILTER_MODULE", "native", "WIRELENS_FILTER_MODULE=native"),
])
def test_a_bad_setting_names_the_variable(tmp_path, variable, value, named):
    with pytest.raises(local.StackError, match=named.replace("(", r"\(")):
        local.load_settings({"WIRELENS_ISTIO_STATE_DIR": str(tmp_path), variable: value})


def test_the_wasm_plugins_are_the_committed_renderers_with_a_local_module_and_a_port_each(settings):
    plugins = local.wasm_plugins(settings)
    main, transcoded = plugins["wasmplugin.yaml"], plugins["wasmplugin-transcoded.yaml"]
    committed = render.wasm_plugin(local.plugin_config(settings), "unused", None)["spec"]
    for plugin, port, extra in ((main, "WIRELENS_ISTIO_PORT", {}),
                                (transcoded, "WIRELENS_ISTIO_TRANSCODE_PORT", {"rest_transcoded": True})):
        spec = plugin["spec"]
        assert spec["url"] == f"file://{local.WASM}" and spec["sha256"] == local.sha256_file(local.WASM)
        assert spec["match"] == [{"mode": render.WORKLOAD_MODE, "ports": [{"number": int(settings[port])}]}]
        assert spec["pluginConfig"] == {**local.plugin_config(settings), **extra}
        # Everything else as deploy/istio/wasmplugin.yaml has it: phase, priority, failStrategy, pluginName.
        assert {k: v for k, v in spec.items() if k not in ("url", "sha256", "match", "pluginConfig")} == \
            {k: v for k, v in committed.items() if k not in ("url", "match", "pluginConfig")}
    assert main["metadata"]["name"] != transcoded["metadata"]["name"]


def test_sample_rate_rewrites_only_the_plugins_sample_rate(settings):
    local.write_resources(settings)
    config_dir = local.paths(settings)["config_dir"]
    before = {p.name: p.read_text() for p in config_dir.iterdir()}
    written = local.set_sample_rate(settings, 0)
    assert sorted(p.name for p in written) == ["wasmplugin-transcoded.yaml", "wasmplugin.yaml"]
    after = {p.name: p.read_text() for p in config_dir.iterdir()}
    assert set(after) == set(before), "a temporary file was left in the watched dir"
    for name in before:
        if name.startswith("wasmplugin"):
            old, new = yaml.safe_load(before[name]), yaml.safe_load(after[name])
            assert new["spec"]["pluginConfig"]["sample_rate"] == 0
            new["spec"]["pluginConfig"]["sample_rate"] = old["spec"]["pluginConfig"]["sample_rate"]
            assert new == old, name
        else:
            assert after[name] == before[name], name


def test_the_providers_reach_the_local_collector_through_a_service_entry(settings):
    resources = local.resources(settings)
    docs = by_kind(resources)
    assert docs[("Telemetry", "wirelens")] == render.telemetry()
    providers = {p["name"]: p for p in local.mesh_config(settings)["meshConfig"]["extensionProviders"]}
    assert providers == {p["name"]: p for p in render.mesh_config(
        local.COLLECTOR_HOST, int(settings["WIRELENS_COLLECTOR_OTLP_PORT"]))["meshConfig"]["extensionProviders"]}
    collector = docs[("ServiceEntry", "wirelens-collector")]["spec"]
    for provider in providers.values():
        target = provider.get("envoyOtelAls") or provider["opentelemetry"]
        assert target["service"] in collector["hosts"]
        assert [p["protocol"] for p in collector["ports"] if p["number"] == target["port"]] == ["GRPC"]
    assert collector["endpoints"] == [{"address": "127.0.0.1"}] and collector["resolution"] == "STATIC"


def test_the_gateways_bind_loopback_and_route_to_the_local_services(settings):
    docs = by_kind(local.resources(settings))
    for name, variable, protocol in ((local.GATEWAY, "WIRELENS_ISTIO_PORT", "GRPC-WEB"),
                                     (local.TRANSCODED_GATEWAY, "WIRELENS_ISTIO_TRANSCODE_PORT", "HTTP")):
        (server,) = docs[("Gateway", name)]["spec"]["servers"]
        assert server["bind"] == "127.0.0.1"
        assert server["port"]["number"] == int(settings[variable]) and server["port"]["protocol"] == protocol
        assert docs[("VirtualService", name)]["spec"]["gateways"] == [name]
    hosts = {doc["spec"]["hosts"][0]: doc["spec"]["ports"][0] for (kind, _), doc in docs.items()
             if kind == "ServiceEntry"}
    assert hosts[local.REST_HOST]["number"] == int(settings["WIRELENS_REST_PORT"])
    assert hosts[local.GRPC_HOST] == {"number": int(settings["WIRELENS_GRPC_PORT"]),
                                      "name": f"grpc-{settings['WIRELENS_GRPC_PORT']}", "protocol": "GRPC"}
    patch = docs[("EnvoyFilter", "wirelens-transcoder")]["spec"]["configPatches"][0]
    assert patch["match"]["listener"]["portNumber"] == int(settings["WIRELENS_ISTIO_TRANSCODE_PORT"])
    assert patch["patch"]["operation"] == "INSERT_BEFORE"
    assert patch["patch"]["value"]["typed_config"]["proto_descriptor"] == str(local.DESCRIPTORS)
