#!/usr/bin/env python3
"""Render envoy/envoy.yaml.tmpl into a runnable Envoy config.

The record the wirelens filter publishes (filter state `wasm.wirelens.*`) is
exported twice by Envoy: as attributes of one OpenTelemetry access-log record
per call, and as tags of the call's span. Both lists come from RECORD_FIELDS
below, so the two can never drift apart.
"""

from __future__ import annotations

import argparse
import json
import os
import string
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _filter_state(key: str) -> str:
    return f"%FILTER_STATE(wasm.wirelens.{key}:PLAIN)%"


# (attribute name, Envoy format string, also a span tag?)
# The filter's own fields travel packed in wirelens.record (one JSON object:
# one host call per call instead of one per field); the Collector expands it
# into attributes (collector/config.yaml, transform/wirelens_record). Protocol
# and operation are also published alone so spans carry them even where no
# Collector expands the record. Names follow OpenTelemetry semantic
# conventions where one exists, wirelens.* otherwise.
RECORD_FIELDS: list[tuple[str, str, bool]] = [
    ("wirelens.record", _filter_state("record"), True),
    ("wirelens.protocol", _filter_state("protocol"), True),
    ("wirelens.operation", _filter_state("operation"), True),
    # What Envoy itself knows about the call.
    ("wirelens.run_id", "%REQ(X-WIRELENS-RUN)%", True),
    ("wirelens.request_id", "%REQ(X-REQUEST-ID)%", False),
    ("http.request.method", "%REQ(:METHOD)%", False),
    ("http.response.status_code", "%RESPONSE_CODE%", False),
    ("network.protocol.version", "%PROTOCOL%", False),
    ("envoy.duration_ms", "%DURATION%", False),
    ("envoy.bytes_received", "%BYTES_RECEIVED%", False),
    ("envoy.bytes_sent", "%BYTES_SENT%", False),
    ("envoy.upstream_service_time_ms", "%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)%", False),
    ("envoy.response_flags", "%RESPONSE_FLAGS%", False),
    ("envoy.upstream_host", "%UPSTREAM_HOST%", False),
    ("envoy.upstream_protocol", "%UPSTREAM_PROTOCOL%", False),
    ("envoy.request_duration_ms", "%REQUEST_DURATION%", False),
    ("envoy.response_duration_ms", "%RESPONSE_DURATION%", False),
    ("envoy.response_tx_duration_ms", "%RESPONSE_TX_DURATION%", False),
    # Header bytes as Envoy's codec counts them: for HTTP/2 on the wire these
    # are HPACK-compressed; REQUEST_HEADERS_BYTES is the uncompressed size.
    ("envoy.request_headers_bytes", "%REQUEST_HEADERS_BYTES%", False),
    ("envoy.response_headers_bytes", "%RESPONSE_HEADERS_BYTES%", False),
    ("envoy.downstream_header_bytes_received", "%DOWNSTREAM_HEADER_BYTES_RECEIVED%", False),
    ("envoy.downstream_header_bytes_sent", "%DOWNSTREAM_HEADER_BYTES_SENT%", False),
    ("envoy.downstream_wire_bytes_received", "%DOWNSTREAM_WIRE_BYTES_RECEIVED%", False),
    ("envoy.downstream_wire_bytes_sent", "%DOWNSTREAM_WIRE_BYTES_SENT%", False),
    # The downstream connection, so a connection's requests can be ordered
    # (header compression over a connection's life).
    ("envoy.connection_id", "%CONNECTION_ID%", False),
]

PORT_VARIABLES = (
    "WIRELENS_ENVOY_PORT",
    "WIRELENS_ENVOY_TRANSCODE_PORT",
    "WIRELENS_ENVOY_ADMIN_PORT",
    "WIRELENS_REST_PORT",
    "WIRELENS_GRPC_PORT",
    "WIRELENS_COLLECTOR_OTLP_PORT",
)


def _yaml_string(value: str) -> str:
    # A JSON string literal is a valid YAML double-quoted scalar.
    return json.dumps(value)


def log_attributes_yaml(indent: int = 26) -> str:
    pad = " " * indent
    lines = []
    for name, fmt, _ in RECORD_FIELDS:
        lines.append(f"{pad}- key: {name}")
        lines.append(f"{pad}  value: {{ string_value: {_yaml_string(fmt)} }}")
    return "\n".join(lines)


def span_tags_yaml(indent: int = 20) -> str:
    pad = " " * indent
    lines = []
    for name, fmt, is_tag in RECORD_FIELDS:
        if is_tag:
            lines.append(f"{pad}- tag: {name}")
            lines.append(f"{pad}  value: {_yaml_string(fmt)}")
    return "\n".join(lines)


def render(ports: dict[str, str], filter_wasm: Path, plugin_config: str, descriptor_set: Path) -> str:
    """The Envoy config; plugin_config is the filter's JSON (build/opmap.json)."""
    missing = [name for name in PORT_VARIABLES if not ports.get(name)]
    if missing:
        raise ValueError(f"missing port settings: {', '.join(missing)}")
    for name in PORT_VARIABLES:
        if not str(ports[name]).isdigit():
            raise ValueError(f"{name}={ports[name]!r} is not a port number")
    config = json.loads(plugin_config)
    services = sorted({op["rpc_service"] for op in config.get("operations", []) if op.get("rpc_service")})
    transcoded_config = json.dumps({**config, "rest_transcoded": True}, separators=(",", ":"))
    template = string.Template((HERE / "envoy.yaml.tmpl").read_text())
    return template.substitute(
        {name: ports[name] for name in PORT_VARIABLES},
        WIRELENS_FILTER_WASM=str(filter_wasm),
        WIRELENS_DESCRIPTOR_SET=str(descriptor_set),
        WIRELENS_GRPC_SERVICES=json.dumps(services),
        WIRELENS_PLUGIN_CONFIG=_yaml_string(plugin_config),
        WIRELENS_TRANSCODED_PLUGIN_CONFIG=_yaml_string(transcoded_config),
        LOG_ATTRIBUTES=log_attributes_yaml(),
        SPAN_TAGS=span_tags_yaml(),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Render the wirelens Envoy config. Ports come from the environment "
                    "(see deploy/local/ports.env for the names).")
    parser.add_argument("--wasm", required=True, help="path of wirelens_filter.wasm")
    parser.add_argument("--plugin-config", required=True,
                        help="JSON file with the filter's plugin configuration (build/opmap.json)")
    parser.add_argument("--descriptor-set", required=True,
                        help="protobuf descriptor set of the services, for grpc_json_transcoder (build/proto/wirelens.pb)")
    parser.add_argument("-o", "--output", help="write here instead of stdout")
    args = parser.parse_args(argv)
    plugin_config = Path(args.plugin_config).read_text()
    json.loads(plugin_config)  # fail here, with the file name, rather than inside Envoy
    rendered = render(dict(os.environ), Path(args.wasm).resolve(), plugin_config,
                      Path(args.descriptor_set).resolve())
    if args.output:
        Path(args.output).write_text(rendered)
    else:
        sys.stdout.write(rendered)
    return 0


if __name__ == "__main__":
    sys.exit(main())
