"""wirelens in Envoy Gateway v1.9.1, run for real on this machine, next to the local stack.

    gateway.py up                   start the module registry and Envoy Gateway (which starts Envoy)
    gateway.py down                 stop exactly what `up` started (pid files), nothing else
    gateway.py status               each process: pid, port, health; Envoy's pid and admin port
    gateway.py render               write the resources and Envoy Gateway's config, start nothing
    gateway.py set-sample-rate R    rewrite the EnvoyExtensionPolicy on disk: live, no restart
    gateway.py set-counterfactual-rate R   the same for the filter's counterfactual_rate
    gateway.py filters              the HTTP filters of the gateway's listener, in Envoy's order

Envoy Gateway runs standalone: Custom provider, File resources (the directory
`resources/` of the state dir, which it watches), Host infrastructure (it
starts Envoy itself: the project's Envoy 1.40 binary, placed where it looks
for it). The gateway exports to the local stack's Collector and routes to its
REST and gRPC services, so the local stack must be up (`make up`). Its filter
sizes payloads in the other protocol's encoding as the local stack's does:
WIRELENS_COUNTERFACTUAL_RATE (default 1, every recorded call) and
WIRELENS_COUNTERFACTUAL_MAX_BYTES (default 1 MiB). Its filter is the build
the local stack's WIRELENS_FILTER_MODULE names: wasm (an OCI image Envoy
Gateway pulls by digest from a registry on loopback: `bin/wasm-image registry`,
HTTPS with a CA made for this state dir, seeded from build/oci, `make
wasm-image`) or native (the dynamic module, copied into the state dir under its
sha256 and registered by path in the EnvoyProxy; no registry).

Ports: deploy/envoy_gateway/ports.env (ours) and deploy/local/ports.env (the
stack's), each overridable by an environment variable of the same name.
Envoy Gateway itself also holds 18000 (xDS), 18002 (its wasm server) and
8081 (health probe) on every interface; v1.9.1 has no setting for them, so
`up` checks they are free and names who holds them if not.

State (pid files, logs, certificates, Envoy Gateway's data, the rendered
resources) lives in $WIRELENS_GATEWAY_STATE_DIR (default .run/envoy-gateway).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import quote
from typing import Callable

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from deploy.envoy_gateway import manifests
from deploy.kubernetes.images import wasm_image  # the module's OCI artifact (build/oci)
from envoy import plugin_settings, wiring  # the filter's settings, checked; its two builds
from deploy.local import stack  # settings, processes, probes of the local stack
from wirelens_helpers.wait import WaitTimeout, wait_for

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

StackError = stack.StackError
BIN = ROOT / "bin"
ENVOY_GATEWAY = BIN / "envoy-gateway"
WASM = ROOT / "build" / "wirelens_filter.wasm"
OPMAP = ROOT / "build" / "opmap.json"
# Envoy Gateway v1.9.1 listens on these, on every interface, and has no setting for them.
FIXED_PORTS = {18000: "its xDS server", 18002: "its wasm module server", 8081: "its health probe"}
BUILD_HINT = ("build it: GOTOOLCHAIN=local GOBIN=$PWD/bin go install "
              "github.com/envoyproxy/gateway/cmd/envoy-gateway@v1.9.1 (deploy/envoy_gateway/README.md)")
WASM_IMAGE_TOOL = wasm_image.TOOL
# The repository the registry keeps the artifacts under: <127.0.0.1:port>/wirelens/wirelens-filter@sha256:...
REGISTRY_REPO = "wirelens"


# ---------------------------------------------------------------- settings


def load_settings(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The local stack's settings (its ports, for the services and the Collector) plus ours.

    Our processes share the local stack's helpers (pid files, logs, process
    groups), which find their files under WIRELENS_STATE_DIR: for them it is
    our state dir; the stack's own stays in WIRELENS_LOCAL_STATE_DIR.
    """
    environ = dict(os.environ if environ is None else environ)
    settings = stack.load_settings(environ)
    try:
        settings.update(manifests.load_ports(environ))
    except ValueError as exc:
        raise StackError(str(exc)) from None
    settings["WIRELENS_LOCAL_STATE_DIR"] = settings["WIRELENS_STATE_DIR"]
    state = Path(environ.get("WIRELENS_GATEWAY_STATE_DIR", ROOT / ".run" / "envoy-gateway")).resolve()
    settings["WIRELENS_STATE_DIR"] = str(state)
    settings["WIRELENS_GATEWAY_CONCURRENCY"] = environ.get("WIRELENS_GATEWAY_CONCURRENCY", "2")
    settings["WIRELENS_GATEWAY_LOG_LEVEL"] = environ.get("WIRELENS_GATEWAY_LOG_LEVEL", "info")
    # Envoy Gateway keeps its wasm cache under $HOME/.eg/wasm: give it a home in the state dir.
    settings["HOME"] = str(state / "eg" / "home")
    return settings


