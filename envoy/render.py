"""Render envoy/envoy.yaml.tmpl into a runnable Envoy config.

The record the wirelens filter publishes (filter state `wasm.wirelens.*`) is
exported twice by Envoy: as attributes of one access-log record per call, and
as tags of the call's span. Both lists come from RECORD_FIELDS below, so the
two can never drift apart.

Where the access-log record goes (ACCESS_LOG_SINKS):
  file  one JSON line per call appended to a local file, which `logship`
        (collector/cmd/logship) tails and ships to the Collector, keeping a
        checkpoint it advances only once the Collector has accepted a batch.
        Nothing is lost while the Collector is down or restarting: the file is
        the buffer. The local stack uses this sink.
  otlp  Envoy's OpenTelemetry access logger, straight to the Collector over
        gRPC. Simpler (no shipper), but Envoy drops the records of every call
        made while the Collector is unreachable (stat
        access_logs.open_telemetry_access_log.logs_dropped).

Sampling: with the filter's sample_rate below 1 the access logger gets a CEL
filter (RECORDED_CALL) that logs only the calls carrying the record. An
unsampled call publishes nothing, and its line would travel the whole
pipeline (file, logship, Collector, otel.otel_logs) only for the
materialized view to drop it: at 0.1, nine lines in ten. At 1 there is no
filter and every call Envoy serves is logged, also one that never reached the
filter (a request the connection manager refused, the filter failed open).
"""

from __future__ import annotations

import argparse
import json
import os
import string
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
WEB_DIR = HERE.parent / "build" / "web"  # the browser page: services/web, `make web`


def _filter_state(key: str) -> str:
    return f"%FILTER_STATE(wasm.wirelens.{key}:PLAIN)%"


# (attribute name, Envoy format string, also a span tag?)
# The filter's own fields travel packed in wirelens.record (one JSON object,
# one set_property per call); the Collector
# expands it into attributes and span tags (collector/config.yaml,
# transform/wirelens_record). Names follow OpenTelemetry semantic
# conventions where one exists, wirelens.* otherwise.
RECORD_FIELDS: list[tuple[str, str, bool]] = [
    ("wirelens.record", _filter_state("record"), True),
    # What Envoy itself knows about the call.
    ("wirelens.run_id", "%REQ(X-WIRELENS-RUN)%", True),
    # The stack that served the call (go, python): its upstream cluster's metadata.
    ("wirelens.stack", "%CLUSTER_METADATA(wirelens:stack)%", True),
    ("wirelens.request_id", "%REQ(X-REQUEST-ID)%", False),
    ("http.request.method", "%REQ(:METHOD)%", False),
    ("http.response.status_code", "%RESPONSE_CODE%", False),
    ("network.protocol.version", "%PROTOCOL%", False),
    ("envoy.duration_ms", "%DURATION%", False),
    ("envoy.bytes_received", "%BYTES_RECEIVED%", False),
    ("envoy.bytes_sent", "%BYTES_SENT%", False),
    ("envoy.upstream_service_time_ms", "%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)%", False),
    ("envoy.response_flags", "%RESPONSE_FLAGS%", False),
    # The gRPC status Envoy read from the trailers (or a trailers-only
    # response): the record leaves it out when the filter only sized them.
    ("envoy.grpc_status", "%GRPC_STATUS(NUMBER)%", False),
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


def record_short_names() -> dict[str, str]:
    """Attribute name -> the short name the filter publishes it under in wirelens.record, in record order.

    From the record's one definition, filters/record.yaml (filters/recordgen.py,
    which generates the filter's names.rs and the Collector's expansion from
    it); for fixtures that play the filter's part (bench/ingest.py, tests) and
    the Collector config check.
    """
    from filters import recordgen  # noqa: PLC0415  (imported on use: the record's generator reads YAML)

    return recordgen.short_names()


ACCESS_LOG_SINKS = ("otlp", "file")

# The resource of every access-log record. The OTel access logger adds
# log_name, node_name, cluster_name (the node below) to what it is given;
# for the `file` sink logship adds all of them (its -resource flag, see
# resource_flag()), so the records are the same either way.
ACCESS_LOG_RESOURCE = {"service.name": "wirelens-envoy"}
FILE_SINK_RESOURCE = {**ACCESS_LOG_RESOURCE, "log_name": "wirelens", "node_name": "wirelens-local",
                      "cluster_name": "wirelens"}
# No path: its query string and its segments (/v1/people/{email}) can carry
# user data, and wirelens stores no header value or body byte (README,
# "Guarantees"); the call's operation comes from the filter's record.
ACCESS_LOG_BODY = "%REQ(:METHOD)% %PROTOCOL% %RESPONSE_CODE%"

# True for a call whose record the filter published. CEL sees filter state as
# a map from name to the object's serialized bytes; the filter's set_property
# of `wirelens.record` becomes the object `wasm.wirelens.record`.
RECORDED_CALL = "'wasm.wirelens.record' in filter_state"
CEL_FILTER = "envoy.access_loggers.extension_filters.cel"

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


OTEL_COLLECTOR_CLUSTER = "otel_collector"


def access_log_line_format() -> dict:
    """The JSON object Envoy's file access logger writes per call (one line each).

    logship turns each line into one OTLP log record: `time` (the request's
    start, epoch seconds with nanoseconds, as the OTel access logger stamps
    it), `trace_id`/`span_id` (the call's span), `body`, and `attributes`,
    carrying exactly the attributes of the OTel access logger's record.
    """
    return {
        "time": "%START_TIME(%s.%9f)%",
        "trace_id": "%TRACE_ID%",
        "span_id": "%SPAN_ID%",
        "body": ACCESS_LOG_BODY,
        "attributes": access_log_attributes(),
    }


def access_log_attributes() -> dict[str, str]:
    """Every access-log attribute of the record: name -> Envoy format string (RECORD_FIELDS)."""
    return {name: fmt for name, fmt, _ in RECORD_FIELDS}


def span_tag_formats() -> dict[str, str]:
    """The span tags of the record as name -> Envoy format string (Envoy Gateway's `tracing.tags`)."""
    return {name: fmt for name, fmt, is_tag in RECORD_FIELDS if is_tag}


def resource_flag(resource: dict[str, str] | None = None) -> str:
    """The access-log resource as logship's -resource value (k=v,k=v)."""
    return ",".join(f"{k}={v}" for k, v in (resource or FILE_SINK_RESOURCE).items())


def recorded_calls_filter() -> dict:
    """The access_log `filter` that passes only calls carrying the record (Envoy's CEL extension filter)."""
    return {"extension_filter": {
        "name": CEL_FILTER,
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.access_loggers.filters.cel.v3.ExpressionFilter",
            "expression": RECORDED_CALL,
        },
    }}


