"""What wirelens adds to an HTTP connection manager and takes out again: the filter (first,
FAIL_OPEN, or an ECDS reference to it), the access log, the tracer or its custom tags,
the Collector cluster; and the operation map the filter is given.
"""

from __future__ import annotations

import json
from typing import Any

from envoy import plugin_settings, wiring
from proto import opmap

from .connection_managers import (
    HcmSite,
    http_connection_managers,
    is_transcoding,
    transcoder_descriptor,
    type_url,
)
from .agent import render_agent
from .layout import Document
from .model import (
    ACCESS_LOG_NAME,
    COLLECTOR_CLUSTER,
    DYNAMIC_MODULE_TYPE,
    FILTER_NAME,
    OUR_FILTER_NAMES,
    PLUGIN_SETTINGS,
    TAG_PREFIX,
    TRANSCODED_FILTER_NAME,
    WASM_TYPE,
    InjectError,
    Options,
    Report,
    ecds_module_path,
    ecds_resource_path,
)

def plugin_config(options: Options, operation_map: dict, transcoded: bool) -> str:
    """The filter's configuration: operation_map ({"operations", "descriptors"?}, opmap.py's) and the options."""
    config: dict[str, Any] = plugin_settings.with_settings(
        {"operations": operation_map["operations"]}, sample_rate=options.sample_rate,
        grpc_message_max_bytes=options.grpc_message_bytes, counterfactual_rate=options.counterfactual_rate,
        counterfactual_max_bytes=options.counterfactual_max_bytes)
    if transcoded:
        config["rest_transcoded"] = True
    if "descriptors" in operation_map:
        config["descriptors"] = operation_map["descriptors"]
    return wiring.plugin_configuration(config)


def filter_entry(options: Options, name: str, typed: dict) -> dict:
    """The http_filters entry: the filter itself, or a config_discovery reference to it (ECDS)."""
    if options.ecds_dir is None:
        return {"name": name, "typed_config": typed}
    source: dict[str, Any] = {"ads": {}} if options.ecds_ads else {
        "path_config_source": {"path": str(ecds_resource_path(options.ecds_dir, name))}}
    return {
        "name": name,
        "config_discovery": {
            "config_source": {"resource_api_version": "V3", **source},
            # Traffic never waits for the discovery source: until it answers, the
            # filter runs with the configuration it had when it was injected.
            "default_config": typed,
            "apply_default_config_without_warming": True,
            "type_urls": [wiring.FILTER_TYPES[options.module]],
        },
    }


# How the report names each build of the filter.
BUILD_NOTES = {"wasm": "wasm, FAIL_OPEN", "native": "native: Envoy dynamic module, fails open"}


def _our_cluster(provider: Any) -> bool:
    typed = (provider or {}).get("typed_config") or {}
    return ((typed.get("grpc_service") or {}).get("envoy_grpc") or {}).get("cluster_name") == COLLECTOR_CLUSTER


