"""Render envoy/envoy.yaml.tmpl into the local stack's Envoy config.

The template lays out the two listeners, the routes and the clusters of the
local stack; what wirelens adds to them (the access log, the span tags, the
filter's plugin configuration) comes from envoy/wiring.py, the one library of
Envoy fragments (its docstring: the record, the sinks, sampling), and the
filter's settings are checked by envoy/plugin_settings.py.
"""

from __future__ import annotations

import argparse
import json
import os
import string
import sys
from pathlib import Path

from envoy import plugin_settings, wiring

HERE = Path(__file__).resolve().parent
WEB_DIR = HERE.parent / "build" / "web"  # the browser page: services/web, `make web`

PORT_VARIABLES = (
    "WIRELENS_ENVOY_PORT",
    "WIRELENS_ENVOY_TRANSCODE_PORT",
    "WIRELENS_ENVOY_ADMIN_PORT",
    "WIRELENS_REST_PORT",
    "WIRELENS_GRPC_PORT",
    "WIRELENS_PYTHON_REST_PORT",
    "WIRELENS_PYTHON_GRPC_PORT",
    "WIRELENS_JVM_REST_PORT",
    "WIRELENS_JVM_MVC_REST_PORT",
    "WIRELENS_JVM_GRPC_PORT",
    "WIRELENS_COLLECTOR_OTLP_PORT",
)


def _yaml_string(value: str) -> str:
    # A JSON string literal is a valid YAML double-quoted scalar.
    return json.dumps(value)


def _flow(value) -> str:
    # JSON is valid YAML flow style: the template takes the builders' data as is.
    return json.dumps(value)


def web_response(path: Path) -> str:
    """The direct_response of one file of the browser page: the built file, or a 503 saying how to build it."""
    if path.is_file():
        return f"{{ status: 200, body: {{ filename: {_yaml_string(str(path.resolve()))} }} }}"
    note = f"{path.name} of the wirelens browser page is not built: run `make web`, then restart the stack\n"
    return f"{{ status: 503, body: {{ inline_string: {_yaml_string(note)} }} }}"


MODULE_MARK = "#@"  # a template line starting with it is a directive (or a note), never output


def select_module(template: str, module: str) -> str:
    """The template with only the chosen module's blocks: `#@ module NAME` opens a block, `#@ end` closes it;
    every `#@` line is dropped, so the output of one module is as if the other's block were never there."""
    wiring.check_module(module)
    out, current = [], None
    for line in template.splitlines(keepends=True):
        stripped = line.strip()
        if stripped.startswith(MODULE_MARK):
            words = stripped[len(MODULE_MARK):].split()
            if len(words) == 2 and words[0] == "module":
                current = wiring.check_module(words[1], "template block module")
            elif words == ["end"]:
                current = None
            continue
        if current is None or current == module:
            out.append(line)
    if current is not None:
        raise ValueError(f"envoy.yaml.tmpl: the block of module {current} has no `{MODULE_MARK} end`")
    return "".join(out)


