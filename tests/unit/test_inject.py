"""Unit tests of envoy/inject (python -m envoy.inject): what it adds, where, what it keeps, and that it takes it all out again.

Real Envoy checks of the result (validate, live traffic) are in tests/e2e/test_inject.py.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2
from ruamel.yaml import YAML

from envoy import inject
from envoy import wiring

ROOT = Path(__file__).resolve().parents[2]

DESCRIPTORS = ROOT / "build" / "proto" / "wirelens.pb"

FRONT_PROXY = """\
# A front proxy someone wrote.
static_resources:
  listeners:
    - name: ingress
      address:
        socket_address: { address: 127.0.0.1, port_value: 10000 }
      filter_chains:
        - filters:
            - name: envoy.filters.network.http_connection_manager
              typed_config:
                "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
                stat_prefix: ingress_http
                access_log:
                  - name: envoy.access_loggers.stdout
                    typed_config:
                      "@type": type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StdoutAccessLog
                http_filters:
                  - name: envoy.filters.http.rbac   # auth comes before the router
                    typed_config:
                      "@type": type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC
                  - name: envoy.filters.http.grpc_web
                    typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.grpc_web.v3.GrpcWeb}
                  - name: envoy.filters.http.router
                    typed_config:
                      "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
                route_config:
                  virtual_hosts:
                    - name: all
                      domains: ["*"]
                      routes:
                        - match: { prefix: "/" }
                          route: { cluster: backend }
    - name: metrics
      address:
        socket_address: { address: 127.0.0.1, port_value: 10001 }
      filter_chains:
        - filters:
            - name: envoy.filters.network.tcp_proxy
              typed_config:
                "@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy
                stat_prefix: metrics
                cluster: backend
  clusters:
    - name: backend
      type: STATIC
      load_assignment:
        cluster_name: backend
        endpoints:
          - lb_endpoints:
              - endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: 18080 } } }