def inject_hcm(site: HcmSite, bootstrap: dict, options: Options, operation_map: dict,
               report: Report) -> None:
    hcm = site.hcm
    if not isinstance(hcm.get("http_filters"), list) or not hcm["http_filters"]:
        report.problems.append(f"{site.label}: no http_filters list; add the router filter first.")
        return
    remove_hcm(hcm)
    transcoded = is_transcoding(hcm)
    name = TRANSCODED_FILTER_NAME if transcoded else FILTER_NAME
    configuration = plugin_config(options, operation_map, transcoded)
    report.plugin_configurations.append(configuration)
    code = options.code
    if options.ecds_dir is not None:
        code = ecds_module_path(options.ecds_dir, options.code)
    typed = wiring.filter_config(options.module, name, configuration, code)
    if options.ecds_dir is not None:
        report.ecds_resources[name] = typed
    others = [f.get("name", "?") for f in hcm["http_filters"]]
    hcm["http_filters"].insert(0, filter_entry(options, name, typed))
    lines = [f"{site.label}, stat_prefix {hcm.get('stat_prefix', '?')}:",
             f"  + http filter {name} ({BUILD_NOTES[options.module]}) first, before {', '.join(others)}"
             + (" via ECDS" if options.ecds_dir is not None else "")]
    settings = {key: value for key, value in json.loads(configuration).items() if key in PLUGIN_SETTINGS}
    if settings:
        lines.append(f"    settings: {', '.join(f'{key} {value:g}' for key, value in settings.items())}")
    if transcoded:
        lines.append("    this HCM transcodes REST to gRPC: its REST calls are recorded as rest-transcoded")
    if "rds" in hcm or "scoped_routes" in hcm:
        lines.append("    routes come from RDS: the filter applies to every route it serves")

    if "access_log" not in hcm:
        _put_before(hcm, "access_log", [], "http_filters")
    logs = hcm["access_log"]
    kept = len(logs)
    # Sampling: unsampled calls have no record, so the log keeps only recorded calls (wiring.py, "Sampling").
    recorded_only = wiring.sampled(json.loads(configuration))
    logs.append(wiring.access_logger(options.access_log, options.access_log_path, COLLECTOR_CLUSTER,
                                     name=ACCESS_LOG_NAME, recorded_only=recorded_only))
    sink = (f"OTLP/gRPC to {options.collector_host}:{options.collector_port}" if options.access_log == "otlp"
            else f"JSON lines to {options.access_log_path} (the agent beside Envoy ships them)")
    lines.append(f"  + access log {ACCESS_LOG_NAME}: the record as {sink}"
                 + (", only calls the filter sampled" if recorded_only else "")
                 + (f"; your {kept} access log(s) kept" if kept else ""))

    tracing = hcm.get("tracing")
    bootstrap_tracer = ((bootstrap.get("tracing") or {}).get("http") or {}).get("name")
    if isinstance(tracing, dict) and (tracing.get("provider") or bootstrap_tracer):
        provider = (tracing.get("provider") or {}).get("name") or f"{bootstrap_tracer} (from the bootstrap)"
        tags = tracing.setdefault("custom_tags", [])
        tags.extend(wiring.span_tags())
        lines.append(f"  = tracing: kept your tracer {provider}; added custom tags "
                     f"{', '.join(t['tag'] for t in wiring.span_tags())}. Its spans go where it sends them: "
                     "the Collector's transform/wirelens_record expands wirelens.record when they pass "
                     "through a wirelens Collector")
    else:
        block = wiring.tracing(COLLECTOR_CLUSTER, options.service_name, options.trace_sampling)
        if isinstance(tracing, dict):           # tracing settings without a tracer: ours joins them
            for key, value in block.items():
                tracing.setdefault(key, value) if key != "custom_tags" else \
                    tracing.setdefault("custom_tags", []).extend(value)
        else:
            _put_before(hcm, "tracing", block, "http_filters")
        report.tracers_added += 1
        lines.append(f"  + tracing: OpenTelemetry, service {options.service_name}, "
                     f"{options.trace_sampling:g} % of calls, to {options.collector_host}:{options.collector_port}")
    if hcm.get("generate_request_id") is False:
        lines.append("  ! generate_request_id is false: calls without an x-request-id have no request id, "
                     "and ClickHouse cannot tell a re-sent record from a new call")
    report.note("\n".join(lines))
    report.injected += 1


def is_wirelens_filter(http_filter: dict) -> bool:
    """Ours by name, or a wasm filter running the wirelens root context, or a dynamic module's
    wirelens filter (added by hand)."""
    if http_filter.get("name") in OUR_FILTER_NAMES:
        return True
    typed = http_filter.get("typed_config")
    if type_url(typed) == DYNAMIC_MODULE_TYPE:
        return typed.get("filter_name") == FILTER_NAME
    return type_url(typed) == WASM_TYPE and ((typed.get("config") or {}).get("root_id") == "wirelens")


def _put_before(mapping: dict, key: str, value: Any, anchor: str) -> None:
    """A new key goes above `anchor` in YAML (ruamel's maps keep order and can insert), else at the end."""
    if anchor in mapping and hasattr(mapping, "insert"):
        mapping.insert(list(mapping).index(anchor), key, value)
    else:
        mapping[key] = value


def remove_hcm(hcm: dict) -> None:
    filters = hcm.get("http_filters")
    if isinstance(filters, list):
        filters[:] = [f for f in filters if not is_wirelens_filter(f)]
    logs = hcm.get("access_log")
    if isinstance(logs, list):
        logs[:] = [entry for entry in logs if entry.get("name") != ACCESS_LOG_NAME]
        if not logs:
            del hcm["access_log"]
    tracing = hcm.get("tracing")
    if isinstance(tracing, dict):
        if _our_cluster(tracing.get("provider")):
            del tracing["provider"]
            for key in ("random_sampling", "spawn_upstream_span"):
                tracing.pop(key, None)
        tags = tracing.get("custom_tags")
        if isinstance(tags, list):
            tags[:] = [t for t in tags if not str(t.get("tag", "")).startswith(TAG_PREFIX)]
            if not tags:
                del tracing["custom_tags"]
        if not tracing:
            del hcm["tracing"]


def _clusters(bootstrap: dict, create: bool) -> list | None:
    static = bootstrap.get("static_resources")
    if static is None:
        if not create:
            return None
        static = bootstrap["static_resources"] = {}
    if static.get("clusters") is None:
        if not create:
            return None
        static["clusters"] = []
    return static["clusters"]


