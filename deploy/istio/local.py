"""wirelens under istiod, for real on this machine: an Istio gateway (router mode) next to the local stack.

    python -m deploy.istio.local up                 render the Istio resources, start istiod (bin/istiod-harness
                                                    serve) and the project's Envoy 1.40 that it configures over ADS
    python -m deploy.istio.local down               stop exactly what `up` started (pid files), nothing else
    python -m deploy.istio.local status             each process: pid, port, health
    python -m deploy.istio.local render             write the resources and the mesh config, start nothing
    python -m deploy.istio.local set-sample-rate R  rewrite the WasmPlugins on disk: istiod pushes, Envoy applies, live
    python -m deploy.istio.local filters            the HTTP filters of the gateway's listeners, in Envoy's order
    python -m deploy.istio.local demo               50 calls of each protocol through the gateway, then their rows

No Kubernetes: istiod's own translation (pilot/test/xds, in bin/istiod-harness,
`make istiod-harness`) reads the resources from a directory it watches and
serves ADS on loopback; Envoy gets the bootstrap istio-agent would give an
Istio ingress gateway (`istiod-harness bootstrap --node-type router`, labels
istio=ingressgateway). Nothing else touches Envoy's config.

The resources (the config dir; every one from the committed deploy/istio
renderer, deploy/istio/render.py, or written here for this machine):

  wasmplugin.yaml            render.wasm_plugin: the wirelens filter, url file://<build/wirelens_filter.wasm>
                             + its sha256, or with WIRELENS_ISTIO_MODULE_SOURCE=oci the image `make wasm-image`
                             built, by digest, from a registry on loopback that `up` starts (bin/wasm-image
                             registry; istio-agent's own pull code in the harness fetches it, see MODULE_SOURCES);
                             pluginConfig = the operation map with the local stack's settings; here limited to
                             the gateway's main port
  wasmplugin-transcoded.yaml the same filter on the transcoding port, with `rest_transcoded: true` in its config
                             (as the local stack's transcoding listener)
  telemetry.yaml             render.telemetry: access log and a span per call through the two providers
  services.yaml              ServiceEntries (STATIC 127.0.0.1 endpoints) for the local stack's REST service,
                             gRPC service (protocol GRPC: HTTP/2 upstream) and Collector (OTLP gRPC)
  gateway.yaml               two Gateways (selector istio: ingressgateway, bind 127.0.0.1): `wirelens`, protocol
                             GRPC-WEB (REST, gRPC and gRPC-Web on one port: Istio adds grpc_web for it), and
                             `wirelens-transcoded`, protocol HTTP; a VirtualService per Gateway
  transcoder.yaml            EnvoyFilter: grpc_json_transcoder before the router on the transcoding port, as the
                             local stack's Envoy has it (envoy/envoy.yaml.tmpl)

and, beside the dir, mesh-config.yaml: render.mesh_config with both providers
pointing at the Collector's ServiceEntry host and port.

Ports: PORTS below, each overridable by an environment variable of the same
name; the local stack's from deploy/local/ports.env (same variables as `make up`).
State (pid files, logs, the config dir, Envoy's bootstrap) lives in
$WIRELENS_ISTIO_STATE_DIR (default .run/istio).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from urllib.parse import quote
from pathlib import Path
from typing import Callable

import yaml

from deploy.envoy_gateway.gateway import admin_stat, check_local_stack, listening_addresses
from deploy.envoy_gateway.manifests import sha256_file, write_atomic
from deploy.istio import render
from deploy.kubernetes.images import wasm_image
from deploy.local import stack
from envoy import plugin_settings, wiring
from wirelens_helpers.wait import WaitTimeout, wait_for

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

StackError = stack.StackError
HARNESS = ROOT / "bin" / "istiod-harness"
HARNESS_HINT = "run `make istiod-harness` (tools/istiod-harness)"
WASM = wiring.MODULE_FILES["wasm"]
OPMAP = ROOT / "build" / "opmap.json"
DESCRIPTORS = ROOT / "build" / "proto" / "wirelens.pb"

# Our ports; each overridable by an environment variable of the same name.
PORTS = {
    "WIRELENS_ISTIO_PORT": "10090",            # the gateway's main server: REST, gRPC, gRPC-Web
    "WIRELENS_ISTIO_TRANSCODE_PORT": "10091",  # the gateway's transcoding server: REST into gRPC
    "WIRELENS_ISTIO_ADMIN_PORT": "9904",       # the gateway Envoy's admin (/config_dump, /stats, /ready)
    "WIRELENS_ISTIO_XDS_PORT": "15010",        # istiod's ADS (plaintext gRPC), as istiod's own 15010
    "WIRELENS_ISTIO_REGISTRY_PORT": "10092",   # with WIRELENS_ISTIO_MODULE_SOURCE=oci: the module's registry
}
# Where the WasmPlugin's module comes from (WIRELENS_ISTIO_MODULE_SOURCE):
#   file  url file://<build/wirelens_filter.wasm>: istiod hands Envoy the local path
#   oci   url oci://127.0.0.1:<registry>/wirelens/wirelens-filter@sha256:<digest>, sha256 <digest>: the module as
#         `make wasm-image` built it (build/oci), served by `bin/wasm-image registry` (plain HTTP, loopback);
#         istiod hands over the url with a placeholder cluster and istio-agent's own code (istio pkg/wasm, in
#         the harness: serve --agent-wasm-cache) pulls it, checks the digest and gives Envoy the cached file
MODULE_SOURCES = ("file", "oci")
REGISTRY_REPO = "wirelens"

# Where the gateway proxy "runs" for istiod: an ingress gateway pod in istio-system.
PROXY_NAMESPACE = "istio-system"
PROXY_NAME = "istio-ingressgateway-wirelens"
PROXY_LABELS = {"istio": "ingressgateway", "app": "istio-ingressgateway"}
NAMESPACE = "wirelens"                          # the Gateways, routes and ServiceEntries
GATEWAY = "wirelens"
TRANSCODED_GATEWAY = "wirelens-transcoded"
# The ServiceEntry hosts of the local stack's services (resolved by istiod, STATIC endpoints: no DNS).
REST_HOST = "rest.wirelens.local"
GRPC_HOST = "grpc.wirelens.local"
COLLECTOR_HOST = "otel-collector.wirelens.local"


# ---------------------------------------------------------------- settings


def load_settings(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The local stack's settings (its ports: services, Collector) plus ours.

    Our processes share the local stack's helpers (pid files, logs, process groups), which find
    their files under WIRELENS_STATE_DIR: for them it is our state dir; the stack's own stays in
    WIRELENS_LOCAL_STATE_DIR.
    """
    environ = dict(os.environ if environ is None else environ)
    settings = stack.load_settings(environ)
    for name, default in PORTS.items():
        value = environ.get(name, default)
        if not (value.isdigit() and 0 < int(value) < 65536):
            raise StackError(f"{name}={value!r} is not a valid port (default {default}, set in the environment)")
        settings[name] = value
    settings["WIRELENS_LOCAL_STATE_DIR"] = settings["WIRELENS_STATE_DIR"]
    state = Path(environ.get("WIRELENS_ISTIO_STATE_DIR", ROOT / ".run" / "istio")).resolve()
    settings["WIRELENS_STATE_DIR"] = str(state)
    settings["WIRELENS_ISTIO_CONCURRENCY"] = environ.get("WIRELENS_ISTIO_CONCURRENCY", "2")
    settings["WIRELENS_ISTIO_LOG_LEVEL"] = environ.get("WIRELENS_ISTIO_LOG_LEVEL", "warn")
    if not settings["WIRELENS_ISTIO_CONCURRENCY"].isdigit() or int(settings["WIRELENS_ISTIO_CONCURRENCY"]) < 1:
        raise StackError(f"WIRELENS_ISTIO_CONCURRENCY={settings['WIRELENS_ISTIO_CONCURRENCY']!r}: "
                         "expected a whole number of worker threads, at least 1")
    settings["WIRELENS_ISTIO_MODULE_SOURCE"] = environ.get("WIRELENS_ISTIO_MODULE_SOURCE", "file")
    if settings["WIRELENS_ISTIO_MODULE_SOURCE"] not in MODULE_SOURCES:
        raise StackError(f"WIRELENS_ISTIO_MODULE_SOURCE={settings['WIRELENS_ISTIO_MODULE_SOURCE']!r}: expected one of "
                         f"{', '.join(MODULE_SOURCES)}")
    if settings.get("WIRELENS_FILTER_MODULE", "wasm") != "wasm":
        raise StackError(f"WIRELENS_FILTER_MODULE={settings['WIRELENS_FILTER_MODULE']}: Istio loads only the wasm "
                         "build (a WasmPlugin); its native build needs Envoy Gateway or plain Envoy")
    return settings