def render(ports: dict[str, str], filter_wasm: Path, plugin_config: str, descriptor_set: Path,
           access_log: str = "otlp", access_log_path: str | Path | None = None,
           web_dir: Path = WEB_DIR, sample_rate: float | None = None,
           grpc_message_max_bytes: int | None = None,
           counterfactual_rate: float | None = None, counterfactual_max_bytes: int | None = None,
           module: str = "wasm") -> str:
    """The Envoy config; plugin_config is the filter's JSON (build/opmap.json).

    module picks the filter's build (wiring.MODULES): `wasm` (filter_wasm is the
    .wasm) or `native` (filter_wasm is the dynamic module's .so, build/native/libwirelens.so).
    access_log picks the access-log sink (wiring.ACCESS_LOG_SINKS); `file` needs
    access_log_path, the JSON-lines file logship tails. sample_rate, if
    given, replaces the plugin configuration's; below 1 the access log keeps
    only recorded calls (envoy/wiring.py, "Sampling"). grpc_message_max_bytes,
    if given, is how much of a grpc-message the filter publishes (0: none).
    counterfactual_rate, if given, replaces the plugin configuration's
    (docs/what-if.md), as does counterfactual_max_bytes.
    """
    missing = [name for name in PORT_VARIABLES if not ports.get(name)]
    if missing:
        raise ValueError(f"missing port settings: {', '.join(missing)}")
    for name in PORT_VARIABLES:
        if not str(ports[name]).isdigit():
            raise ValueError(f"{name}={ports[name]!r} is not a port number")
    config = plugin_settings.with_settings(
        json.loads(plugin_config), sample_rate=sample_rate, grpc_message_max_bytes=grpc_message_max_bytes,
        counterfactual_rate=counterfactual_rate, counterfactual_max_bytes=counterfactual_max_bytes)
    plugin_config = wiring.plugin_configuration(config)
    services = sorted({op["rpc_service"] for op in config.get("operations", []) if op.get("rpc_service")})
    transcoded_config = wiring.plugin_configuration({**config, "rest_transcoded": True})
    template = string.Template(select_module((HERE / "envoy.yaml.tmpl").read_text(), module))
    return template.substitute(
        {name: ports[name] for name in PORT_VARIABLES},
        WIRELENS_FILTER_WASM=str(filter_wasm),
        WIRELENS_FILTER_NATIVE=str(filter_wasm),
        WIRELENS_DESCRIPTOR_SET=str(descriptor_set),
        WIRELENS_GRPC_SERVICES=json.dumps(services),
        WIRELENS_PLUGIN_CONFIG=_yaml_string(plugin_config),
        WIRELENS_TRANSCODED_PLUGIN_CONFIG=_yaml_string(transcoded_config),
        ACCESS_LOGGERS=_flow([wiring.access_logger(access_log,
                                                   None if access_log_path is None else str(access_log_path),
                                                   recorded_only=wiring.sampled(config))]),
        SPAN_TAGS=_flow(wiring.span_tags()),
        WIRELENS_WEB_INDEX=web_response(web_dir / "index.html"),
        WIRELENS_WEB_APP=web_response(web_dir / "app.js"),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Render the wirelens Envoy config. Ports come from the environment "
                    "(see deploy/local/ports.env for the names).")
    parser.add_argument("--module", choices=wiring.MODULES, default="wasm",
                        help="the filter's build: wasm (proxy-wasm, the default) or native (the Envoy dynamic module)")
    parser.add_argument("--wasm", help="path of wirelens_filter.wasm (with --module wasm)")
    parser.add_argument("--native", help="path of the dynamic module, libwirelens.so (with --module native)")
    parser.add_argument("--plugin-config", required=True,
                        help="JSON file with the filter's plugin configuration (build/opmap.json)")
    parser.add_argument("--descriptor-set", required=True,
                        help="protobuf descriptor set of the services, for grpc_json_transcoder (build/proto/wirelens.pb)")
    parser.add_argument("--access-log", choices=wiring.ACCESS_LOG_SINKS, default="otlp",
                        help="access-log sink: otlp (Envoy's OTel access logger, straight to the Collector; "
                             "records are dropped while it is unreachable) or file (JSON lines for logship: "
                             "nothing lost across Collector outages)")
    parser.add_argument("--access-log-path", help="with --access-log file: the JSON-lines file")
    defaults = "the plugin configuration's, else the filter's"
    plugin_settings.add_sample_rate_flag(parser, defaults)
    plugin_settings.add_grpc_message_bytes_flag(parser, defaults)
    plugin_settings.add_counterfactual_flags(parser, defaults)
    parser.add_argument("-o", "--output", help="write here instead of stdout")
    args = parser.parse_args(argv)
    code = args.native if args.module == "native" else args.wasm
    if not code or (args.wasm if args.module == "native" else args.native):
        parser.error(f"--module {args.module} takes --{args.module} FILE (and not the other build's)")
    plugin_config = Path(args.plugin_config).read_text()
    json.loads(plugin_config)  # fail here, with the file name, rather than inside Envoy
    rendered = render(dict(os.environ), Path(code).resolve(), plugin_config,
                      Path(args.descriptor_set).resolve(), access_log=args.access_log,
                      access_log_path=args.access_log_path and Path(args.access_log_path).resolve(),
                      sample_rate=args.sample_rate, grpc_message_max_bytes=args.grpc_message_bytes,
                      counterfactual_rate=args.counterfactual_rate,
                      counterfactual_max_bytes=args.counterfactual_max_bytes, module=args.module)
    if args.output:
        Path(args.output).write_text(rendered)
    else:
        sys.stdout.write(rendered)
    return 0


if __name__ == "__main__":
    sys.exit(main())