def remove_cluster(bootstrap: dict) -> None:
    clusters = _clusters(bootstrap, create=False)
    if clusters is None:
        return
    clusters[:] = [c for c in clusters if c.get("name") != COLLECTOR_CLUSTER]
    static = bootstrap["static_resources"]
    if not clusters:
        del static["clusters"]
    if not static:
        del bootstrap["static_resources"]


def operation_map(bootstrap: dict, options: Options, report: Report) -> dict:
    """opmap.py's map of the descriptor set the options name, else of the
    transcoder's: {"operations": [...], "descriptors": "..."} (no descriptors
    with --no-descriptors, or when no operation's messages are in the set)."""
    descriptor, source = options.descriptor_set, options.descriptor_source
    if descriptor is None:
        found = transcoder_descriptor(bootstrap, report)
        if found:
            descriptor, source = found
    if descriptor is None:
        report.note("operation map: empty (no --descriptor-set, no grpc_json_transcoder descriptor): every "
                    "call is the operation 'unknown', its path kept in url_path")
        return {"operations": []}
    try:
        doc = opmap.opmap(descriptor, options.packages, with_descriptors=options.descriptors)
    except Exception as exc:  # protobuf's DecodeError and friends
        raise InjectError(f"descriptor set {source}: not a FileDescriptorSet ({exc}); make it with "
                          "protoc --include_imports --descriptor_set_out=FILE your.proto") from None
    operations = doc["operations"]
    services = sorted({op["rpc_service"] for op in operations})
    report.note(f"operation map: {len(operations)} operations of {len(services)} services from {source}"
                + (f" ({', '.join(services)})" if services else
                   "; no service in scope: pass --package or --all-packages"))
    if "descriptors" in doc:
        typed = sum(1 for op in operations if "request_type" in op)
        report.note(f"  with the schema of {typed} operations' messages ({len(doc['descriptors'])} bytes of "
                    "base64; --no-descriptors leaves it out)")
    return doc


def counterfactual_note(config: dict) -> str | None:
    """Why a counterfactual rate above 0 sizes nothing in this plugin configuration, or None."""
    rate = config.get("counterfactual_rate", plugin_settings.COUNTERFACTUAL_RATE_DEFAULT)
    if rate > 0 and "descriptors" not in config:
        return (f"counterfactual_rate {rate:g} sizes nothing yet: the filter's configuration carries no message "
                "schema (descriptors; --descriptor-set, or a grpc_json_transcoder's descriptor, brings it, "
                "unless --no-descriptors)")
    return None


def inject(doc: Document, options: Options) -> Report:
    report = Report()
    bootstrap = doc.data
    operations = operation_map(bootstrap, options, report)
    for site in list(http_connection_managers(bootstrap, options.listeners, report)):
        inject_hcm(site, bootstrap, options, operations, report)
    if options.counterfactual_rate is not None and report.injected:
        note = counterfactual_note({"counterfactual_rate": options.counterfactual_rate, **operations})
        if note:
            report.note(note)
    remove_cluster(bootstrap)
    if report.injected and (options.access_log == "otlp" or report.tracers_added):
        _clusters(bootstrap, create=True).append(
            wiring.otlp_cluster(COLLECTOR_CLUSTER, options.collector_host, options.collector_port))
        report.note(f"+ cluster {COLLECTOR_CLUSTER}: the Collector's OTLP/gRPC endpoint "
                    f"{options.collector_host}:{options.collector_port}")
    node = bootstrap.get("node") or {}
    if options.access_log == "file" and report.injected:
        shipper = render_agent(bootstrap, options)
        report.agent = shipper
        report.note(f"ship the file with the agent beside Envoy ({shipper.name}; --agent-config FILE writes it as a "
                    f"script):\n  {shipper.command_line()}" + "".join(f"\n  ! {note}" for note in shipper.notes))
    elif options.access_log == "otlp" and report.injected:
        report.note("! --access-log otlp: Envoy's OTel access logger drops every record made while the Collector is "
                    "unreachable (a restart, a crash, a full queue), with no retry and nothing on disk: "
                    "--access-log file (the default) with an agent beside Envoy does not (envoy/INJECT.md, "
                    "\"The durable path\")")
    if options.ecds_dir is not None and report.injected:
        if not (node.get("id") and node.get("cluster")):
            report.note("! ECDS needs a node id and cluster: this bootstrap has none, so start Envoy with "
                        "--service-node and --service-cluster")
    return report


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def remove(doc: Document) -> Report:
    report = Report()
    for site in list(http_connection_managers(doc.data, (), Report())):
        before = json.dumps(_plain(site.hcm))
        remove_hcm(site.hcm)
        if json.dumps(_plain(site.hcm)) != before:
            report.injected += 1
            report.note(f"{site.label}: wirelens removed")
    remove_cluster(doc.data)
    return report