def state_dir(settings: dict[str, str]) -> Path:
    return Path(settings["WIRELENS_STATE_DIR"])


def paths(settings: dict[str, str]) -> dict[str, Path]:
    state = state_dir(settings)
    return {
        "config_dir": state / "config",
        "mesh_config": state / "mesh-config.yaml",
        "ready_file": state / "istiod-ready.json",
        "bootstrap": state / "envoy-bootstrap.json",
        "wasmplugin": state / "config" / "wasmplugin.yaml",
        "wasmplugin_transcoded": state / "config" / "wasmplugin-transcoded.yaml",
        "registry_ready": state / "registry.json",   # what the registry serves, once it does
        "wasm_cache": state / "wasm-cache",          # istio-agent's module cache (oci)
    }


def from_registry(settings: dict[str, str]) -> bool:
    return settings["WIRELENS_ISTIO_MODULE_SOURCE"] == "oci"


def registry_address(settings: dict[str, str]) -> str:
    return f"127.0.0.1:{settings['WIRELENS_ISTIO_REGISTRY_PORT']}"


def filter_image(settings: dict[str, str]) -> str:
    """The module's reference by digest in our registry (no scheme), from build/oci; StackError if that layout
    is missing or holds another module than build/wirelens_filter.wasm (the same build gives the same digest)."""
    try:
        digest = wasm_image.digests()[wasm_image.FILTER]
        rebuilt = wasm_image.build(WASM)[wasm_image.FILTER]["digest"]
    except wasm_image.LayoutError as exc:
        raise StackError(str(exc)) from None
    if rebuilt != digest:
        raise StackError(f"{wasm_image.LAYOUT} holds {wasm_image.FILTER} {digest}, but {WASM} makes {rebuilt}: "
                         f"{wasm_image.BUILD_HINT}")
    return wasm_image.reference(f"{registry_address(settings)}/{REGISTRY_REPO}", digest)