"""

HCM_TYPE = "type.googleapis.com/" + inject.HCM_TYPE


@pytest.fixture()
def wasm(tmp_path) -> Path:
    path = tmp_path / "wirelens_filter.wasm"
    path.write_bytes(b"\0asm\1\0\0\0")
    return path


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    code = inject.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def hcm_of(config: dict, listener: int = 0) -> dict:
    return config["static_resources"]["listeners"][listener]["filter_chains"][0]["filters"][0]["typed_config"]


def load(text: str) -> dict:
    return YAML(typ="safe").load(text)


def test_filter_goes_first_and_everything_else_stays(tmp_path, wasm, capsys):
    source = tmp_path / "envoy.yaml"
    source.write_text(FRONT_PROXY)
    code, out, err = run([str(source), "--wasm", str(wasm), "--descriptor-set", str(DESCRIPTORS)], capsys)
    assert code == 0, err
    config = load(out)
    hcm = hcm_of(config)
    names = [f["name"] for f in hcm["http_filters"]]
    assert names == ["wirelens", "envoy.filters.http.rbac", "envoy.filters.http.grpc_web", "envoy.filters.http.router"]
    wasm_config = hcm["http_filters"][0]["typed_config"]["config"]
    assert wasm_config["failure_policy"] == "FAIL_OPEN"
    assert wasm_config["vm_config"]["code"]["local"]["filename"] == str(wasm)
    plugin = json.loads(wasm_config["configuration"]["value"])
    assert {op["operation"] for op in plugin["operations"]} >= {"hello.SayHello", "catalog.GetProduct"}
    assert "rest_transcoded" not in plugin
    # The user's access log stays, ours is appended; tracing is added (there was none).
    assert [log["name"] for log in hcm["access_log"]] == ["envoy.access_loggers.stdout", "wirelens.access_log"]
    assert hcm["tracing"]["provider"]["typed_config"]["grpc_service"]["envoy_grpc"]["cluster_name"] == \
        "wirelens_otel_collector"
    assert [t["tag"] for t in hcm["tracing"]["custom_tags"]] == [t["tag"] for t in wiring.span_tags()]
    assert [c["name"] for c in config["static_resources"]["clusters"]] == ["backend", "wirelens_otel_collector"]
    # The TCP listener is untouched, and every line of the user's file is still there, comments included.
    assert config["static_resources"]["listeners"][1] == load(FRONT_PROXY)["static_resources"]["listeners"][1]
    out_lines = out.splitlines()
    assert all(line in out_lines for line in FRONT_PROXY.splitlines()), "a line of the input was changed"
    assert 'listener "ingress"' in err and 'listener "metrics": no HTTP connection manager' in err


def test_twice_is_once_and_remove_gives_back_the_original_bytes(tmp_path, wasm, capsys):
    source = tmp_path / "envoy.yaml"
    source.write_text(FRONT_PROXY)
    flags = ["--wasm", str(wasm), "--descriptor-set", str(DESCRIPTORS), "--collector", "collector.observability:4317"]
    _, once, _ = run([str(source), *flags], capsys)
    injected = tmp_path / "injected.yaml"
    injected.write_text(once)
    _, twice, _ = run([str(injected), *flags], capsys)
    assert twice == once
    code, removed, err = run([str(injected), "--remove"], capsys)
    assert code == 0, err
    assert removed == FRONT_PROXY
    # A DNS name for the Collector gets a DNS cluster.
    (cluster,) = [c for c in load(once)["static_resources"]["clusters"] if c["name"] == "wirelens_otel_collector"]
    assert cluster["type"] == "STRICT_DNS"


def test_json_stays_json_and_comes_back_equal(tmp_path, wasm, capsys):
    original = load(FRONT_PROXY)
    source = tmp_path / "envoy.json"
    source.write_text(json.dumps(original, indent=4))
    _, out, _ = run([str(source), "--wasm", str(wasm)], capsys)
    injected = json.loads(out)
    assert hcm_of(injected)["http_filters"][0]["name"] == "wirelens"
    (tmp_path / "injected.json").write_text(out)
    _, removed, _ = run([str(tmp_path / "injected.json"), "--remove"], capsys)
    assert removed == source.read_text()


def test_existing_tracer_is_kept_and_gets_the_tags(tmp_path, wasm, capsys):
    config = load(FRONT_PROXY)
    tracing = {"provider": {"name": "envoy.tracers.zipkin", "typed_config": {
        "@type": "type.googleapis.com/envoy.config.trace.v3.ZipkinConfig", "collector_cluster": "zipkin",
        "collector_endpoint": "/api/v2/spans", "collector_endpoint_version": "HTTP_JSON"}},
        "custom_tags": [{"tag": "team", "literal": {"value": "edge"}}]}
    hcm_of(config)["tracing"] = tracing
    source = tmp_path / "envoy.json"
    source.write_text(json.dumps(config))
    code, out, err = run([str(source), "--wasm", str(wasm), "--access-log", "file",
                          "--access-log-path", str(tmp_path / "access.jsonl")], capsys)
    assert code == 0, err
    hcm = hcm_of(json.loads(out))
    assert hcm["tracing"]["provider"] == tracing["provider"]
    assert [t["tag"] for t in hcm["tracing"]["custom_tags"]] == ["team"] + [t["tag"] for t in wiring.span_tags()]
    assert "kept your tracer envoy.tracers.zipkin" in err
    # The file sink needs no Collector cluster, and the tracer is the user's: none is added.
    assert [c["name"] for c in json.loads(out)["static_resources"]["clusters"]] == ["backend"]
    assert hcm["access_log"][-1]["typed_config"]["path"] == str(tmp_path / "access.jsonl")


def test_transcoding_hcm_records_rest_transcoded_from_its_own_descriptor(tmp_path, wasm, capsys):
    config = load(FRONT_PROXY)
    hcm_of(config)["http_filters"].insert(0, {
        "name": "envoy.filters.http.grpc_json_transcoder",
        "typed_config": {"@type": "type.googleapis.com/" + inject.TRANSCODER_TYPE,
                         "proto_descriptor": str(DESCRIPTORS), "services": ["wirelens.v1.Hello"]}})
    source = tmp_path / "envoy.json"
    source.write_text(json.dumps(config))
    code, out, err = run([str(source), "--wasm", str(wasm)], capsys)
    assert code == 0, err
    first = hcm_of(json.loads(out))["http_filters"][0]
    assert first["name"] == "wirelens_transcoded"
    plugin = json.loads(first["typed_config"]["config"]["configuration"]["value"])
    assert plugin["rest_transcoded"] is True
    assert "hello.SayHello" in {op["operation"] for op in plugin["operations"]}
    assert "grpc_json_transcoder's proto_descriptor" in err


def test_users_own_services_are_mapped(tmp_path, wasm, capsys):
    proto = tmp_path / "shop" / "v1" / "cart.proto"
    proto.parent.mkdir(parents=True)
    proto.write_text('syntax = "proto3";\npackage shop.v1;\nimport "google/api/annotations.proto";\n'
                     "message AddRequest { string sku = 1; }\nmessage AddReply { int32 items = 1; }\n"
                     "service Cart { rpc Add(AddRequest) returns (AddReply) {\n"
                     '  option (google.api.http) = { post: "/v1/cart/{sku}" body: "*" }; } }\n')
    descriptors = tmp_path / "shop.pb"
    includes = subprocess.run([sys.executable, "-c", "import os, google.api, grpc_tools;"
                               "print(os.path.join(os.path.dirname(grpc_tools.__file__), '_proto'));"
                               "print(os.path.dirname(os.path.dirname(list(google.api.__path__)[0])))"],
                              capture_output=True, text=True, check=True).stdout.split()
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{tmp_path}", *(f"-I{i}" for i in includes),
                    "--include_imports", f"--descriptor_set_out={descriptors}", "shop/v1/cart.proto"], check=True)
    source = tmp_path / "envoy.yaml"
    source.write_text(FRONT_PROXY)
    code, out, err = run([str(source), "--wasm", str(wasm), "--descriptor-set", str(descriptors)], capsys)
    assert code == 0, err
    plugin = json.loads(hcm_of(load(out))["http_filters"][0]["typed_config"]["config"]["configuration"]["value"])
    assert plugin["operations"] == [{
        "grpc_path": "/shop.v1.Cart/Add", "operation": "cart.Add", "rpc_service": "shop.v1.Cart",
        "rpc_method": "Add", "streaming": "unary",
        "request_type": "shop.v1.AddRequest", "response_type": "shop.v1.AddReply",
        "http_rules": [{"method": "POST", "pattern": "/v1/cart/{sku}", "body": "*"}]}]
    # The messages' schema, pruned to them (opmap.py's "descriptors"): only the cart's own file.
    schema = descriptor_pb2.FileDescriptorSet.FromString(base64.b64decode(plugin["descriptors"]))
    assert [f.name for f in schema.file] == ["shop/v1/cart.proto"] and not schema.file[0].service
    assert "with the schema of 1 operations' messages" in err
    code, out, err = run([str(source), "--wasm", str(wasm), "--descriptor-set", str(descriptors),
                          "--no-descriptors"], capsys)
    assert code == 0, err
    plugin = json.loads(hcm_of(load(out))["http_filters"][0]["typed_config"]["config"]["configuration"]["value"])
    assert "descriptors" not in plugin and "request_type" not in plugin["operations"][0]


def test_listener_flag_picks_hcms(tmp_path, wasm, capsys):
    source = tmp_path / "envoy.yaml"
    source.write_text(FRONT_PROXY)
    code, _, err = run([str(source), "--wasm", str(wasm), "--listener", "nope"], capsys)
    assert code == 1
    assert "--listener nope: no static listener has that name (listeners: ingress, metrics)" in err


def test_what_it_cannot_handle_is_named_with_what_to_do(tmp_path, wasm, capsys):
    config = load(FRONT_PROXY)
    config["dynamic_resources"] = {"lds_config": {"ads": {}}}
    config["static_resources"]["listeners"].append({
        "name": "from_control_plane", "address": {"socket_address": {"address": "127.0.0.1", "port_value": 1}},
        "filter_chains": [{"filters": [{"name": "envoy.filters.network.http_connection_manager",
                                        "config_discovery": {"config_source": {"ads": {}},
                                                             "type_urls": [HCM_TYPE]}}]}]})
    config["static_resources"]["listeners"].append({
        "name": "struct", "address": {"socket_address": {"address": "127.0.0.1", "port_value": 2}},
        "filter_chains": [{"filters": [{"name": "envoy.filters.network.http_connection_manager",
                                        "typed_config": {"@type": "type.googleapis.com/udpa.type.v1.TypedStruct",
                                                         "type_url": HCM_TYPE, "value": {}}}]}]})
    source = tmp_path / "envoy.json"
    source.write_text(json.dumps(config))
    code, out, err = run([str(source), "--wasm", str(wasm)], capsys)
    assert code == 0, err  # the static HCM was injected; the others are reported
    assert "cannot inject: listeners from LDS (dynamic_resources.lds_config)" in err and "ECDS" in err
    assert 'cannot inject: listener "from_control_plane" (filter chain 0): its HTTP connection manager comes ' \
           "from a discovery service" in err
    assert 'cannot inject: listener "struct" (filter chain 0): the HTTP connection manager is written as a ' \
           "udpa.type.v1.TypedStruct" in err


def test_nothing_to_inject_fails_and_bad_input_is_named(tmp_path, wasm, capsys):
    source = tmp_path / "envoy.yaml"
    source.write_text("static_resources:\n  listeners: []\n")
    assert run([str(source), "--wasm", str(wasm)], capsys)[0] == 1
    source.write_text("static_resources: [\n")
    code, _, err = run([str(source), "--wasm", str(wasm)], capsys)
    assert code == 1 and f"{source}: not valid YAML" in err
    bad = tmp_path / "bad.pb"
    bad.write_bytes(b"\xff\xff\xff")
    source.write_text(FRONT_PROXY)
    code, _, err = run([str(source), "--wasm", str(wasm), "--descriptor-set", str(bad)], capsys)
    assert code == 1 and "not a FileDescriptorSet" in err
    code, _, err = run([str(source), "--wasm", str(tmp_path / "missing.wasm")], capsys)
    assert code == 1 and "missing.wasm: no such file" in err


def test_diff_shows_only_the_change(tmp_path, wasm, capsys):
    source = tmp_path / "envoy.yaml"
    source.write_text(FRONT_PROXY)
    code, out, _ = run([str(source), "--wasm", str(wasm), "--diff"], capsys)
    assert code == 0
    removed = [line for line in out.splitlines() if line.startswith("-") and not line.startswith("---")]
    assert removed == []
    assert "+                  - name: wirelens" in out
    _, injected, _ = run([str(source), "--wasm", str(wasm)], capsys)
    (tmp_path / "injected.yaml").write_text(injected)
    code, out, _ = run([str(tmp_path / "injected.yaml"), "--remove", "--diff"], capsys)
    assert code == 0 and "-                  - name: wirelens" in out
    assert not [line for line in out.splitlines() if line.startswith("+") and not line.startswith("+++")]


def test_collector_config_is_the_operation_map_injected(tmp_path, wasm, capsys):
    """--collector-config FILE: the Collector's copy of the map the filter got (collector/opmap.py's fragment),
    which restores the labels record format 2 leaves out."""
    from collector import opmap
    from envoy.inject import cli

    source = tmp_path / "envoy.yaml"
    source.write_text(FRONT_PROXY)
    fragment = tmp_path / "collector" / "opmap.yaml"
    fragment.parent.mkdir()
    code, out, err = run([str(source), "--wasm", str(wasm), "--descriptor-set", str(DESCRIPTORS),
                          "--collector-config", str(fragment)], capsys)
    assert code == 0, err
    plugin = json.loads(hcm_of(load(out))["http_filters"][0]["typed_config"]["config"]["configuration"]["value"])
    assert fragment.read_text() == opmap.fragment([plugin])
    statements = load(fragment.read_text())["processors"][opmap.PROCESSOR]["log_statements"][0]["statements"]
    key = opmap.labels_key("hello.SayHello", "wirelens.v1.Hello", "SayHello", "unary", "/v1/hello")
    assert any(f'== "{key}" and log.attributes["wirelens.operation"] == "hello.SayHello"' in s and
               '"http.route":"/v1/hello"' in s for s in statements), statements
    assert f"wrote {fragment}" in err and "--config collector/config.yaml" in err
    assert "--collector-config FILE" in cli.build_parser().format_help()
    # Nothing injected: nothing written.
    bare = tmp_path / "bare.yaml"
    bare.write_text("static_resources: {listeners: [], clusters: []}\n")
    other = tmp_path / "other.yaml"
    code, _, _ = run([str(bare), "--wasm", str(wasm), "--collector-config", str(other)], capsys)
    assert code == 1 and not other.exists()
    # Only where the filter is injected: not with --remove, --diff or --update-ecds.
    for extra in (["--remove"], ["--diff"]):
        with pytest.raises(SystemExit) as exit_info:
            run([str(source), "--wasm", str(wasm), "--collector-config", str(other), *extra], capsys)
        assert exit_info.value.code == 2 and "--collector-config" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        run(["--update-ecds", "--ecds-dir", str(tmp_path / "ecds"), "--sample-rate", "0.5",
             "--collector-config", str(other)], capsys)
    assert exit_info.value.code == 2 and "--collector-config" in capsys.readouterr().err
    assert not other.exists()


def test_ecds_serves_the_filter_from_a_file_and_updates_it(tmp_path, wasm, capsys):
    source = tmp_path / "envoy.yaml"
    source.write_text(FRONT_PROXY)
    ecds = tmp_path / "ecds"
    code, out, err = run([str(source), "--wasm", str(wasm), "--ecds-dir", str(ecds)], capsys)
    assert code == 0, err
    entry = hcm_of(load(out))["http_filters"][0]
    discovery = entry["config_discovery"]
    resource_file = ecds / "wirelens.json"
    assert discovery["config_source"]["path_config_source"]["path"] == str(resource_file)
    assert discovery["type_urls"] == [inject.WASM_TYPE]
    assert "--service-node" in err  # this bootstrap has no node: ECDS needs one
    (resource,) = json.loads(resource_file.read_text())["resources"]
    assert resource["name"] == "wirelens" and resource["typed_config"] == discovery["default_config"]
    code_file = Path(resource["typed_config"]["config"]["vm_config"]["code"]["local"]["filename"])
    assert code_file.parent == ecds and code_file.read_bytes() == wasm.read_bytes()

    def plugin() -> dict:
        (resource,) = json.loads(resource_file.read_text())["resources"]
        return json.loads(resource["typed_config"]["config"]["configuration"]["value"])

    assert plugin()["operations"] == []
    code, _, err = run(["--update-ecds", "--ecds-dir", str(ecds), "--sample-rate", "0.25"], capsys)
    assert code == 0, err
    assert plugin() == {"operations": [], "sample_rate": 0.25}
    assert "sample_rate 1 -> 0.25" in err
    code, _, err = run(["--update-ecds", "--ecds-dir", str(ecds), "--descriptor-set", str(DESCRIPTORS)], capsys)
    assert code == 0, err
    assert plugin()["sample_rate"] == 0.25 and len(plugin()["operations"]) == 10  # what was not named stays
    assert plugin()["descriptors"]  # the new map's schema came with it
    code, _, err = run(["--update-ecds", "--ecds-dir", str(ecds), "--descriptor-set", str(DESCRIPTORS),
                        "--no-descriptors"], capsys)
    assert code == 0, err
    assert "descriptors" not in plugin() and len(plugin()["operations"]) == 10
    run(["--update-ecds", "--ecds-dir", str(ecds), "--descriptor-set", str(DESCRIPTORS)], capsys)
    code, _, err = run(["--update-ecds", "--ecds-dir", str(ecds), "--no-descriptors"], capsys)
    assert code == 0 and "descriptors removed" in err, err
    assert "descriptors" not in plugin() and not any("request_type" in op for op in plugin()["operations"])
    # A new build is a new file name, so the resource changes and Envoy reloads the module.
    wasm.write_bytes(wasm.read_bytes() + b"\0")
    run(["--update-ecds", "--ecds-dir", str(ecds), "--wasm", str(wasm)], capsys)
    (resource,) = json.loads(resource_file.read_text())["resources"]
    new_code = Path(resource["typed_config"]["config"]["vm_config"]["code"]["local"]["filename"])
    assert new_code != code_file and new_code.read_bytes() == wasm.read_bytes()
    assert plugin()["sample_rate"] == 0.25
    assert run(["--update-ecds", "--ecds-dir", str(tmp_path)], capsys)[0] == 1

    (tmp_path / "injected.yaml").write_text(out)
    assert run([str(tmp_path / "injected.yaml"), "--remove"], capsys)[1] == FRONT_PROXY


def test_a_wirelens_filter_added_by_hand_is_not_doubled(tmp_path, wasm, capsys):
    config = load(FRONT_PROXY)
    hcm_of(config)["http_filters"].insert(1, {"name": "envoy.filters.http.wasm", "typed_config": {
        "@type": inject.WASM_TYPE, "config": {"root_id": "wirelens", "vm_config": {
            "runtime": "envoy.wasm.runtime.v8", "code": {"local": {"filename": "/opt/wirelens.wasm"}}}}}})
    source = tmp_path / "envoy.json"
    source.write_text(json.dumps(config))
    _, out, _ = run([str(source), "--wasm", str(wasm)], capsys)
    names = [f["name"] for f in hcm_of(json.loads(out))["http_filters"]]
    assert names == ["wirelens", "envoy.filters.http.rbac", "envoy.filters.http.grpc_web", "envoy.filters.http.router"]


def test_grpc_message_bytes_reaches_the_plugin_configuration(tmp_path, wasm, capsys):
    source = tmp_path / "envoy.yaml"
    source.write_text(FRONT_PROXY)
    ecds = tmp_path / "ecds"
    code, _, err = run([str(source), "--wasm", str(wasm), "--ecds-dir", str(ecds), "--grpc-message-bytes", "0"],
                       capsys)
    assert code == 0, err

    def plugin() -> dict:
        (resource,) = json.loads((ecds / "wirelens.json").read_text())["resources"]
        return json.loads(resource["typed_config"]["config"]["configuration"]["value"])

    assert plugin()["grpc_message_max_bytes"] == 0
    code, _, err = run(["--update-ecds", "--ecds-dir", str(ecds), "--grpc-message-bytes", "64"], capsys)
    assert code == 0 and "grpc_message_max_bytes 0 -> 64" in err, err
    assert plugin()["grpc_message_max_bytes"] == 64
    with pytest.raises(SystemExit):
        run([str(source), "--wasm", str(wasm), "--grpc-message-bytes", "1025"], capsys)
    assert "--grpc-message-bytes='1025': expected a whole number of bytes in [0, 1024]" in capsys.readouterr().err


def test_counterfactual_rate_and_max_bytes_reach_the_plugin_configuration(tmp_path, wasm, capsys):
    source = tmp_path / "envoy.yaml"
    source.write_text(FRONT_PROXY)
    ecds = tmp_path / "ecds"
    code, out, err = run([str(source), "--wasm", str(wasm), "--ecds-dir", str(ecds), "--descriptor-set",
                          str(DESCRIPTORS), "--counterfactual-rate", "0.25", "--counterfactual-max-bytes", "16384"],
                         capsys)
    assert code == 0, err
    assert "settings: counterfactual_rate 0.25, counterfactual_max_bytes 16384" in err
    assert "sizes nothing" not in err  # the schema came with the map

    def plugin() -> dict:
        (resource,) = json.loads((ecds / "wirelens.json").read_text())["resources"]
        return json.loads(resource["typed_config"]["config"]["configuration"]["value"])

    injected = plugin()
    assert (injected["counterfactual_rate"], injected["counterfactual_max_bytes"]) == (0.25, 16384)
    assert injected["descriptors"] and len(injected["operations"]) == 10
    # Live: only the named setting changes; the access log is not touched (nothing to say about it).
    code, _, err = run(["--update-ecds", "--ecds-dir", str(ecds), "--counterfactual-rate", "1"], capsys)
    assert code == 0, err
    assert "wirelens: counterfactual_rate 0.25 -> 1\n" in err
    assert inject.ACCESS_LOG_NAME not in err
    assert plugin() == {**injected, "counterfactual_rate": 1}
    code, _, err = run(["--update-ecds", "--ecds-dir", str(ecds), "--counterfactual-rate", "0",
                        "--counterfactual-max-bytes", "0"], capsys)
    assert code == 0 and "counterfactual_rate 1 -> 0, counterfactual_max_bytes 16384 -> 0" in err, err
    assert (plugin()["counterfactual_rate"], plugin()["counterfactual_max_bytes"]) == (0, 0)
    # The same settings again: the resource already says this, so Envoy is not made to reload.
    code, _, err = run(["--update-ecds", "--ecds-dir", str(ecds), "--counterfactual-rate", "0"], capsys)
    assert code == 0 and "unchanged: the resources already say this" in err, err
    # Without the schema a rate sizes nothing, and the tool says so.
    code, _, err = run(["--update-ecds", "--ecds-dir", str(ecds), "--no-descriptors", "--counterfactual-rate", "1"],
                       capsys)
    assert code == 0 and "counterfactual_rate 1 sizes nothing yet" in err, err
    assert "descriptors" not in plugin() and plugin()["counterfactual_rate"] == 1

    (tmp_path / "injected.yaml").write_text(out)
    assert run([str(tmp_path / "injected.yaml"), "--remove"], capsys)[1] == FRONT_PROXY


def test_counterfactual_defaults_stay_the_filters_and_bad_values_name_the_flag(tmp_path, wasm, capsys):
    source = tmp_path / "envoy.yaml"
    source.write_text(FRONT_PROXY)
    code, out, err = run([str(source), "--wasm", str(wasm), "--descriptor-set", str(DESCRIPTORS)], capsys)
    assert code == 0, err
    config = json.loads(hcm_of(load(out))["http_filters"][0]["typed_config"]["config"]["configuration"]["value"])
    assert "counterfactual_rate" not in config and "counterfactual_max_bytes" not in config  # the filter's defaults
    assert "settings:" not in err
    code, out, err = run([str(source), "--wasm", str(wasm), "--no-descriptors", "--descriptor-set", str(DESCRIPTORS),
                          "--counterfactual-rate", "1"], capsys)
    assert code == 0 and "counterfactual_rate 1 sizes nothing yet" in err, err
    # --diff shows the new field in the filter's configuration line.
    code, out, _ = run([str(source), "--wasm", str(wasm), "--diff", "--counterfactual-rate", "0.5"], capsys)
    assert code == 0
    (config_line,) = [line for line in out.splitlines() if line.startswith("+") and '"operations"' in line]
    assert '"counterfactual_rate":0.5' in config_line
    for flag, value, expected in [
            ("--counterfactual-rate", "1.5", "--counterfactual-rate='1.5': expected a number in [0, 1]"),
            ("--counterfactual-rate", "nan", "--counterfactual-rate='nan': expected a number in [0, 1]"),
            ("--counterfactual-max-bytes", "-1", "--counterfactual-max-bytes='-1': expected a whole number of bytes"),
            ("--counterfactual-max-bytes", "4294967296", "in [0, 4294967295]"),
            ("--counterfactual-max-bytes", "1.5", "--counterfactual-max-bytes='1.5'")]:
        with pytest.raises(SystemExit):
            run([str(source), "--wasm", str(wasm), flag, value], capsys)
        assert expected in capsys.readouterr().err, (flag, value)


# -- the native build (--module native: the Envoy dynamic module) ---------------------------


@pytest.fixture()
def native(tmp_path) -> Path:
    path = tmp_path / "libwirelens.so"
    path.write_bytes(b"\x7fELF fixed")
    return path


def test_native_module_goes_first_with_the_same_configuration_log_and_tracing(tmp_path, wasm, native, capsys):
    """Only the filter entry differs between the builds: the same plugin configuration text, access log,
    tracing and cluster; --remove takes the native filter out as it takes the Wasm one."""
    source = tmp_path / "envoy.yaml"
    source.write_text(FRONT_PROXY)
    flags = ["--descriptor-set", str(DESCRIPTORS)]
    code, wasm_out, _ = run([str(source), "--wasm", str(wasm), *flags], capsys)
    assert code == 0
    code, out, err = run([str(source), "--module", "native", "--native", str(native), *flags], capsys)
    assert code == 0, err
    assert "+ http filter wirelens (native: Envoy dynamic module, fails open) first" in err
    hcm, wasm_hcm = hcm_of(load(out)), hcm_of(load(wasm_out))
    entry = hcm["http_filters"][0]
    configuration = wasm_hcm["http_filters"][0]["typed_config"]["config"]["configuration"]["value"]
    assert entry == wiring.native_filter(configuration, native)
    assert entry["typed_config"]["dynamic_module_config"]["module"]["local"]["filename"] == str(native)
    hcm["http_filters"].pop(0), wasm_hcm["http_filters"].pop(0)
    assert hcm == wasm_hcm
    assert load(out)["static_resources"]["clusters"] == load(wasm_out)["static_resources"]["clusters"]
    # --native alone implies the module; twice is once; --remove gives back the original bytes.
    (tmp_path / "injected.yaml").write_text(out)
    assert run([str(tmp_path / "injected.yaml"), "--native", str(native), *flags], capsys)[1] == out
    assert run([str(tmp_path / "injected.yaml"), "--remove"], capsys)[1] == FRONT_PROXY
    # A Wasm injection over a native one replaces it (one wirelens filter, never two).
    code, switched, _ = run([str(tmp_path / "injected.yaml"), "--wasm", str(wasm), *flags], capsys)
    assert code == 0 and switched == wasm_out


def test_a_native_filter_added_by_hand_is_recognised(tmp_path, wasm, native, capsys):
    config = load(FRONT_PROXY)
    hcm_of(config)["http_filters"].insert(1, {"name": "envoy.filters.http.dynamic_modules", "typed_config": {
        "@type": inject.DYNAMIC_MODULE_TYPE, "dynamic_module_config": {"name": "wirelens"},
        "filter_name": "wirelens"}})
    source = tmp_path / "envoy.json"
    source.write_text(json.dumps(config))
    _, out, _ = run([str(source), "--wasm", str(wasm)], capsys)
    names = [f["name"] for f in hcm_of(json.loads(out))["http_filters"]]
    assert names == ["wirelens", "envoy.filters.http.rbac", "envoy.filters.http.grpc_web", "envoy.filters.http.router"]


def test_module_flags_that_disagree_are_named(tmp_path, wasm, native, capsys):
    source = tmp_path / "envoy.yaml"
    source.write_text(FRONT_PROXY)
    code, _, err = run([str(source), "--module", "native", "--wasm", str(wasm)], capsys)
    assert code == 1 and "--wasm is the wasm build's file, and the build is native" in err
    code, _, err = run([str(source), "--module", "wasm", "--native", str(native)], capsys)
    assert code == 1 and "--native is the native build's file" in err
    code, _, err = run([str(source), "--module", "native", "--native", str(tmp_path / "missing.so")], capsys)
    assert code == 1 and "missing.so: no such file (build it with `make native`)" in err
    with pytest.raises(SystemExit):
        inject.main([str(source), "--module", "lua"])
    assert "invalid choice: 'lua'" in capsys.readouterr().err


def test_ecds_serves_the_native_filter_and_updates_it(tmp_path, wasm, native, capsys):
    source = tmp_path / "envoy.yaml"
    source.write_text(FRONT_PROXY)
    ecds = tmp_path / "ecds"
    code, out, err = run([str(source), "--native", str(native), "--ecds-dir", str(ecds)], capsys)
    assert code == 0, err
    discovery = hcm_of(load(out))["http_filters"][0]["config_discovery"]
    assert discovery["type_urls"] == [inject.DYNAMIC_MODULE_TYPE]
    resource_file = ecds / "wirelens.json"

    def resource() -> dict:
        (found,) = json.loads(resource_file.read_text())["resources"]
        return found["typed_config"]

    assert resource() == discovery["default_config"]
    module, _, code_file = wiring.filter_parts(resource())
    # Content-addressed, with its own suffix: a new build is a new path to dlopen.
    assert module == "native" and code_file.parent == ecds and code_file.suffix == ".so"
    assert code_file.read_bytes() == native.read_bytes()
    code, _, err = run(["--update-ecds", "--ecds-dir", str(ecds), "--sample-rate", "0.25"], capsys)
    assert code == 0, err
    assert json.loads(wiring.filter_parts(resource())[1])["sample_rate"] == 0.25
    assert wiring.filter_parts(resource())[0] == "native"
    native.write_bytes(native.read_bytes() + b"\0")
    code, _, err = run(["--update-ecds", "--ecds-dir", str(ecds), "--native", str(native)], capsys)
    assert code == 0, err
    new_code = wiring.filter_parts(resource())[2]
    assert new_code != code_file and new_code.read_bytes() == native.read_bytes()
    assert json.loads(wiring.filter_parts(resource())[1])["sample_rate"] == 0.25
    # The HCMs accept only the type they were injected with: a switch of builds is a new injection.
    code, _, err = run(["--update-ecds", "--ecds-dir", str(ecds), "--wasm", str(wasm)], capsys)
    assert code == 1 and "serves the native build, and --module wasm was given" in err
    (tmp_path / "injected.yaml").write_text(out)
    assert run([str(tmp_path / "injected.yaml"), "--remove"], capsys)[1] == FRONT_PROXY


# ---------------------------------------------------------------- the durable path: file + the agent beside Envoy


def with_admin(text: str, port: int | None = 9901, address: str = "0.0.0.0") -> str:
    if port is None:
        return text
    return f"admin:\n  address:\n    socket_address: {{ address: {address}, port_value: {port} }}\n" + text


def test_the_default_is_the_file_access_log_and_logship_beside_envoy(tmp_path, wasm, capsys):
    source = tmp_path / "envoy.yaml"
    source.write_text("node: { id: edge-1, cluster: edge }\n" + with_admin(FRONT_PROXY))
    access = tmp_path / "logs" / "access.jsonl"
    script = tmp_path / "ship.sh"
    code, out, err = run([str(source), "--wasm", str(wasm), "--access-log-path", str(access),
                          "--collector", "otel.example:4317", "--agent-config", str(script)], capsys)
    assert code == 0, err
    (log,) = [entry for entry in hcm_of(load(out))["access_log"] if entry["name"] == "wirelens.access_log"]
    # The same JSON lines as the local stack's file sink: every record field, nothing sent by Envoy itself.
    assert log["typed_config"]["@type"].endswith("file.v3.FileAccessLog")
    assert log["typed_config"]["path"] == str(access)
    assert log["typed_config"]["log_format"]["json_format"] == wiring.access_log_line_format()
    assert "open_telemetry" not in out.split("wirelens.access_log")[1].split("tracing")[0]
    expected = [str(ROOT / "bin" / "logship"), "-file", str(access), "-checkpoint", f"{access}.checkpoint",
                "-endpoint", "otel.example:4317",
                "-resource", "service.name=wirelens-envoy,log_name=wirelens,node_name=edge-1,cluster_name=edge",
                "-listen", "127.0.0.1:13135", "-rotate-bytes", str(64 << 20), "-max-disk-bytes", str(1 << 30),
                "-reopen-url", "http://127.0.0.1:9901/reopen_logs"]   # 0.0.0.0 admin: reached on loopback
    assert " ".join(expected) in err, err
    # The script runs exactly that command (the shell parses it back), its binary overridable.
    assert script.stat().st_mode & 0o111
    printargs = tmp_path / "printargs"
    printargs.write_text('#!/bin/sh\nprintf "%s\\n" "$@"\n')
    printargs.chmod(0o755)
    shown = subprocess.run(["sh", str(script)], env={"LOGSHIP": str(printargs), "PATH": "/usr/bin:/bin"},
                           capture_output=True, text=True, timeout=30, check=True).stdout.splitlines()
    assert shown == expected[1:], shown
    assert f"wrote {script}" in err


def test_the_script_names_the_binary_from_the_environment(tmp_path, wasm, capsys):
    source = tmp_path / "envoy.yaml"
    source.write_text(with_admin(FRONT_PROXY))
    script = tmp_path / "ship.sh"
    code, _, err = run([str(source), "--wasm", str(wasm), "--access-log-path", str(tmp_path / "a.jsonl"),
                        "--agent-config", str(script)], capsys)
    assert code == 0, err
    result = subprocess.run(["sh", str(script)], env={"LOGSHIP": "echo", "PATH": "/usr/bin:/bin"},
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[:2] == ["-file", str(tmp_path / "a.jsonl")], result.stdout
    # No node in this bootstrap: the resource says what it has, and the report what to add.
    assert "-resource service.name=wirelens-envoy,log_name=wirelens " in result.stdout + " "
    assert "names no node id/cluster" in err


def test_without_an_admin_address_the_agent_neither_rotates_nor_caps_and_says_so(tmp_path, wasm, capsys):
    source = tmp_path / "envoy.yaml"
    source.write_text(FRONT_PROXY)
    code, _, err = run([str(source), "--wasm", str(wasm), "--access-log-path", str(tmp_path / "a.jsonl")], capsys)
    assert code == 0, err
    assert "-rotate-bytes" not in err and "-reopen-url" not in err
    assert "no TCP admin address in this bootstrap" in err


def test_otlp_stays_behind_a_flag_and_says_what_it_loses(tmp_path, wasm, capsys):
    source = tmp_path / "envoy.yaml"
    source.write_text(with_admin(FRONT_PROXY))
    code, out, err = run([str(source), "--wasm", str(wasm), "--access-log", "otlp"], capsys)
    assert code == 0, err
    (log,) = [entry for entry in hcm_of(load(out))["access_log"] if entry["name"] == "wirelens.access_log"]
    assert log["typed_config"]["@type"].endswith("OpenTelemetryAccessLogConfig")
    assert "drops every record made while the Collector is unreachable" in err
    assert "logship" not in err


@pytest.mark.parametrize("flags, message", [
    (["--access-log", "otlp", "--agent-config", "x.sh"], "--agent-config is written when"),
    (["--access-log", "otlp", "--access-log-path", "a.jsonl"], "--access-log-path is the file of --access-log file"),
    (["--access-log-rotate-bytes", "1000", "--access-log-max-bytes", "1999"], "at least twice --access-log-rotate-bytes"),
    (["--access-log-rotate-bytes", "0", "--access-log-max-bytes", "1000"], "needs --access-log-rotate-bytes above 0"),
    (["--agent-port", "70000"], "expected a TCP port"),
    (["--access-log-max-bytes", "1G"], "expected a number of bytes"),
])
def test_bad_agent_settings_are_named(tmp_path, wasm, capsys, flags, message):
    source = tmp_path / "envoy.yaml"
    source.write_text(with_admin(FRONT_PROXY))
    try:
        code, _, err = run([str(source), "--wasm", str(wasm), *flags], capsys)
    except SystemExit as exc:          # argparse's own errors
        code, err = exc.code, capsys.readouterr().err
    assert code != 0 and message in err, err


def test_no_cap_and_no_rotation_when_asked(tmp_path, wasm, capsys):
    source = tmp_path / "envoy.yaml"
    source.write_text(with_admin(FRONT_PROXY, 9000, "127.0.0.2"))
    code, _, err = run([str(source), "--wasm", str(wasm), "--access-log-path", str(tmp_path / "a.jsonl"),
                        "--access-log-rotate-bytes", "0", "--access-log-max-bytes", "0", "--agent-port", "14000"],
                       capsys)
    assert code == 0, err
    assert "-listen 127.0.0.1:14000" in err and "-rotate-bytes" not in err


def test_agent_filelog_renders_the_agent_collector_and_says_what_it_does_not_do(tmp_path, wasm, capsys):
    source = tmp_path / "envoy.yaml"
    source.write_text("node: { id: edge-1, cluster: edge }\n" + with_admin(FRONT_PROXY))
    script = tmp_path / "ship.sh"
    access = tmp_path / "access.jsonl"
    code, _, err = run([str(source), "--wasm", str(wasm), "--access-log-path", str(access), "--agent", "filelog",
                        "--agent-config", str(script), "--collector", "otel.example:4317", "--agent-port", "14000"],
                       capsys)
    assert code == 0, err
    assert "filelog neither rotates Envoy's file nor caps its disk use" in err
    printenv = tmp_path / "printenv"
    printenv.write_text('#!/bin/sh\nenv | grep ^WIRELENS_ | sort\nprintf "%s\\n" "$@"\n')
    printenv.chmod(0o755)
    shown = subprocess.run(["sh", str(script)], env={"OTELCOL": str(printenv), "PATH": "/usr/bin:/bin"},
                           capture_output=True, text=True, timeout=30, check=True).stdout.splitlines()
    assert shown == [
        f"WIRELENS_ACCESS_LOG={access}", "WIRELENS_ACCESS_LOG_CLUSTER_NAME=edge", "WIRELENS_ACCESS_LOG_NODE_NAME=edge-1",
        "WIRELENS_ACCESS_LOG_SERVICE_NAME=wirelens-envoy", "WIRELENS_COLLECTOR_OTLP_PORT=4317",
        "WIRELENS_LOG_AGENT_HEALTH_PORT=14000", "WIRELENS_LOG_AGENT_METRICS_PORT=14001",
        f"WIRELENS_LOG_AGENT_STORAGE_DIR={access}.filelog-storage",
        "--config", str(ROOT / "collector" / "filelog-agent.yaml"),
        "--config", "yaml:exporters::otlp_grpc::endpoint: otel.example:4317",
        "--feature-gates=stanza.synchronousLogEmitter"], shown
    # Our Collector accepts exactly that command line (when it is built).
    collector = ROOT / "bin" / "otelcol-wirelens"
    if collector.exists():
        env = dict(line.split("=", 1) for line in shown if line.startswith("WIRELENS_"))
        result = subprocess.run([str(collector), "validate", *shown[len(env):]], env={**env, "PATH": "/usr/bin:/bin"},
                                capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr[-2000:]
