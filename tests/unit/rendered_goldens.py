"""Every config wirelens renders, from fixed inputs: the goldens of tests/unit/test_rendered_goldens.py.

    rendered()   name -> text: the local template (envoy/render.py), inject's
                 output and report on the eight user configs of
                 tests/e2e/user_configs (and a few option sets), the Envoy
                 Gateway resources and the Istio resources; the local
                 template, inject and Envoy Gateway also with the native
                 build of the filter (envoy/wiring.py, MODULES).

Inputs are fixed so the output is the renderers' alone: the operation map and
descriptor set are frozen copies under goldens/rendered/inputs (not build/),
the wasm module and the native .so are small files of fixed bytes, ports are fixed numbers, and
machine paths are written as @ROOT@ (the checkout) and @TMP@ (a scratch
directory).

    python -m tests.unit.rendered_goldens            compare with the goldens (exit 1 on a difference)
    python -m tests.unit.rendered_goldens --update   rewrite the goldens
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import io
import json
import string
import sys
import tempfile
from pathlib import Path

from envoy import inject
from deploy.envoy_gateway import manifests
from deploy.istio import render as istio_render
from envoy import render as envoy_render

ROOT = Path(__file__).resolve().parents[2]
GOLDENS = ROOT / "tests" / "unit" / "goldens" / "rendered"
INPUTS = GOLDENS / "inputs"
USER_CONFIGS = ROOT / "tests" / "e2e" / "user_configs"

WASM_BYTES = b"\x00asm\x01\x00\x00\x00"  # a fixed module: inject copies it by digest for ECDS
NATIVE_BYTES = b"\x7fELF golden"             # the same for the native build's .so
PORTS = {name: str(20000 + i) for i, name in enumerate(envoy_render.PORT_VARIABLES)}
USER_PORTS = {"LISTEN_PORT": "10000", "LISTEN_PORT_2": "10001", "ADMIN_PORT": "9901",
              "REST_PORT": "18080", "GRPC_PORT": "18090", "OTEL_PORT": "14317"}
ISTIO_IMAGE = "oci://registry.example.com/wirelens/wirelens-filter:0.0.0-golden"


class Scratch:
    """A scratch directory holding the fixed wasm module, web page and certificates."""

    def __init__(self, directory: Path):
        self.dir = directory
        self.wasm = directory / "wirelens_filter.wasm"
        self.wasm.write_bytes(WASM_BYTES)
        self.native = directory / "libwirelens.so"
        self.native.write_bytes(NATIVE_BYTES)
        self.web = directory / "web"
        self.web.mkdir()
        for name in ("index.html", "app.js"):
            (self.web / name).write_text(f"{name}\n")
        self.certs = directory / "certs"
        self.certs.mkdir()
        for name in ("tls.crt", "tls.key", "ca.crt"):
            (self.certs / name).write_text(f"fixed {name}\n")
        self.tls_cert, self.tls_key = directory / "cert.pem", directory / "key.pem"

    def normalize(self, text: str) -> str:
        return text.replace(str(self.dir), "@TMP@").replace(str(ROOT), "@ROOT@")


def opmap_text() -> str:
    return (INPUTS / "opmap.json").read_text()


def local_template(s: Scratch) -> dict[str, str]:
    """envoy/render.py's render() as deploy/local/stack.py calls it, with a few settings."""
    descriptor_set = INPUTS / "wirelens.pb"
    variants = {
        "otlp": dict(access_log="otlp"),
        "file": dict(access_log="file", access_log_path=s.dir / "access.jsonl", sample_rate=1.0,
                     grpc_message_max_bytes=128, counterfactual_rate=0.01, counterfactual_max_bytes=65536),
        "file-sampled": dict(access_log="file", access_log_path=s.dir / "access.jsonl", sample_rate=0.25,
                             grpc_message_max_bytes=0, counterfactual_rate=1.0, counterfactual_max_bytes=1000),
        "otlp-sampled": dict(access_log="otlp", sample_rate=0.5, grpc_message_max_bytes=1024),
    }
    out = {}
    for name, kwargs in variants.items():
        out[f"local/envoy-{name}.yaml"] = envoy_render.render(PORTS, s.wasm, opmap_text(), descriptor_set,
                                                              web_dir=s.web, **kwargs)
    out["local/envoy-no-web.yaml"] = envoy_render.render(PORTS, s.wasm, opmap_text(), descriptor_set,
                                                         web_dir=s.dir / "missing-web")
    # The native build (WIRELENS_FILTER_MODULE=native): only the filter entries differ.
    for name in ("file", "otlp-sampled"):
        out[f"local/envoy-native-{name}.yaml"] = envoy_render.render(PORTS, s.native, opmap_text(), descriptor_set,
                                                                     web_dir=s.web, module="native",
                                                                     **variants[name])
    return out