def served_image(settings: dict[str, str]) -> str | None:
    """The filter image our registry serves (its ready file), None while it serves none."""
    try:
        return json.loads(paths(settings)["registry_ready"].read_text())["images"][wasm_image.FILTER]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def module_source(settings: dict[str, str]) -> tuple[str, str]:
    """The WasmPlugin's url and sha256 (WIRELENS_ISTIO_MODULE_SOURCE)."""
    if not WASM.exists():
        raise StackError(f"{WASM} is missing: run `{wiring.MODULE_BUILDS['wasm']}`")
    if from_registry(settings):
        image = served_image(settings) or filter_image(settings)
        return f"oci://{image}", wasm_image.digest_hex(image)
    return f"file://{WASM}", sha256_file(WASM)


# ---------------------------------------------------------------- the resources


def plugin_config(settings: dict[str, str], sample_rate: float | None = None, transcoded: bool = False) -> dict:
    """The filter's plugin configuration: the operation map with the local stack's settings
    (WIRELENS_SAMPLE_RATE unless sample_rate is given, WIRELENS_COUNTERFACTUAL_*)."""
    if not OPMAP.exists():
        raise StackError(f"{OPMAP} is missing: run `make proto`")
    config = plugin_settings.with_settings(
        json.loads(OPMAP.read_text()),
        sample_rate=float(settings["WIRELENS_SAMPLE_RATE"]) if sample_rate is None else sample_rate,
        counterfactual_rate=float(settings["WIRELENS_COUNTERFACTUAL_RATE"]),
        counterfactual_max_bytes=int(settings["WIRELENS_COUNTERFACTUAL_MAX_BYTES"]))
    return {**config, "rest_transcoded": True} if transcoded else config


def wasm_plugins(settings: dict[str, str], sample_rate: float | None = None) -> dict[str, dict]:
    """File name -> WasmPlugin: the committed one (render.wasm_plugin) with our module_source(), one per gateway port.

    Istio matches a WasmPlugin to a gateway's listener by its `match` (mode CLIENT: gateways count as client
    side) and, here, `ports`: the transcoding port gets the filter with `rest_transcoded`, as the local
    stack's transcoding listener does."""
    url, sha = module_source(settings)
    plugins = {}
    for name, port, transcoded in (("wasmplugin.yaml", "WIRELENS_ISTIO_PORT", False),
                                   ("wasmplugin-transcoded.yaml", "WIRELENS_ISTIO_TRANSCODE_PORT", True)):
        plugin = render.wasm_plugin(plugin_config(settings, sample_rate, transcoded), url, sha)
        if transcoded:
            plugin["metadata"]["name"] = "wirelens-transcoded"
        for match in plugin["spec"]["match"]:
            match["ports"] = [{"number": int(settings[port])}]
        plugins[name] = plugin
    return plugins