def sampled(plugin_config: dict) -> bool:
    """Whether a filter configuration records fewer than all calls (a sample_rate below 1)."""
    rate = plugin_config.get("sample_rate")
    return isinstance(rate, (int, float)) and not isinstance(rate, bool) and rate < 1


def access_logger(sink: str, path: str | None = None, cluster: str = OTEL_COLLECTOR_CLUSTER,
                  name: str | None = None, resource: dict[str, str] | None = None,
                  recorded_only: bool = False) -> dict:
    """One HCM access_log entry that carries the record: `file` (JSON lines for logship) or `otlp`.

    recorded_only adds recorded_calls_filter(): for a filter that samples
    (sample_rate < 1), whose unsampled calls have no record to log.
    """
    entry = _access_logger(sink, path, cluster, name, resource)
    if recorded_only:
        entry["filter"] = recorded_calls_filter()
    return entry


def _access_logger(sink: str, path: str | None, cluster: str, name: str | None,
                   resource: dict[str, str] | None) -> dict:
    if sink == "file":
        if not path:
            raise ValueError("the file access-log sink needs a path")
        return {
            "name": name or "envoy.access_loggers.file",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog",
                "path": path,
                "log_format": {"json_format": access_log_line_format()},
            },
        }
    if sink == "otlp":
        return {
            "name": name or "envoy.access_loggers.open_telemetry",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.access_loggers.open_telemetry.v3."
                         "OpenTelemetryAccessLogConfig",
                "log_name": "wirelens",
                "grpc_service": {"envoy_grpc": {"cluster_name": cluster}, "timeout": "2s"},
                "buffer_flush_interval": "0.2s",
                "resource_attributes": {"values": [
                    {"key": k, "value": {"string_value": v}}
                    for k, v in (resource or ACCESS_LOG_RESOURCE).items()]},
                "body": {"string_value": ACCESS_LOG_BODY},
                "attributes": {"values": [
                    {"key": key, "value": {"string_value": fmt}} for key, fmt in access_log_attributes().items()]},
            },
        }
    raise ValueError(f"access-log sink {sink!r}: expected one of {', '.join(ACCESS_LOG_SINKS)}")


def span_tags() -> list[dict]:
    """The tracer's custom_tags that put the record on the call's span."""
    return [{"tag": name, "value": fmt} for name, fmt in span_tag_formats().items()]