def state_dir(settings: dict[str, str]) -> Path:
    return Path(settings["WIRELENS_STATE_DIR"])


def paths(settings: dict[str, str]) -> dict[str, Path]:
    eg = state_dir(settings) / "eg"
    return {
        "config": state_dir(settings) / "envoy-gateway.yaml",
        "resources": state_dir(settings) / "resources",
        "registry_certs": state_dir(settings) / "registry-certs",   # ca.crt, tls.crt, tls.key (wasm-image testca)
        "registry_ready": state_dir(settings) / "registry.json",    # what the registry serves, once it does
        "wasm_cache": Path(settings["HOME"]) / ".eg" / "wasm",      # Envoy Gateway's wasm cache
        "config_home": eg / "config",
        "data_home": eg / "data",
        "state_home": eg / "state",
        "runtime_dir": eg / "run",
        "home": Path(settings["HOME"]),
        "envoy_certs": eg / "config" / "certs" / "envoy",
    }


def registry_address(settings: dict[str, str]) -> str:
    return f"127.0.0.1:{settings['WIRELENS_GATEWAY_WASM_PORT']}"


def filter_image(settings: dict[str, str]) -> str:
    """The module's image reference by digest in our registry, from build/oci; StackError if that layout is
    missing or was built from another .wasm than build/wirelens_filter.wasm."""
    if not WASM.exists():
        raise StackError(f"{WASM} is missing: run `make filter`")
    try:
        digest = wasm_image.digests()[wasm_image.FILTER]
    except wasm_image.LayoutError as exc:
        raise StackError(str(exc)) from None
    layer_sha = _layout_module_sha256(digest)
    if layer_sha != manifests.sha256_file(WASM):
        raise StackError(f"{wasm_image.LAYOUT} holds another module than {WASM} (plugin.wasm sha256 {layer_sha}): "
                         f"{wasm_image.BUILD_HINT}")
    return wasm_image.reference(f"{registry_address(settings)}/{REGISTRY_REPO}", digest)


def _layout_module_sha256(digest: str) -> str:
    """The sha256 of plugin.wasm inside the layout's filter image (read from its layer)."""
    import gzip
    import hashlib
    import tarfile

    blobs = wasm_image.LAYOUT / "blobs" / "sha256"
    manifest = json.loads((blobs / digest.removeprefix("sha256:")).read_bytes())
    layer = blobs / manifest["layers"][-1]["digest"].removeprefix("sha256:")
    with tarfile.open(fileobj=gzip.open(layer), mode="r|") as tar:
        for member in tar:
            if member.name == "plugin.wasm":
                return hashlib.sha256(tar.extractfile(member).read()).hexdigest()
    raise StackError(f"{layer}: no plugin.wasm in the filter image's layer")


def native(settings: dict[str, str]) -> bool:
    """Whether the gateway runs the native build (the local stack's WIRELENS_FILTER_MODULE, envoy/wiring.py)."""
    return settings.get("WIRELENS_FILTER_MODULE", "wasm") == "native"


