"""The Envoy config fragments wirelens adds to a proxy: one library for every place that writes them.

The local template (envoy/render.py), `wirelens inject` (envoy/inject/), the
Envoy Gateway and Istio renderers (deploy/envoy_gateway/manifests.py,
deploy/istio/render.py) and every benchmark (bench/harness.py) take the
filter, the access log, the tracer and the Collector cluster from here.
A new kind of filter is one new fragment function beside wasm_filter().

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

import json
from pathlib import Path


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
    # The same split in microseconds (issue 34): the call at Envoy, first byte received from the client to
    # last byte sent to it, and the upstream exchange, first byte sent upstream to last byte received
    # from it (the service, its framework and the loopback wire). x-envoy-upstream-service-time counts
    # whole milliseconds, which read 0 for most calls. "-" (NULL) when no upstream served the call.
    ("envoy.duration_us", "%COMMON_DURATION(DS_RX_BEG:DS_TX_END:us)%", False),
    ("envoy.upstream_duration_us", "%COMMON_DURATION(US_TX_BEG:US_RX_END:us)%", False),
    # Whether Envoy sent the call's span (issue 34): the traceparent its router injected upstream, whose
    # flags are the tracer's final decision (01: sampled, the span goes to the Collector; 00: the
    # client's traceparent said not sampled, or random_sampling left the call out). %TRACE_ID% cannot
    # tell: Envoy 1.40 prints the trace id for sampled-out calls too. The view keeps the flag only
    # (wirelens.requests.span_sampled).
    ("envoy.traceparent", "%REQ(TRACEPARENT)%", False),
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
SERVICE_NAME = "wirelens-envoy"
ACCESS_LOG_RESOURCE = {"service.name": SERVICE_NAME}
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


def logship_argv(binary: str, access_log: str, checkpoint: str, endpoint: str, resource: str, listen: str,
                 rotate_bytes: int | str = 0, max_disk_bytes: int | str = 0, reopen_url: str | None = None) -> list[str]:
    """logship's command line, for the local stack and for `wirelens inject`'s agent. Rotation and the disk cap
    need Envoy's admin (POST /reopen_logs): without reopen_url, neither."""
    argv = [binary, "-file", access_log, "-checkpoint", checkpoint, "-endpoint", endpoint, "-resource", resource,
            "-listen", listen]
    if reopen_url:
        argv += ["-rotate-bytes", str(rotate_bytes), "-max-disk-bytes", str(max_disk_bytes), "-reopen-url", reopen_url]
    return argv


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


def otel_tracer(cluster: str = OTEL_COLLECTOR_CLUSTER, service_name: str = SERVICE_NAME) -> dict:
    """The HCM tracing provider: Envoy's OpenTelemetry tracer, OTLP/gRPC to the Collector."""
    return {
        "name": "envoy.tracers.opentelemetry",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.config.trace.v3.OpenTelemetryConfig",
            "service_name": service_name,
            "grpc_service": {"envoy_grpc": {"cluster_name": cluster}, "timeout": "2s"},
        },
    }


def tracing(cluster: str = OTEL_COLLECTOR_CLUSTER, service_name: str = SERVICE_NAME,
            sampling: float = 100) -> dict:
    """An HCM's `tracing`: every call (sampling %) traced by otel_tracer(), the record's span tags on it."""
    return {
        "random_sampling": {"value": sampling},
        "spawn_upstream_span": False,
        "provider": otel_tracer(cluster, service_name),
        "custom_tags": span_tags(),
    }


def http2_upstream() -> dict:
    """A cluster's typed_extension_protocol_options: HTTP/2 to the upstream (gRPC, OTLP/gRPC)."""
    return {
        "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
            "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
            "explicit_http_config": {"http2_protocol_options": {}},
        },
    }


def otlp_cluster(name: str, host: str, port: int) -> dict:
    """A cluster for the Collector's OTLP/gRPC port (HTTP/2; DNS names resolved by Envoy)."""
    is_ip = all(part.isdigit() for part in host.split(".")) or ":" in host
    return {
        "name": name,
        "type": "STATIC" if is_ip else "STRICT_DNS",
        "connect_timeout": "1s",
        "typed_extension_protocol_options": http2_upstream(),
        "load_assignment": {
            "cluster_name": name,
            "endpoints": [{"lb_endpoints": [
                {"endpoint": {"address": {"socket_address": {"address": host, "port_value": port}}}}]}],
        },
    }


# ---------------------------------------------------------------- the filter

FILTER_NAME = "wirelens"              # the http_filters entry, the wasm root context, the native filter_name
WASM_TYPE = "type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm"
DYNAMIC_MODULE_TYPE = "type.googleapis.com/envoy.extensions.filters.http.dynamic_modules.v3.DynamicModuleFilter"
STRING_VALUE_TYPE = "type.googleapis.com/google.protobuf.StringValue"