def service_entry(name: str, host: str, port: int, protocol: str) -> dict:
    return {
        "apiVersion": "networking.istio.io/v1", "kind": "ServiceEntry",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "hosts": [host],
            "location": "MESH_EXTERNAL",      # no sidecar there: plaintext, no mTLS
            "resolution": "STATIC",
            "ports": [{"number": port, "name": f"{protocol.lower()}-{port}", "protocol": protocol}],
            "endpoints": [{"address": "127.0.0.1"}],
        },
    }


def services(settings: dict[str, str]) -> list[dict]:
    return [
        service_entry("wirelens-rest", REST_HOST, int(settings["WIRELENS_REST_PORT"]), "HTTP"),
        # GRPC: istiod gives the cluster HTTP/2 to the upstream (the gRPC service speaks h2c).
        service_entry("wirelens-grpc", GRPC_HOST, int(settings["WIRELENS_GRPC_PORT"]), "GRPC"),
        service_entry("wirelens-collector", COLLECTOR_HOST, int(settings["WIRELENS_COLLECTOR_OTLP_PORT"]), "GRPC"),
    ]


def _destination(host: str, port: str) -> list[dict]:
    return [{"destination": {"host": host, "port": {"number": int(port)}}}]


def gateways(settings: dict[str, str]) -> list[dict]:
    def gateway(name: str, port: str, protocol: str) -> dict:
        return {
            "apiVersion": "networking.istio.io/v1", "kind": "Gateway",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {
                "selector": {"istio": PROXY_LABELS["istio"]},
                "servers": [{"port": {"number": int(port), "name": f"{protocol.lower()}-{port}",
                                      "protocol": protocol},
                             "bind": "127.0.0.1", "hosts": ["*"]}],
            },
        }

    def route(name: str, gateway_name: str, http: list[dict]) -> dict:
        return {"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
                "metadata": {"name": name, "namespace": NAMESPACE},
                "spec": {"hosts": ["*"], "gateways": [gateway_name], "http": http}}

    grpc, rest = settings["WIRELENS_GRPC_PORT"], settings["WIRELENS_REST_PORT"]
    return [
        # GRPC-WEB: Istio puts grpc_web on this HCM (after the AUTHN-phase wirelens); REST and gRPC pass it as is.
        gateway(GATEWAY, settings["WIRELENS_ISTIO_PORT"], "GRPC-WEB"),
        gateway(TRANSCODED_GATEWAY, settings["WIRELENS_ISTIO_TRANSCODE_PORT"], "HTTP"),
        route(GATEWAY, GATEWAY, [
            # gRPC and gRPC-Web (grpc_web turns the latter into gRPC) to the gRPC service; the rest is REST.
            {"name": "grpc", "match": [{"uri": {"prefix": "/wirelens."}}], "route": _destination(GRPC_HOST, grpc)},
            {"name": "rest", "route": _destination(REST_HOST, rest)},
        ]),
        # The transcoder turns REST into gRPC calls to the gRPC service.
        route(TRANSCODED_GATEWAY, TRANSCODED_GATEWAY, [{"name": "transcoded", "route": _destination(GRPC_HOST, grpc)}]),
    ]


def transcoder(settings: dict[str, str]) -> dict:
    """EnvoyFilter: Envoy's grpc_json_transcoder before the router on the transcoding port only,
    configured as in the local stack's Envoy (envoy/envoy.yaml.tmpl, listener wirelens_transcoded)."""
    if not DESCRIPTORS.exists():
        raise StackError(f"{DESCRIPTORS} is missing: run `make proto`")
    config = json.loads(OPMAP.read_text())
    grpc_services = sorted({op["rpc_service"] for op in config.get("operations", []) if op.get("rpc_service")})
    return {
        "apiVersion": "networking.istio.io/v1alpha3", "kind": "EnvoyFilter",
        # In the root namespace so that it may select a proxy of any namespace.
        "metadata": {"name": "wirelens-transcoder", "namespace": render.ROOT_NAMESPACE},
        "spec": {
            "workloadSelector": {"labels": {"istio": PROXY_LABELS["istio"]}},
            "configPatches": [{
                "applyTo": "HTTP_FILTER",
                "match": {"context": "GATEWAY", "listener": {
                    "portNumber": int(settings["WIRELENS_ISTIO_TRANSCODE_PORT"]),
                    "filterChain": {"filter": {"name": "envoy.filters.network.http_connection_manager",
                                               "subFilter": {"name": "envoy.filters.http.router"}}}}},
                "patch": {"operation": "INSERT_BEFORE", "value": {
                    "name": "envoy.filters.http.grpc_json_transcoder",
                    "typed_config": {
                        "@type": "type.googleapis.com/envoy.extensions.filters.http.grpc_json_transcoder.v3."
                                 "GrpcJsonTranscoder",
                        "proto_descriptor": str(DESCRIPTORS),
                        "services": grpc_services,
                        "convert_grpc_status": True,
                        "print_options": {"add_whitespace": False, "always_print_primitive_fields": False,
                                          "preserve_proto_field_names": False},
                    }}},
            }],
        },
    }