def placed_native(settings: dict[str, str]) -> Path:
    """The dynamic module as the gateway's Envoy loads it: a copy named after its sha256 in the state dir.
    A new build is a new path, so a new EnvoyProxy; the same path would give back the library dlopen
    already holds."""
    source = wiring.MODULE_FILES["native"]
    if not source.exists():
        raise StackError(f"{source} is missing: run `{wiring.MODULE_BUILDS['native']}` (WIRELENS_FILTER_MODULE=native)")
    sha = manifests.sha256_file(source)
    return state_dir(settings) / "native" / f"libwirelens-{sha[:16]}.so"


def _place_native(settings: dict[str, str]) -> None:
    placed = placed_native(settings)
    if not placed.exists():
        placed.parent.mkdir(parents=True, exist_ok=True)
        for old in placed.parent.glob("libwirelens-*.so"):
            old.unlink()
        temporary = placed.with_name(f".{placed.name}.tmp")
        shutil.copyfile(wiring.MODULE_FILES["native"], temporary)
        temporary.replace(placed)


def inputs(settings: dict[str, str], sample_rate: float | None = None, counterfactual_rate: float | None = None,
           counterfactual_max_bytes: int | None = None) -> manifests.Inputs:
    """The resources' inputs; counterfactual_rate and _max_bytes None: the local stack's
    WIRELENS_COUNTERFACTUAL_RATE and WIRELENS_COUNTERFACTUAL_MAX_BYTES."""
    image = None if native(settings) else filter_image(settings)
    if not OPMAP.exists():
        raise StackError(f"{OPMAP} is missing: run `make proto`")
    return manifests.Inputs(
        gateway_port=int(settings["WIRELENS_GATEWAY_PORT"]),
        rest_port=int(settings["WIRELENS_REST_PORT"]),
        grpc_port=int(settings["WIRELENS_GRPC_PORT"]),
        collector_port=int(settings["WIRELENS_COLLECTOR_OTLP_PORT"]),
        wasm_url="", wasm_sha256="",
        wasm_image=image, wasm_image_ca=None if native(settings) else paths(settings)["registry_certs"] / "ca.crt",
        plugin_config=json.loads(OPMAP.read_text()),
        envoy_admin_port=int(settings["WIRELENS_GATEWAY_ADMIN_PORT"]),
        ready_port=int(settings["WIRELENS_GATEWAY_READY_PORT"]),
        concurrency=int(settings["WIRELENS_GATEWAY_CONCURRENCY"]),
        sample_rate=sample_rate,
        counterfactual_rate=(float(settings["WIRELENS_COUNTERFACTUAL_RATE"]) if counterfactual_rate is None
                             else counterfactual_rate),
        counterfactual_max_bytes=(int(settings["WIRELENS_COUNTERFACTUAL_MAX_BYTES"]) if counterfactual_max_bytes is None
                                  else counterfactual_max_bytes),
        standalone=True,
        envoy_certs=paths(settings)["envoy_certs"],
        module="native" if native(settings) else "wasm",
        native_path=str(placed_native(settings)) if native(settings) else None,
    )


# ---------------------------------------------------------------- preparing


def _certgen(settings: dict[str, str]) -> None:
    """Envoy Gateway's certificates (xDS TLS, Envoy's client cert, the HMAC salt), once per state dir."""
    p = paths(settings)
    certs = p["config_home"] / "certs"
    needed = [certs / "envoy-gateway" / "tls.crt", certs / "envoy" / "tls.crt",
              certs / "envoy-oidc-hmac" / "hmac-secret"]
    if all(path.exists() for path in needed):
        return
    result = subprocess.run([str(ENVOY_GATEWAY), "certgen", "--local", "--config-home", str(p["config_home"])],
                            capture_output=True, text=True, timeout=60, env={**os.environ, "HOME": str(p["home"])})
    if result.returncode != 0 or not all(path.exists() for path in needed):
        raise StackError(f"envoy-gateway certgen --local failed:\n{result.stdout}{result.stderr}")