# The two builds of the one filter core (filters/): `wasm`, the proxy-wasm module
# (V8, sandboxed, any proxy-wasm host: Istio too), and `native`, the Envoy dynamic
# module (filters/native: a shared library behind Envoy's C ABI, cheaper, for plain
# Envoy 1.40 and Envoy Gateway). Both record the same call the same way and publish
# it as the same filter state (wasm.wirelens.record), so only the http_filters entry
# differs: the access log, the tracer and everything downstream are the same.
MODULES = ("wasm", "native")
FILTER_TYPES = {"wasm": WASM_TYPE, "native": DYNAMIC_MODULE_TYPE}
_BUILD = Path(__file__).resolve().parents[1] / "build"
MODULE_FILES = {"wasm": _BUILD / "wirelens_filter.wasm", "native": _BUILD / "native" / "libwirelens.so"}
MODULE_BUILDS = {"wasm": "make filter", "native": "make native"}   # what makes MODULE_FILES[module]


def check_module(module: str, setting: str = "module") -> str:
    """The module's name if it is one of MODULES, else ValueError naming the setting."""
    if module not in MODULES:
        raise ValueError(f"{setting}={module!r}: expected one of {', '.join(MODULES)}")
    return module


def plugin_configuration(config: dict) -> str:
    """The filter's plugin configuration as Envoy passes it to the filter: compact JSON."""
    return json.dumps(config, separators=(",", ":"))


def wasm_config(name: str, configuration: str, code_path: Path | str) -> dict:
    """The envoy.extensions.filters.http.wasm.v3.Wasm of the filter: fails open, module from a local file."""
    return {
        "@type": WASM_TYPE,
        "config": {
            "name": name,
            "root_id": FILTER_NAME,
            "failure_policy": "FAIL_OPEN",
            "configuration": {"@type": "type.googleapis.com/google.protobuf.StringValue", "value": configuration},
            "vm_config": {
                "vm_id": FILTER_NAME,
                "runtime": "envoy.wasm.runtime.v8",
                "code": {"local": {"filename": str(code_path)}},
            },
        },
    }


def wasm_filter(configuration: str, code_path: Path | str, name: str = FILTER_NAME,
                config_name: str | None = None) -> dict:
    """The http_filters entry of the wasm filter (config_name: the Wasm config's name, default `name`)."""
    return {"name": name, "typed_config": wasm_config(config_name or name, configuration, code_path)}


def native_config(configuration: str, module_path: Path | str) -> dict:
    """The DynamicModuleFilter of the native filter: the shared library by absolute path, the same configuration text.

    Envoy 1.40 loads `module.local.filename` itself (no ENVOY_DYNAMIC_MODULES_SEARCH_PATH),
    as Envoy Gateway's rendering of a Local dynamic module does. A dynamic module has no
    failure policy of its own: the module fails open itself (filters/native).
    """
    return {
        "@type": DYNAMIC_MODULE_TYPE,
        "dynamic_module_config": {"name": FILTER_NAME, "module": {"local": {"filename": str(module_path)}}},
        "filter_name": FILTER_NAME,
        "filter_config": {"@type": STRING_VALUE_TYPE, "value": configuration},
    }


def native_filter(configuration: str, module_path: Path | str, name: str = FILTER_NAME) -> dict:
    """The http_filters entry of the native filter (the dynamic module)."""
    return {"name": name, "typed_config": native_config(configuration, module_path)}


def filter_config(module: str, name: str, configuration: str, code_path: Path | str) -> dict:
    """The filter's typed_config for either build (MODULES); name is the Wasm config's name (unused by native)."""
    if check_module(module) == "native":
        return native_config(configuration, code_path)
    return wasm_config(name, configuration, code_path)


def http_filter(module: str, configuration: str, code_path: Path | str, name: str = FILTER_NAME,
                config_name: str | None = None) -> dict:
    """The http_filters entry of the filter, either build."""
    return {"name": name, "typed_config": filter_config(module, config_name or name, configuration, code_path)}


def filter_module(typed_config: dict) -> str | None:
    """Which build a filter's typed_config runs (MODULES), None if it is neither."""
    found = [module for module, type_url in FILTER_TYPES.items() if (typed_config or {}).get("@type") == type_url]
    return found[0] if found else None


def filter_parts(typed_config: dict) -> tuple[str, str, Path]:
    """(module, plugin configuration text, code path) of a typed_config filter_config() made; KeyError/TypeError if not."""
    module = filter_module(typed_config)
    if module == "wasm":
        config = typed_config["config"]
        return module, config["configuration"]["value"], Path(config["vm_config"]["code"]["local"]["filename"])
    if module == "native":
        return (module, typed_config["filter_config"]["value"],
                Path(typed_config["dynamic_module_config"]["module"]["local"]["filename"]))
    raise KeyError(f"@type {typed_config.get('@type')!r}")