def resources(settings: dict[str, str], sample_rate: float | None = None) -> dict[str, list[dict]]:
    """File name (in the config dir) -> its documents."""
    return {
        **{name: [plugin] for name, plugin in wasm_plugins(settings, sample_rate).items()},
        "telemetry.yaml": [render.telemetry()],
        "services.yaml": services(settings),
        "gateway.yaml": gateways(settings),
        "transcoder.yaml": [transcoder(settings)],
    }


def mesh_config(settings: dict[str, str]) -> dict:
    """render.mesh_config (istiod's Helm-values form) with both providers at the Collector's ServiceEntry."""
    return render.mesh_config(COLLECTOR_HOST, int(settings["WIRELENS_COLLECTOR_OTLP_PORT"]))


HEADER = "# Rendered by deploy/istio/local.py from deploy/istio/render.py's resources; edit the renderers.\n"


def to_yaml(documents: list[dict]) -> str:
    return HEADER + yaml.safe_dump_all(documents, sort_keys=False, default_flow_style=False, width=4096)


def write_resources(settings: dict[str, str], sample_rate: float | None = None) -> list[Path]:
    p = paths(settings)
    p["config_dir"].mkdir(parents=True, exist_ok=True)
    written = []
    for name, documents in resources(settings, sample_rate).items():
        write_atomic(p["config_dir"] / name, to_yaml(documents))
        written.append(p["config_dir"] / name)
    write_atomic(p["mesh_config"], HEADER + yaml.safe_dump(mesh_config(settings), sort_keys=False, width=4096))
    return [*written, p["mesh_config"]]


def set_sample_rate(settings: dict[str, str], rate: float) -> list[Path]:
    """Rewrite both WasmPlugin files (one rename each) with the filter's sample_rate: istiod pushes the
    new plugin configuration to Envoy (ECDS), no restart."""
    written = []
    for name, plugin in wasm_plugins(settings, rate).items():
        path = paths(settings)["config_dir"] / name
        write_atomic(path, to_yaml([plugin]))
        written.append(path)
    return written


# ---------------------------------------------------------------- the gateway's Envoy


def admin_url(settings: dict[str, str]) -> str:
    return f"http://127.0.0.1:{settings['WIRELENS_ISTIO_ADMIN_PORT']}"


def envoy_stat(settings: dict[str, str], name: str) -> int | None:
    """One counter or gauge of the gateway's Envoy (exact name), None if it has none or does not answer."""
    return admin_stat(admin_url(settings), name)


def envoy_stats(settings: dict[str, str], pattern: str) -> dict[str, int]:
    """Every counter or gauge of the gateway's Envoy whose name matches the regex pattern."""
    status, body = stack.http_get(f"{admin_url(settings)}/stats?filter={quote(pattern)}", timeout=30)
    found = {}
    for line in body.splitlines():
        key, _, value = line.partition(": ")
        if value.isdigit():
            found[key] = int(value)
    return found


def config_dump(settings: dict[str, str], resource: str = "dynamic_listeners") -> dict:
    with urllib.request.urlopen(f"{admin_url(settings)}/config_dump?resource={resource}", timeout=30) as response:
        return json.load(response)


def listeners(settings: dict[str, str]) -> list[dict]:
    """The active listeners istiod gave Envoy."""
    return [entry["active_state"]["listener"] for entry in config_dump(settings).get("configs", [])
            if "active_state" in entry]


def listener_on(settings: dict[str, str], port: int) -> dict | None:
    for listener in listeners(settings):
        if listener.get("address", {}).get("socket_address", {}).get("port_value") == port:
            return listener
    return None


def http_connection_manager(listener: dict) -> dict | None:
    for chain in listener.get("filter_chains", []) + ([listener["default_filter_chain"]]
                                                      if "default_filter_chain" in listener else []):
        for network_filter in chain.get("filters", []):
            typed = network_filter.get("typed_config", {})
            if "http_filters" in typed:
                return typed
    return None