def _place_envoy(settings: dict[str, str]) -> Path:
    """Our Envoy where func-e (inside Envoy Gateway) looks for version ENVOY_VERSION: no download."""
    binary = stack.envoy_binary()
    version = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=60).stdout
    if f"/{manifests.ENVOY_VERSION}/" not in version:
        raise StackError(f"{binary} is not Envoy {manifests.ENVOY_VERSION} ({version.strip()}): run `make bootstrap`")
    target = paths(settings)["data_home"] / "envoy-versions" / manifests.ENVOY_VERSION / "bin" / "envoy"
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.is_symlink() or target.exists():
        if target.resolve() == binary.resolve():
            return target
        target.unlink()
    target.symlink_to(binary)
    return target


def write_resources(settings: dict[str, str], sample_rate: float | None = None) -> list[Path]:
    header = manifests.HEADER.format(version=manifests.ENVOY_GATEWAY_VERSION)
    files = manifests.render_files(inputs(settings, sample_rate))
    return manifests.write_files(paths(settings)["resources"], files, header)


def write_config(settings: dict[str, str]) -> Path:
    p = paths(settings)
    for name in ("config_home", "data_home", "state_home", "runtime_dir", "home", "resources"):
        p[name].mkdir(parents=True, exist_ok=True)
    config = manifests.eg_config(p["resources"], p["config_home"], p["data_home"], p["state_home"], p["runtime_dir"],
                              int(settings["WIRELENS_EG_ADMIN_PORT"]), settings["WIRELENS_GATEWAY_LOG_LEVEL"])
    header = manifests.HEADER.format(version=manifests.ENVOY_GATEWAY_VERSION)
    manifests.write_atomic(p["config"], header + manifests.to_yaml([config]))
    return p["config"]


def _prepare_registry(settings: dict[str, str]) -> None:
    """The registry's certificate (a CA of this state dir's own, once) and a check of what it will serve."""
    stack.require(WASM_IMAGE_TOOL, wasm_image.BUILD_HINT)
    filter_image(settings)
    certs = paths(settings)["registry_certs"]
    if not all((certs / name).exists() for name in ("ca.crt", "tls.crt", "tls.key")):
        result = subprocess.run([str(WASM_IMAGE_TOOL), "testca", "--out", str(certs), "--host", "127.0.0.1"],
                                capture_output=True, text=True, timeout=60)
        if result.returncode != 0:
            raise StackError(f"wasm-image testca failed:\n{result.stdout}{result.stderr}")
    paths(settings)["registry_ready"].unlink(missing_ok=True)


def registry_ready(settings: dict[str, str]) -> Callable[[], bool]:
    """Serving: its ready file names our filter image, and /v2/ answers over HTTPS with our CA."""
    ready_file = paths(settings)["registry_ready"]

    def probe() -> bool:
        try:
            served = json.loads(ready_file.read_text())
            if served["images"].get(wasm_image.FILTER) != filter_image(settings):
                return False
            context = ssl.create_default_context(cafile=str(paths(settings)["registry_certs"] / "ca.crt"))
            with urllib.request.urlopen(f"https://{registry_address(settings)}/v2/", timeout=2,
                                        context=context) as response:
                return response.status == 200
        except (OSError, ValueError, KeyError, StackError):
            return False
    return probe


def _prepare_envoy_gateway(settings: dict[str, str]) -> None:
    stack.require(ENVOY_GATEWAY, BUILD_HINT)
    check_local_stack(settings)
    for port, what in FIXED_PORTS.items():
        check_fixed_port(port, what)
    check_hot_restart_base_id()
    write_config(settings)
    _certgen(settings)
    _place_envoy(settings)
    if native(settings):
        _place_native(settings)
    write_resources(settings)


def render_only(settings: dict[str, str]) -> list[Path]:
    stack.require(ENVOY_GATEWAY, BUILD_HINT)
    write_config(settings)
    _certgen(settings)
    return [paths(settings)["config"], *write_resources(settings)]