def otel_tracer(cluster: str = OTEL_COLLECTOR_CLUSTER, service_name: str = "wirelens-envoy") -> dict:
    """The HCM tracing provider: Envoy's OpenTelemetry tracer, OTLP/gRPC to the Collector."""
    return {
        "name": "envoy.tracers.opentelemetry",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.config.trace.v3.OpenTelemetryConfig",
            "service_name": service_name,
            "grpc_service": {"envoy_grpc": {"cluster_name": cluster}, "timeout": "2s"},
        },
    }


def otlp_cluster(name: str, host: str, port: int) -> dict:
    """A cluster for the Collector's OTLP/gRPC port (HTTP/2; DNS names resolved by Envoy)."""
    is_ip = all(part.isdigit() for part in host.split(".")) or ":" in host
    return {
        "name": name,
        "type": "STATIC" if is_ip else "STRICT_DNS",
        "connect_timeout": "1s",
        "typed_extension_protocol_options": {
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                "explicit_http_config": {"http2_protocol_options": {}},
            },
        },
        "load_assignment": {
            "cluster_name": name,
            "endpoints": [{"lb_endpoints": [
                {"endpoint": {"address": {"socket_address": {"address": host, "port_value": port}}}}]}],
        },
    }


def web_response(path: Path) -> str:
    """The direct_response of one file of the browser page: the built file, or a 503 saying how to build it."""
    if path.is_file():
        return f"{{ status: 200, body: {{ filename: {_yaml_string(str(path.resolve()))} }} }}"
    note = f"{path.name} of the wirelens browser page is not built: run `make web`, then restart the stack\n"
    return f"{{ status: 503, body: {{ inline_string: {_yaml_string(note)} }} }}"


def check_sample_rate(value: str | float, name: str = "sample rate",
                      meaning: str = "the share of calls recorded") -> float:
    """A sample rate in [0, 1], or ValueError naming where it came from."""
    try:
        rate = float(value)
    except (TypeError, ValueError):
        rate = float("nan")
    if not 0 <= rate <= 1:  # also NaN
        raise ValueError(f"{name}={value!r}: expected a number in [0, 1] ({meaning})")
    return rate


COUNTERFACTUAL_MEANING = "the share of recorded calls whose payloads are sized in the other protocol's encoding"


def check_counterfactual_rate(value: str | float, name: str = "counterfactual rate") -> float:
    """The filter's counterfactual_rate in [0, 1], or ValueError naming where it came from."""
    return check_sample_rate(value, name, COUNTERFACTUAL_MEANING)


# The filter's defaults (filters/core/src/counterfactual: DEFAULT_RATE, DEFAULT_MAX_BYTES)
# and the largest counterfactual_max_bytes its configuration takes (a u32).
COUNTERFACTUAL_RATE_DEFAULT = 0.01
COUNTERFACTUAL_MAX_BYTES_DEFAULT = 64 * 1024
COUNTERFACTUAL_MAX_BYTES_MAX = 2**32 - 1


def check_counterfactual_max_bytes(value: str | int, name: str = "counterfactual max bytes") -> int:
    """The filter's counterfactual_max_bytes, or ValueError naming where it came from."""
    text = str(value).strip()
    if not (text.isascii() and text.isdigit()) or int(text) > COUNTERFACTUAL_MAX_BYTES_MAX:
        raise ValueError(f"{name}={value!r}: expected a whole number of bytes in [0, {COUNTERFACTUAL_MAX_BYTES_MAX}] "
                         "(the most body bytes, or bytes of one streamed message, read for one counterfactual "
                         "estimate; larger ones get the reason too_large)")
    return int(text)


def argument_type(check, flag: str):
    """An argparse type from one of the checks above: a bad value is a usage error naming the flag."""
    def convert(value: str):
        try:
            return check(value, flag)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return convert


def add_counterfactual_flags(parser, defaults: str = "the filter's") -> None:
    """--counterfactual-rate and --counterfactual-max-bytes, checked (every renderer and inject take them).

    defaults says where an absent flag's value comes from, e.g. "the plugin configuration's, else the filter's".
    """
    parser.add_argument("--counterfactual-rate", metavar="R",
                        type=argument_type(check_counterfactual_rate, "--counterfactual-rate"),
                        help="the filter's counterfactual_rate: share of recorded calls whose payloads are sized in "
                             f"the other protocol's encoding, 0..1 (default: {defaults} "
                             f"{COUNTERFACTUAL_RATE_DEFAULT:g}; needs the messages' schema; docs/what-if.md)")
    parser.add_argument("--counterfactual-max-bytes", metavar="N",
                        type=argument_type(check_counterfactual_max_bytes, "--counterfactual-max-bytes"),
                        help="the filter's counterfactual_max_bytes: most bytes of a body (of one message, on "
                             f"streams) read for one estimate; larger ones get the reason too_large (default: "
                             f"{defaults} {COUNTERFACTUAL_MAX_BYTES_DEFAULT})")