def _user_config(s: Scratch, case: dict, directory: Path) -> Path:
    template = string.Template((USER_CONFIGS / case["file"]).read_text())
    text = template.substitute(USER_PORTS, CERT_FILE=str(s.tls_cert), KEY_FILE=str(s.tls_key),
                               DESCRIPTOR_SET=str(INPUTS / "wirelens.pb"))
    path = directory / f"{case['name']}{Path(case['file']).suffix}"
    path.write_text(text)
    return path


def _inject(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = inject.main(argv)
        except SystemExit as exc:
            code = exc.code
    return code, out.getvalue(), err.getvalue()


def injected(s: Scratch) -> dict[str, str]:
    """envoy/inject.py on each user config, as tests/e2e/test_inject.py runs it, and with other options."""
    cases = json.loads((USER_CONFIGS / "cases.json").read_text())
    users = s.dir / "users"
    users.mkdir()
    out = {}
    descriptor = ["--descriptor-set", str(INPUTS / "wirelens.pb")]

    def run(name: str, argv: list[str], suffix: str) -> None:
        code, stdout, stderr = _inject(argv)
        out[f"inject/{name}{suffix}"] = stdout
        out[f"inject/{name}.report"] = f"exit {code}\n{stderr}"

    by_name = {}
    for case in cases:
        path = _user_config(s, case, users)
        by_name[case["name"]] = path
        flags = [] if case["name"] == "grpc-json-transcoder" else descriptor
        run(case["name"], [str(path), "--wasm", str(s.wasm), *flags, "--collector", "127.0.0.1:14317"], path.suffix)

    front = by_name["front-proxy"]
    run("front-proxy.file-sink", [str(front), "--wasm", str(s.wasm), *descriptor,
                                  "--access-log", "file", "--access-log-path", str(s.dir / "access.jsonl"),
                                  "--sample-rate", "0.5", "--grpc-message-bytes", "0",
                                  "--counterfactual-rate", "1", "--counterfactual-max-bytes", "1000",
                                  "--service-name", "golden-envoy", "--trace-sampling", "10",
                                  "--collector", "10.0.0.1:4318", "--agent-config", str(s.dir / "ship.sh"),
                                  "--access-log-rotate-bytes", "1000000", "--access-log-max-bytes", "3000000",
                                  "--agent-port", "14135"], ".yaml")
    out["inject/front-proxy.file-sink.agent.sh"] = (s.dir / "ship.sh").read_text()
    # The OTLP access logger, behind its flag (it drops what is made while the Collector is unreachable).
    run("front-proxy.otlp-sink", [str(front), "--wasm", str(s.wasm), *descriptor, "--access-log", "otlp",
                                  "--collector", "127.0.0.1:14317"], ".yaml")
    run("otel-tracing.no-descriptors", [str(by_name["otel-tracing"]), "--wasm", str(s.wasm), *descriptor,
                                        "--no-descriptors", "--sample-rate", "0.1"], ".yaml")
    run("two-listeners.one-listener", [str(by_name["two-listeners"]), "--wasm", str(s.wasm), *descriptor,
                                       "--listener", "grpc_listener", "--package", "wirelens.v1"], ".json")
    ecds = s.dir / "ecds"
    run("front-proxy.ecds", [str(front), "--wasm", str(s.wasm), *descriptor, "--ecds-dir", str(ecds)], ".yaml")
    for path in sorted(ecds.glob("*.json")):
        out[f"inject/front-proxy.ecds.{path.name}"] = path.read_text()
    code, stdout, stderr = _inject(["--update-ecds", "--ecds-dir", str(ecds), "--wasm", str(s.wasm),
                                    "--sample-rate", "0.1", "--counterfactual-rate", "0.5"])
    out["inject/front-proxy.ecds-update.report"] = f"exit {code}\n{stdout}{stderr}"
    for path in sorted(ecds.glob("*.json")):
        out[f"inject/front-proxy.ecds-update.{path.name}"] = path.read_text()

    # The native build (--module native) into the same user configs, and through ECDS.
    native = ["--module", "native", "--native", str(s.native)]
    for case in cases:
        path = by_name[case["name"]]
        flags = [] if case["name"] == "grpc-json-transcoder" else descriptor
        run(f"{case['name']}.native", [str(path), *native, *flags, "--collector", "127.0.0.1:14317"], path.suffix)
    native_ecds = s.dir / "ecds-native"
    run("front-proxy.native-ecds", [str(front), *native, *descriptor, "--ecds-dir", str(native_ecds)], ".yaml")
    code, stdout, stderr = _inject(["--update-ecds", "--ecds-dir", str(native_ecds), *native, "--sample-rate", "0.1"])
    out["inject/front-proxy.native-ecds-update.report"] = f"exit {code}\n{stdout}{stderr}"
    for path in sorted(native_ecds.glob("*.json")):
        out[f"inject/front-proxy.native-ecds-update.{path.name}"] = path.read_text()
    return out


def envoy_gateway(s: Scratch) -> dict[str, str]:
    """deploy/envoy_gateway/manifests.py's files, standalone and for a cluster, and Envoy Gateway's own config."""
    plugin_config = json.loads(opmap_text())
    base = dict(gateway_port=21000, rest_port=21001, grpc_port=21002, collector_port=21003,
                wasm_url="http://127.0.0.1:21004/wirelens_filter.wasm", wasm_sha256="0" * 64,
                plugin_config=plugin_config, envoy_admin_port=21005, ready_port=21006)
    variants = {
        "standalone": manifests.Inputs(**base, standalone=True, envoy_certs=s.certs),
        "cluster": manifests.Inputs(**base, standalone=False, host="services.wirelens.svc"),
        "settings": manifests.Inputs(**base, standalone=False, sample_rate=0.25, counterfactual_rate=1.0,
                                     counterfactual_max_bytes=1000),
        # The native build: the EnvoyProxy registers the .so by path, the policy's dynamicModule names it.
        "native-standalone": manifests.Inputs(**base, standalone=True, envoy_certs=s.certs, module="native",
                                              native_path=str(s.native)),
        "native-cluster": manifests.Inputs(**base, standalone=False, host="services.wirelens.svc", module="native",
                                           native_path="/usr/lib/envoy/modules/libwirelens.so", sample_rate=0.25),
    }
    header = manifests.HEADER.format(version=manifests.ENVOY_GATEWAY_VERSION)
    out = {}
    for variant, inputs in variants.items():
        for name, documents in manifests.render_files(inputs).items():
            out[f"envoy-gateway/{variant}/{name}"] = header + manifests.to_yaml(documents)
    out["envoy-gateway/eg-config.yaml"] = manifests.to_yaml([manifests.eg_config(
        s.dir / "resources", s.dir / "config", s.dir / "data", s.dir / "state", s.dir / "run", 21007)])
    return out


def istio(s: Scratch) -> dict[str, str]:
    """deploy/istio/render.py's files, as shipped and with the filter's settings and a digest."""
    plugin_config = json.loads(opmap_text())
    out = {f"istio/default/{name}": text for name, text in istio_render.render_all(
        plugin_config, ISTIO_IMAGE, None, istio_render.DEFAULT_COLLECTOR).items()}
    config = istio_render.with_settings(plugin_config, 1.0, 1000)
    out.update({f"istio/settings/{name}": text for name, text in istio_render.render_all(
        config, ISTIO_IMAGE, "f" * 64, "collector.example.svc").items()})
    return out


def rendered() -> dict[str, str]:
    with tempfile.TemporaryDirectory(prefix="wirelens-goldens-") as tmp:
        s = Scratch(Path(tmp).resolve())
        out = {**local_template(s), **injected(s), **envoy_gateway(s), **istio(s)}
        return {name: s.normalize(text) for name, text in sorted(out.items())}


def golden_files() -> dict[str, str]:
    return {str(p.relative_to(GOLDENS)): p.read_text() for p in sorted(GOLDENS.rglob("*"))
            if p.is_file() and p.parent != INPUTS and p.suffix != ".md"}


def differences(now: dict[str, str], golden: dict[str, str]) -> list[str]:
    """A unified diff per file that differs, is new or is gone."""
    problems = []
    for name in sorted(set(now) | set(golden)):
        if name not in golden:
            problems.append(f"{name}: rendered, but no golden (run with --update if it is meant)")
        elif name not in now:
            problems.append(f"{name}: golden, but no longer rendered")
        elif now[name] != golden[name]:
            diff = difflib.unified_diff(golden[name].splitlines(True), now[name].splitlines(True),
                                        f"golden/{name}", f"rendered/{name}")
            problems.append("".join(_short(line) for line in diff))
    return problems


def _short(line: str, width: int = 240) -> str:
    """A diff line cut to `width` characters (plugin configurations are one long line)."""
    if len(line) <= width:
        return line
    return f"{line[:width]}... ({len(line)} characters)\n"


def update() -> list[Path]:
    now = rendered()
    for name in set(golden_files()) - set(now):
        (GOLDENS / name).unlink()
    written = []
    for name, text in now.items():
        path = GOLDENS / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--update", action="store_true", help="rewrite the goldens from the renderers")
    args = parser.parse_args(argv)
    if args.update:
        for path in update():
            print(f"wrote {path.relative_to(ROOT)}")
        return 0
    problems = differences(rendered(), golden_files())
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