def check_fixed_port(port: int, what: str) -> None:
    holder = stack.port_holder(port)
    if holder:
        raise StackError(f"envoy-gateway: port {port} ({what}; fixed in Envoy Gateway v1.9.1, every interface) "
                         f"is already taken by {holder}. Stop that process first: this port cannot be moved.")
    stack.check_port_free(port, f"Envoy Gateway's fixed port for {what}", "envoy-gateway")


# Envoy's hot-restart sockets for base id 0 (abstract Unix sockets): Envoy Gateway's host mode runs Envoy with hot
# restart on base id 0 and no setting to change it; another Envoy holding them makes it exit at once with
# "unable to bind domain socket with base_id=0" (seen here), and Envoy Gateway only logs that.
HOT_RESTART_SOCKETS = ("@envoy_domain_socket_parent_0", "@envoy_domain_socket_child_0")


def hot_restart_holders() -> list[str]:
    """Who holds base id 0's hot-restart sockets: "pid N (command)" each, [] if nobody."""
    inodes = set()
    try:
        for line in Path("/proc/net/unix").read_text().splitlines()[1:]:
            fields = line.split()
            # Abstract names are shown padded with "@" (NULs) to the full path length.
            if len(fields) >= 8 and fields[7].rstrip("@") in HOT_RESTART_SOCKETS:
                inodes.add(f"socket:[{fields[6]}]")
    except OSError:
        return []
    holders = []
    for proc in Path("/proc").iterdir() if inodes else ():
        if not proc.name.isdigit():
            continue
        try:
            if any(os.readlink(fd) in inodes for fd in (proc / "fd").iterdir()):
                command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
                holders.append(f"pid {proc.name} ({command[:160]})")
        except OSError:
            continue
    return holders or (["a process this user cannot see"] if inodes else [])


def check_hot_restart_base_id() -> None:
    holders = hot_restart_holders()
    if holders:
        raise StackError("envoy-gateway: Envoy's hot-restart base id 0 is taken by " + ", ".join(holders) +
                         ". Envoy Gateway v1.9.1 runs its Envoy on base id 0 (host mode has no setting for it), "
                         "so that Envoy would exit at once. Stop it, or run it with --disable-hot-restart "
                         "(or --use-dynamic-base-id).")


def check_local_stack(settings: dict[str, str]) -> None:
    """The gateway routes to the stack's services and exports to its Collector: they must answer."""
    needs = [
        ("the Collector", stack.http_ok(f"http://127.0.0.1:{settings['WIRELENS_COLLECTOR_HEALTH_PORT']}/"),
         "WIRELENS_COLLECTOR_HEALTH_PORT"),
        ("the REST service", stack.http_ok(f"http://127.0.0.1:{settings['WIRELENS_REST_PORT']}/healthz"),
         "WIRELENS_REST_PORT"),
        ("the gRPC service", stack.tcp_open(int(settings["WIRELENS_GRPC_PORT"])), "WIRELENS_GRPC_PORT"),
    ]
    missing = [f"{what} ({variable}={settings[variable]})" for what, probe, variable in needs if not probe()]
    if missing:
        raise StackError(f"the local stack is not up: no answer from {', '.join(missing)}. "
                         "Start it first: `make up` (same port variables).")


# ---------------------------------------------------------------- the gateway's Envoy


def admin_url(settings: dict[str, str]) -> str:
    return f"http://127.0.0.1:{settings['WIRELENS_GATEWAY_ADMIN_PORT']}"


def admin_stat(admin: str, name: str) -> int | None:
    """One counter or gauge (exact name) of the Envoy whose admin is at `admin`, None if it has none or does not
    answer."""
    try:
        status, body = stack.http_get(f"{admin}/stats?filter={quote('^' + re.escape(name) + '$')}", timeout=30)
    except (OSError, urllib.error.URLError):
        return None
    for line in body.splitlines():
        key, _, value = line.partition(": ")
        if key == name and value.isdigit():
            return int(value)
    return None


def envoy_stat(settings: dict[str, str], name: str) -> int | None:
    return admin_stat(admin_url(settings), name)