def http_filters(settings: dict[str, str], port: int) -> list[dict]:
    """The HTTP filters of the gateway's listener on this port, in order (Envoy's /config_dump)."""
    listener = listener_on(settings, port)
    hcm = http_connection_manager(listener) if listener else None
    return hcm["http_filters"] if hcm else []


def ecds_filters(settings: dict[str, str]) -> dict[str, dict]:
    """ECDS filter name -> the TypedExtensionConfig Envoy runs now (/config_dump?resource=ecds_filters)."""
    try:
        dump = config_dump(settings, "ecds_filters")
    except urllib.error.HTTPError as exc:
        if exc.code == 404:   # Envoy has no ECDS filter config at all
            return {}
        raise
    found = {}
    for entry in dump.get("configs", []):
        config = entry.get("ecds_filter", {})
        if config.get("name"):
            found[config["name"]] = config
    return found


def wirelens_ecds_name(settings: dict[str, str], port: int) -> str | None:
    """The ECDS name of the wirelens filter on the listener on this port: the HCM entry that istiod made
    from our WasmPlugin (config_discovery of a Wasm config)."""
    for http_filter in http_filters(settings, port):
        discovery = http_filter.get("config_discovery")
        if discovery and wiring.WASM_TYPE in discovery.get("type_urls", []) and "wirelens" in http_filter["name"]:
            return http_filter["name"]
    return None


def active_plugin_config(settings: dict[str, str], port: int) -> dict | None:
    """The wirelens plugin configuration Envoy runs now on the listener on this port (through ECDS)."""
    name = wirelens_ecds_name(settings, port)
    config = ecds_filters(settings).get(name or "", {}).get("typed_config", {}).get("config", {})
    if config.get("root_id") != wiring.FILTER_NAME:
        return None
    value = config.get("configuration", {}).get("value")
    return json.loads(value) if value else None


def envoy_ready(settings: dict[str, str]) -> Callable[[], bool]:
    """Ready for traffic: Envoy LIVE, both gateway listeners on 127.0.0.1 only, the wirelens filter's VM
    running with a plugin configuration on each."""
    live = stack.http_ok(f"{admin_url(settings)}/ready", "LIVE")
    ports = [int(settings["WIRELENS_ISTIO_PORT"]), int(settings["WIRELENS_ISTIO_TRANSCODE_PORT"])]

    def probe() -> bool:
        if not (live() and all(listening_addresses(port) == {"127.0.0.1"} for port in ports)):
            return False
        try:
            return all(active_plugin_config(settings, port) is not None for port in ports)
        except (OSError, ValueError, KeyError):
            return False
    return probe


def what_is_missing(settings: dict[str, str]) -> str:
    """For an error: which part of readiness is missing."""
    parts = []
    if not stack.http_ok(f"{admin_url(settings)}/ready", "LIVE")():
        parts.append("Envoy is not LIVE")
    for variable in ("WIRELENS_ISTIO_PORT", "WIRELENS_ISTIO_TRANSCODE_PORT"):
        port = int(settings[variable])
        try:
            addresses = listening_addresses(port)
            config = active_plugin_config(settings, port)
        except (OSError, ValueError, KeyError) as exc:
            parts.append(f"{variable}={port}: {exc}")
            continue
        if addresses != {"127.0.0.1"}:
            parts.append(f"{variable}={port}: listening on {sorted(addresses) or 'nothing'}")
        if config is None:
            names = [f["name"] for f in http_filters(settings, port)]
            parts.append(f"{variable}={port}: no wirelens filter (ECDS, root_id wirelens) with a plugin configuration "
                         f"among its HTTP filters {names}"
                         + (f" (from {module_source(settings)[0]}: the pull's error is in the istiod log)"
                            if from_registry(settings) else ""))
    return "; ".join(parts) or "nothing"