# The most of a grpc-message the filter keeps (its grpc_message_max_bytes: 0..1024).
GRPC_MESSAGE_BYTES_MAX = 1024


def check_grpc_message_bytes(value: str | int, name: str = "grpc-message bytes") -> int:
    """The filter's grpc_message_max_bytes (0 = never publish), or ValueError naming where it came from."""
    text = str(value).strip()
    if not text.isdigit() or int(text) > GRPC_MESSAGE_BYTES_MAX:
        raise ValueError(f"{name}={value!r}: expected a whole number of bytes in [0, {GRPC_MESSAGE_BYTES_MAX}] "
                         "(0: the grpc-message is never stored)")
    return int(text)


def render(ports: dict[str, str], filter_wasm: Path, plugin_config: str, descriptor_set: Path,
           access_log: str = "otlp", access_log_path: str | Path | None = None,
           web_dir: Path = WEB_DIR, sample_rate: float | None = None,
           grpc_message_max_bytes: int | None = None,
           counterfactual_rate: float | None = None, counterfactual_max_bytes: int | None = None) -> str:
    """The Envoy config; plugin_config is the filter's JSON (build/opmap.json).

    access_log picks the access-log sink (ACCESS_LOG_SINKS); `file` needs
    access_log_path, the JSON-lines file logship tails. sample_rate, if
    given, replaces the plugin configuration's; below 1 the access log keeps
    only recorded calls (module docstring, "Sampling"). grpc_message_max_bytes,
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
    config = json.loads(plugin_config)
    if sample_rate is not None:
        config["sample_rate"] = check_sample_rate(sample_rate)
    if grpc_message_max_bytes is not None:
        config["grpc_message_max_bytes"] = check_grpc_message_bytes(grpc_message_max_bytes)
    if counterfactual_rate is not None:
        config["counterfactual_rate"] = check_counterfactual_rate(counterfactual_rate)
    if counterfactual_max_bytes is not None:
        config["counterfactual_max_bytes"] = check_counterfactual_max_bytes(counterfactual_max_bytes)
    plugin_config = json.dumps(config, separators=(",", ":"))
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
        ACCESS_LOGGERS=_flow([access_logger(access_log, None if access_log_path is None else str(access_log_path),
                                            recorded_only=sampled(config))]),
        SPAN_TAGS=_flow(span_tags()),
        WIRELENS_WEB_INDEX=web_response(web_dir / "index.html"),
        WIRELENS_WEB_APP=web_response(web_dir / "app.js"),
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
    parser.add_argument("--access-log", choices=ACCESS_LOG_SINKS, default="otlp",
                        help="access-log sink: otlp (Envoy's OTel access logger, straight to the Collector; "
                             "records are dropped while it is unreachable) or file (JSON lines for logship: "
                             "nothing lost across Collector outages)")
    parser.add_argument("--access-log-path", help="with --access-log file: the JSON-lines file")
    parser.add_argument("--sample-rate", metavar="R",
                        help="share of calls the filter records, 0..1 (default: the plugin configuration's, else 1); "
                             "below 1 the access log keeps only recorded calls")
    parser.add_argument("--grpc-message-bytes", metavar="N",
                        help="most bytes of a grpc-message the filter stores, 0..1024; 0: never "
                             "(default: the plugin configuration's, else 128)")
    add_counterfactual_flags(parser, "the plugin configuration's, else the filter's")
    parser.add_argument("-o", "--output", help="write here instead of stdout")
    args = parser.parse_args(argv)
    plugin_config = Path(args.plugin_config).read_text()
    json.loads(plugin_config)  # fail here, with the file name, rather than inside Envoy
    try:
        sample_rate = None if args.sample_rate is None else check_sample_rate(args.sample_rate, "--sample-rate")
        grpc_message_bytes = None if args.grpc_message_bytes is None else \
            check_grpc_message_bytes(args.grpc_message_bytes, "--grpc-message-bytes")
    except ValueError as exc:
        parser.error(str(exc))
    rendered = render(dict(os.environ), Path(args.wasm).resolve(), plugin_config,
                      Path(args.descriptor_set).resolve(), access_log=args.access_log,
                      access_log_path=args.access_log_path and Path(args.access_log_path).resolve(),
                      sample_rate=sample_rate, grpc_message_max_bytes=grpc_message_bytes,
                      counterfactual_rate=args.counterfactual_rate,
                      counterfactual_max_bytes=args.counterfactual_max_bytes)
    if args.output:
        Path(args.output).write_text(rendered)
    else:
        sys.stdout.write(rendered)
    return 0


if __name__ == "__main__":
    sys.exit(main())