def listening_addresses(port: int) -> set[str]:
    """The IPv4 addresses something listens on at this port (from /proc/net/tcp)."""
    found = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        address, _, hex_port = fields[1].partition(":")
        if fields[3] == "0A" and int(hex_port, 16) == port:
            found.add(".".join(str(int(address[i:i + 2], 16)) for i in (6, 4, 2, 0)))
    return found


def envoy_pid(settings: dict[str, str]) -> int | None:
    """The Envoy that our Envoy Gateway started: its child process running the envoy binary."""
    parent = stack.read_pid(settings, "envoy-gateway")
    if parent is None:
        return None
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            fields = (proc / "stat").read_text().rsplit(") ", 1)[1].split()
            if int(fields[1]) != parent:
                continue
            argv0 = (proc / "cmdline").read_bytes().split(b"\0")[0].decode()
        except (OSError, IndexError):
            continue
        if Path(argv0).name == "envoy":
            return int(proc.name)
    return None


def gateway_ready(settings: dict[str, str]) -> Callable[[], bool]:
    """Ready for traffic: Envoy Gateway's probe, Envoy LIVE, our listener on 127.0.0.1, the wasm VM running
    (the native build: its filter in the listener, which Envoy accepts only once the .so has loaded)."""
    eg_ready = stack.http_ok("http://127.0.0.1:8081/readyz")
    envoy_live = stack.http_ok(f"{admin_url(settings)}/ready", "LIVE")
    port = int(settings["WIRELENS_GATEWAY_PORT"])

    def filter_runs() -> bool:
        if not native(settings):
            return (envoy_stat(settings, "wasm.envoy.wasm.runtime.v8.active") or 0) > 0
        try:
            return active_plugin_config(settings) is not None
        except (OSError, ValueError):
            return False

    def probe() -> bool:
        return eg_ready() and envoy_live() and listening_addresses(port) == {"127.0.0.1"} and filter_runs()
    return probe


def config_dump(settings: dict[str, str], resource: str = "dynamic_listeners") -> dict:
    with urllib.request.urlopen(f"{admin_url(settings)}/config_dump?resource={resource}", timeout=10) as response:
        return json.load(response)


def http_filters(settings: dict[str, str], listener: str = manifests.LISTENER_XDS_NAME) -> list[dict]:
    """The HTTP filters of the active listener, in order (from Envoy's /config_dump)."""
    for entry in config_dump(settings).get("configs", []):
        active = entry.get("active_state", {}).get("listener", {})
        if active.get("name") != listener:
            continue
        for chain in active.get("filter_chains", []) + ([active["default_filter_chain"]]
                                                          if "default_filter_chain" in active else []):
            for network_filter in chain.get("filters", []):
                hcm = network_filter.get("typed_config", {})
                if "http_filters" in hcm:
                    return hcm["http_filters"]
    return []


def active_plugin_config(settings: dict[str, str]) -> dict | None:
    """The wirelens plugin configuration Envoy runs now (the active listener's wasm filter, or its native one)."""
    for http_filter in http_filters(settings):
        typed = http_filter.get("typed_config", {})
        config = typed.get("config", {})
        if config.get("root_id") == "wirelens":
            return json.loads(config.get("configuration", {}).get("value", "null"))
        if wiring.filter_module(typed) == "native" and typed.get("filter_name") == wiring.FILTER_NAME:
            return json.loads(typed.get("filter_config", {}).get("value", "null"))
    return None


# The filter's settings the set-* commands change, each kept by the others.
POLICY_SETTINGS = ("sample_rate", "counterfactual_rate", "counterfactual_max_bytes")


def policy_path(settings: dict[str, str]) -> Path:
    return paths(settings)["resources"] / "wirelens-policy.yaml"


def policy_settings(settings: dict[str, str]) -> dict:
    """The POLICY_SETTINGS the EnvoyExtensionPolicy on disk gives the filter ({} without one)."""
    try:
        documents = list(YAML(typ="safe").load_all(policy_path(settings).read_text()))
        spec = documents[0]["spec"]
        config = (spec["dynamicModule"] if "dynamicModule" in spec else spec["wasm"])[0]["config"]
        return {key: config[key] for key in POLICY_SETTINGS if key in config}
    except (OSError, YAMLError, LookupError, TypeError):
        return {}