def _bootstrap(settings: dict[str, str]) -> None:
    """Envoy's bootstrap, as istio-agent would write it for an ingress gateway: from the harness."""
    stack.require(HARNESS, HARNESS_HINT)
    out = paths(settings)["bootstrap"]
    out.parent.mkdir(parents=True, exist_ok=True)
    command = [str(HARNESS), "bootstrap", "--xds", f"127.0.0.1:{settings['WIRELENS_ISTIO_XDS_PORT']}",
               "--node-type", "router", "--namespace", PROXY_NAMESPACE, "--name", PROXY_NAME,
               "--labels", ",".join(f"{k}={v}" for k, v in PROXY_LABELS.items()),
               "--admin-port", settings["WIRELENS_ISTIO_ADMIN_PORT"], "--out", str(out)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    if result.returncode != 0 or not out.exists():
        raise StackError(f"istiod-harness bootstrap failed (exit {result.returncode}): "
                         f"{' '.join(command)}\n{result.stdout}{result.stderr}")


def _prepare_registry(settings: dict[str, str]) -> None:
    stack.require(wasm_image.TOOL, wasm_image.BUILD_HINT)
    filter_image(settings)   # build/oci holds build/wirelens_filter.wasm
    paths(settings)["registry_ready"].unlink(missing_ok=True)


def registry_ready(settings: dict[str, str]) -> Callable[[], bool]:
    """Serving: its ready file names our filter image (by digest) and /v2/ answers."""
    expected = filter_image(settings)
    api = stack.http_ok(f"http://{registry_address(settings)}/v2/")
    return lambda: served_image(settings) == expected and api()


def _prepare_istiod(settings: dict[str, str]) -> None:
    stack.require(HARNESS, HARNESS_HINT)
    check_local_stack(settings)
    paths(settings)["ready_file"].unlink(missing_ok=True)
    write_resources(settings)


def istiod_ready(settings: dict[str, str]) -> Callable[[], bool]:
    ready_file = paths(settings)["ready_file"]
    xds = stack.tcp_open(int(settings["WIRELENS_ISTIO_XDS_PORT"]))
    return lambda: ready_file.exists() and xds()


COMPONENTS = [
    stack.Component(
        name="registry",
        command=lambda s: [str(wasm_image.TOOL), "registry", "--listen", registry_address(s),
                           "--seed", str(wasm_image.LAYOUT), "--repo", REGISTRY_REPO,
                           "--ready-file", str(paths(s)["registry_ready"])],
        ports=["WIRELENS_ISTIO_REGISTRY_PORT"],
        ready=registry_ready,
        prepare=_prepare_registry,
        enabled=from_registry,
    ),
    stack.Component(
        name="istiod",
        command=lambda s: [str(HARNESS), "serve", "--xds", f"127.0.0.1:{s['WIRELENS_ISTIO_XDS_PORT']}",
                           "--config-dir", str(paths(s)["config_dir"]),
                           "--mesh-config", str(paths(s)["mesh_config"]),
                           "--ready-file", str(paths(s)["ready_file"]),
                           # istio-agent's pull of oci:// modules (plain HTTP: the registry is on loopback)
                           *(["--agent-wasm-cache", str(paths(s)["wasm_cache"])] if from_registry(s) else [])],
        ports=["WIRELENS_ISTIO_XDS_PORT"],
        ready=istiod_ready,
        prepare=_prepare_istiod,
    ),
    stack.Component(
        name="envoy",
        command=lambda s: [str(stack.envoy_binary()), "-c", str(paths(s)["bootstrap"]), "--disable-hot-restart",
                           "--concurrency", s["WIRELENS_ISTIO_CONCURRENCY"],
                           "--log-level", s["WIRELENS_ISTIO_LOG_LEVEL"]],
        ports=["WIRELENS_ISTIO_PORT", "WIRELENS_ISTIO_TRANSCODE_PORT", "WIRELENS_ISTIO_ADMIN_PORT"],
        ready=envoy_ready,
        prepare=_bootstrap,
    ),
]


def up(settings: dict[str, str], log: Callable[[str], None] = print) -> None:
    # Say which part of readiness never came when Envoy does not get ready.
    stack.start_all(COMPONENTS, settings, log, width=8,
                    explain=lambda c: f"missing: {what_is_missing(settings)}" if c.name == "envoy" else None)


def down(settings: dict[str, str], log: Callable[[str], None] = print) -> None:
    for component in reversed(COMPONENTS):
        if component.enabled(settings) or stack.read_pid(settings, component.name):
            log(f"  {component.name:<8} {stack.stop(component.name, settings)}")


def pids(settings: dict[str, str]) -> dict[str, int | None]:
    return {component.name: stack.read_pid(settings, component.name) for component in COMPONENTS
            if component.enabled(settings)}


def status(settings: dict[str, str], log: Callable[[str], None] = print) -> bool:
    healthy = True
    log(f"  {'process':<8} {'pid':<8} {'port':<6} {'health':<8} log")
    for component in COMPONENTS:
        pid = stack.read_pid(settings, component.name)
        if not component.enabled(settings) and not pid:
            continue
        try:
            answers = component.ready(settings)()
        except StackError:
            answers = False
        health = ("up" if answers else "DOWN") if pid else ("foreign" if answers else "stopped")
        healthy &= bool(pid) and answers
        log(f"  {component.name:<8} {str(pid or '-'):<8} {component.port(settings):<6} {health:<8} "
            f"{stack.log_path(settings, component.name)}")
    if not healthy and stack.read_pid(settings, "envoy"):
        log(f"  missing: {what_is_missing(settings)}")
    return healthy


def demo(settings: dict[str, str], calls: int = 50, log: Callable[[str], None] = print) -> None:
    """Calls of every protocol through the gateway (bin/loadgen; REST also through the transcoding port,
    recorded as rest-transcoded), then each protocol's row count and bytes from ClickHouse."""
    run_id = f"istio-demo-{time.strftime('%Y%m%d-%H%M%S')}"
    main_port, transcode_port = settings["WIRELENS_ISTIO_PORT"], settings["WIRELENS_ISTIO_TRANSCODE_PORT"]
    runs = [(protocol, main_port) for protocol in ("rest", "rest-proto", "grpc", "grpc-web", "grpc-web-text")]
    for protocol, port in [*runs, ("rest", transcode_port)]:
        target = f"127.0.0.1:{port}"
        result = subprocess.run([str(stack.BIN / "loadgen"), "-target", target, "-protocol", protocol,
                                 "-operation", "hello.SayHello", "-n", str(calls), "-run-id", run_id,
                                 "-timeout", "60s"], capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            raise StackError(f"loadgen {protocol} through {target}: {result.stderr.strip()[-500:]}")
        log(f"  {protocol:<14} {calls} calls through {target}")
    want = calls * (len(runs) + 1)
    count = f"SELECT count() FROM wirelens.requests FINAL WHERE run_id = '{run_id}'"
    try:
        seen = wait_for("the gateway's calls as rows", lambda: int(stack.clickhouse_query(settings, count).strip() or 0),
                        lambda n: n >= want, timeout_s=60, interval_s=0.5)
    except WaitTimeout as exc:
        seen = exc.last_seen  # shown as "N of M calls" below
    table = stack.clickhouse_query(settings, (
        f"SELECT protocol, count() AS calls, round(avg(request_body_bytes)) AS request_bytes, "
        f"round(avg(response_body_bytes)) AS response_bytes, quantile(0.5)(duration_us) AS p50_us "
        f"FROM wirelens.requests FINAL WHERE run_id = '{run_id}' GROUP BY protocol ORDER BY protocol "
        f"FORMAT PrettyCompactMonoBlock"))
    log(f"run {run_id}: {seen} of {want} calls in wirelens.requests\n{table}")
    log(f"report: bin/wirelens report --run {run_id}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["up", "down", "status", "render", "set-sample-rate", "filters", "demo"])
    parser.add_argument("value", nargs="?", help="for set-sample-rate: the rate, in [0, 1]")
    args = parser.parse_args(argv)
    if (args.command == "set-sample-rate") != (args.value is not None):
        parser.error("set-sample-rate takes the rate; no other command takes a value")
    try:
        settings = load_settings()
        if args.command == "up":
            print(f"starting wirelens under istiod (state in {state_dir(settings)})")
            up(settings)
            print(f"gateway is up: http://127.0.0.1:{settings['WIRELENS_ISTIO_PORT']} (REST, gRPC, gRPC-Web), "
                  f"http://127.0.0.1:{settings['WIRELENS_ISTIO_TRANSCODE_PORT']} (REST transcoded to gRPC); "
                  "`python -m deploy.istio.local status`, `... down`")
        elif args.command == "down":
            down(settings)
        elif args.command == "status":
            return 0 if status(settings) else 1
        elif args.command == "render":
            for path in write_resources(settings):
                print(path)
        elif args.command == "set-sample-rate":
            try:
                rate = plugin_settings.check_sample_rate(args.value, "set-sample-rate")
            except ValueError as exc:
                parser.error(str(exc))
            for path in set_sample_rate(settings, rate):
                print(path)
        elif args.command == "demo":
            demo(settings)
        elif args.command == "filters":
            for variable in ("WIRELENS_ISTIO_PORT", "WIRELENS_ISTIO_TRANSCODE_PORT"):
                print(f"{variable}={settings[variable]}:")
                for http_filter in http_filters(settings, int(settings[variable])):
                    print(f"  {http_filter['name']}")
    except StackError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