def set_policy_settings(settings: dict[str, str], **changes) -> Path:
    """Rewrite the EnvoyExtensionPolicy file (one rename) with changes to POLICY_SETTINGS, the others as
    they are on disk: Envoy Gateway picks it up and updates Envoy live."""
    unknown = set(changes) - set(POLICY_SETTINGS)
    if unknown:
        raise ValueError(f"not a policy setting: {', '.join(sorted(unknown))}")
    policy = manifests.extension_policy(inputs(settings, **{**policy_settings(settings), **changes}))
    path = policy_path(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    manifests.write_atomic(path, manifests.HEADER.format(version=manifests.ENVOY_GATEWAY_VERSION)
                           + manifests.to_yaml([policy]))
    return path


def set_sample_rate(settings: dict[str, str], rate: float) -> Path:
    return set_policy_settings(settings, sample_rate=rate)


def set_counterfactual_rate(settings: dict[str, str], rate: float) -> Path:
    return set_policy_settings(settings, counterfactual_rate=rate)


# ---------------------------------------------------------------- processes


COMPONENTS = [
    stack.Component(
        name="wasm-registry",
        command=lambda s: [str(WASM_IMAGE_TOOL), "registry", "--listen", registry_address(s),
                           "--tls-cert", str(paths(s)["registry_certs"] / "tls.crt"),
                           "--tls-key", str(paths(s)["registry_certs"] / "tls.key"),
                           "--seed", str(wasm_image.LAYOUT), "--repo", REGISTRY_REPO,
                           "--ready-file", str(paths(s)["registry_ready"])],
        ports=["WIRELENS_GATEWAY_WASM_PORT"],
        ready=registry_ready,
        prepare=_prepare_registry,
        enabled=lambda s: not native(s),   # the native build is a file on this host: nothing to pull
    ),
    stack.Component(
        name="envoy-gateway",
        command=lambda s: [str(ENVOY_GATEWAY), "server", "--config-path", str(paths(s)["config"])],
        ports=["WIRELENS_GATEWAY_PORT", "WIRELENS_GATEWAY_ADMIN_PORT", "WIRELENS_GATEWAY_READY_PORT",
               "WIRELENS_EG_ADMIN_PORT"],
        ready=gateway_ready,
        prepare=_prepare_envoy_gateway,
    ),
]


def up(settings: dict[str, str], log: Callable[[str], None] = print) -> None:
    stack.start_all(COMPONENTS, settings, log, width=14)
    log(f"  {'envoy':<14} pid {envoy_pid(settings) or '-':<7} admin {admin_url(settings)} "
        f"(started by envoy-gateway)")


def down(settings: dict[str, str], log: Callable[[str], None] = print) -> None:
    # Envoy runs in Envoy Gateway's process group: stopping the group stops both.
    for component in reversed(COMPONENTS):
        log(f"  {component.name:<14} {stack.stop(component.name, settings)}")


def status(settings: dict[str, str], log: Callable[[str], None] = print) -> bool:
    healthy = True
    log(f"  {'process':<14} {'pid':<8} {'port':<6} {'health':<8} log")
    for component in COMPONENTS:
        pid = stack.read_pid(settings, component.name)
        if not component.enabled(settings) and not pid:
            continue
        answers = component.ready(settings)()
        health = ("up" if answers else "DOWN") if pid else ("foreign" if answers else "stopped")
        healthy &= bool(pid) and answers
        log(f"  {component.name:<14} {str(pid or '-'):<8} {component.port(settings):<6} {health:<8} "
            f"{stack.log_path(settings, component.name)}")
    pid = envoy_pid(settings)
    if pid:
        log(f"  {'envoy':<14} {pid:<8} {settings['WIRELENS_GATEWAY_PORT']:<6} "
            f"listens on {sorted(listening_addresses(int(settings['WIRELENS_GATEWAY_PORT'])))}, "
            f"admin {admin_url(settings)}")
        log(f"  the wirelens filter's {'native' if native(settings) else 'wasm'} build "
            f"(WIRELENS_FILTER_MODULE; `gateway.py filters` shows the listener's filters)")
    return healthy


DEMO_PROTOCOLS = ("rest", "rest-proto", "grpc", "grpc-web", "grpc-web-text")


def demo(settings: dict[str, str], calls: int = 50, log: Callable[[str], None] = print) -> None:
    """Calls of every protocol through the gateway (loadgen), then each protocol's row count and bytes."""
    run_id = f"gateway-demo-{time.strftime('%Y%m%d-%H%M%S')}"
    target = f"127.0.0.1:{settings['WIRELENS_GATEWAY_PORT']}"
    for protocol in DEMO_PROTOCOLS:
        result = subprocess.run([str(BIN / "loadgen"), "-target", target, "-protocol", protocol,
                                 "-operation", "hello.SayHello", "-n", str(calls), "-run-id", run_id,
                                 "-timeout", "60s"], capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            raise StackError(f"loadgen {protocol} through {target}: {result.stderr.strip()[-500:]}")
        log(f"  {protocol:<14} {calls} calls through the gateway")
    query = (f"SELECT protocol, count() AS calls, round(avg(request_body_bytes)) AS request_bytes, "
             f"round(avg(response_body_bytes)) AS response_bytes, quantile(0.5)(duration_us) AS p50_us "
             f"FROM wirelens.requests FINAL WHERE run_id = '{run_id}' GROUP BY protocol ORDER BY protocol")
    want = calls * len(DEMO_PROTOCOLS)

    def rows() -> int:
        return int(stack.clickhouse_query(settings, f"SELECT count() FROM wirelens.requests FINAL "
                                                    f"WHERE run_id = '{run_id}'").strip() or 0)
    try:
        seen = wait_for("the gateway's calls as rows", rows, lambda n: n >= want, timeout_s=60, interval_s=0.5)
    except WaitTimeout as exc:
        seen = exc.last_seen  # shown as "N of M calls" below
    table = stack.clickhouse_query(settings, query + " FORMAT PrettyCompactMonoBlock")
    log(f"run {run_id}: {seen} of {want} calls in wirelens.requests\n{table}")
    log(f"report: bin/wirelens report --run {run_id}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    setters = {"set-sample-rate": (set_sample_rate, plugin_settings.check_sample_rate),
               "set-counterfactual-rate": (set_counterfactual_rate, plugin_settings.check_counterfactual_rate)}
    parser.add_argument("command", choices=["up", "down", "status", "render", *setters, "filters", "demo"])
    parser.add_argument("value", nargs="?", help="for set-sample-rate, set-counterfactual-rate: the rate, in [0, 1]")
    args = parser.parse_args(argv)
    if (args.command in setters) != (args.value is not None):
        parser.error(f"{' and '.join(setters)} take the rate; no other command takes a value")
    try:
        settings = load_settings()
        if args.command == "up":
            print(f"starting wirelens ({'native' if native(settings) else 'wasm'} build) in Envoy Gateway "
                  f"{manifests.ENVOY_GATEWAY_VERSION} (state in {state_dir(settings)})")
            up(settings)
            print(f"gateway is up: http://127.0.0.1:{settings['WIRELENS_GATEWAY_PORT']} "
                  "(REST, gRPC, gRPC-Web); `gateway.py status`, `gateway.py down`")
        elif args.command == "down":
            down(settings)
        elif args.command == "status":
            return 0 if status(settings) else 1
        elif args.command == "render":
            for path in render_only(settings):
                print(path)
        elif args.command in setters:
            setter, check = setters[args.command]
            try:
                rate = check(args.value, args.command)
            except ValueError as exc:
                parser.error(str(exc))
            print(setter(settings, rate))
        elif args.command == "demo":
            demo(settings)
        elif args.command == "filters":
            for http_filter in http_filters(settings):
                print(http_filter["name"])
    except StackError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
