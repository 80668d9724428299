"""wirelens inject: add the wirelens filter to an Envoy config you already run.

    wirelens inject envoy.yaml > envoy-wirelens.yaml          add wirelens to every HTTP connection manager
    wirelens inject --diff envoy.yaml                         show the change instead
    wirelens inject --remove envoy-wirelens.yaml              take it out again
    wirelens inject --ecds-dir /etc/envoy/wirelens envoy.yaml serve the filter through ECDS (live updates)
    wirelens inject --update-ecds --ecds-dir DIR --sample-rate 0.1   change it live
    wirelens inject --update-ecds --ecds-dir DIR --counterfactual-rate 1   size every recorded call's payloads

In every HTTP connection manager of the bootstrap's static listeners (or
those named with --listener) it puts the wirelens wasm filter first among
the http_filters (FAIL_OPEN), appends an access log that carries the
per-call record, and either adds OpenTelemetry tracing or, where the HCM
already traces, adds wirelens' custom tags to the tracer it has. The record
goes to a Collector over OTLP/gRPC (--collector) or, with
--access-log file, into a JSON-lines file for logship. Everything else is
left as it was; YAML keeps its comments and layout. Running it twice gives
the same output, and --remove gives back the original.

The operation map comes from a descriptor set of your services
(protoc --include_imports --descriptor_set_out), built by proto/opmap.py,
or, when there is none, from the descriptor your grpc_json_transcoder uses;
with the schema of its messages ("descriptors") unless --no-descriptors.

What it recognises as its own (and --remove takes out): http filters named
`wirelens` / `wirelens_transcoded` or running the wasm root context
`wirelens`, access logs named `wirelens.access_log`,
custom tags named `wirelens.*`, tracing whose provider exports to the cluster
`wirelens_otel_collector`, and that cluster.
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import difflib
import hashlib
import io
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from proto import opmap  # one operation-map code path for ours and yours
from envoy import render  # the record's access-log attributes and span tags

HERE = Path(__file__).resolve().parent

FILTER_NAME = "wirelens"
TRANSCODED_FILTER_NAME = "wirelens_transcoded"
OUR_FILTER_NAMES = (FILTER_NAME, TRANSCODED_FILTER_NAME)
ACCESS_LOG_NAME = "wirelens.access_log"
COLLECTOR_CLUSTER = "wirelens_otel_collector"
TAG_PREFIX = "wirelens."

WASM_TYPE = "type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm"
TYPED_EXTENSION_CONFIG_TYPE = "type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig"
HCM_TYPE = "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"
HCM_FILTER_NAMES = ("envoy.filters.network.http_connection_manager", "envoy.http_connection_manager")
TRANSCODER_TYPE = "envoy.extensions.filters.http.grpc_json_transcoder.v3.GrpcJsonTranscoder"
TYPED_STRUCT_TYPES = ("udpa.type.v1.TypedStruct", "xds.type.v3.TypedStruct")
GUIDE = "envoy/INJECT.md"
# The filter's settings the options can set (numbers), as the report names them.
PLUGIN_SETTINGS = ("sample_rate", "grpc_message_max_bytes", "counterfactual_rate", "counterfactual_max_bytes")


class InjectError(Exception):
    """Input the tool cannot handle; the message says where and what to do instead."""


@dataclasses.dataclass
class Options:
    wasm: Path
    collector_host: str = "127.0.0.1"
    collector_port: int = 4317
    access_log: str = "otlp"
    access_log_path: str | None = None
    service_name: str = "wirelens-envoy"
    trace_sampling: float = 100.0
    sample_rate: float | None = None
    grpc_message_bytes: int | None = None  # the filter's grpc_message_max_bytes; None: its default (128)
    counterfactual_rate: float | None = None      # None: the filter's default (0.01)
    counterfactual_max_bytes: int | None = None   # None: the filter's default (65536)
    descriptor_set: bytes | None = None
    descriptor_source: str = ""
    descriptors: bool = True          # the map carries the messages' schema (opmap.py's "descriptors")
    packages: tuple[str, ...] | None = None
    listeners: tuple[str, ...] = ()
    ecds_dir: Path | None = None
    ecds_ads: bool = False


@dataclasses.dataclass
class Report:
    notes: list[str] = dataclasses.field(default_factory=list)
    problems: list[str] = dataclasses.field(default_factory=list)
    injected: int = 0
    tracers_added: int = 0            # HCMs that got wirelens' tracer (it exports to the Collector cluster)
    ecds_resources: dict[str, dict] = dataclasses.field(default_factory=dict)

    def note(self, text: str) -> None:
        self.notes.append(text)


# ---------------------------------------------------------------- reading and writing configs


@dataclasses.dataclass
class Document:
    """A parsed config and how to write it back the way it came."""
    data: Any
    fmt: str                          # "yaml" or "json"
    yaml: YAML | None = None
    text: str = ""                    # as the user wrote it
    indent: int = 2                   # JSON
    pristine: str = ""                # the parser's own rendering of the unchanged config

    def serialize(self) -> str:
        if self.fmt == "json":
            return json.dumps(self.data, indent=self.indent, ensure_ascii=False) + "\n"
        out = io.StringIO()
        self.yaml.dump(self.data, out)
        return out.getvalue()

    def dump(self) -> str:
        """The changed config, with every line the change did not touch exactly as the user wrote it."""
        return keep_layout(self.text, self.pristine, self.serialize())


def keep_layout(original: str, pristine: str, changed: str) -> str:
    """Apply the change between two renderings of the config to the user's own text.

    The YAML and JSON writers normalise what they do not understand as
    layout ({ a: 1 } becomes {a: 1}, a JSON object written on one line is
    spread over several). The change is computed between the writer's
    rendering of the config before and after, and applied to the original:
    every stretch of the original the change does not touch stays byte for
    byte as it was.
    """
    before = original.splitlines(keepends=True)
    pristine_lines = pristine.splitlines(keepends=True)
    changed_lines = changed.splitlines(keepends=True)
    # Stretches of the writer's rendering and the original lines they stand for.
    regions: list[list[int]] = []        # [i1, i2, j1, j2]
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(
            None, pristine_lines, before, autojunk=False).get_opcodes():
        if tag == "equal":
            regions.extend([i, i + 1, j, j + 1] for i, j in zip(range(i1, i2), range(j1, j2)))
        elif regions and i1 == i2:       # original lines with no rendered counterpart join the stretch before
            regions[-1][3] = j2
        else:
            regions.append([i1, i2, j1, j2])
    region_of = {i: region for region in regions for i in range(region[0], region[1])}
    opcodes = difflib.SequenceMatcher(None, pristine_lines, changed_lines, autojunk=False).get_opcodes()
    unchanged = {i for tag, i1, i2, _, _ in opcodes if tag == "equal" for i in range(i1, i2)}
    for tag, i1, i2, _, _ in opcodes:
        if tag == "insert" and i1 in region_of and region_of[i1][0] < i1:
            unchanged.discard(i1)     # new lines inside a stretch: it cannot stay as written
    out: list[str] = []
    for tag, i1, i2, j1, j2 in opcodes:
        if tag != "equal":
            out.extend(changed_lines[j1:j2])
            continue
        for i in range(i1, i2):
            region = region_of.get(i)
            if region and all(k in unchanged for k in range(region[0], region[1])):
                if i == region[0]:
                    out.extend(before[region[2]:region[3]])
            else:
                out.append(pristine_lines[i])
    if regions and regions[0][0] == 0 and regions[0][2] > 0:   # original lines before anything rendered
        out[:0] = before[:regions[0][2]]
    return "".join(out)


def _yaml(sequence_indent: int, offset: int) -> YAML:
    y = YAML(typ="rt")
    y.preserve_quotes = True
    y.width = 1 << 20                 # never fold a long line (plugin configs are one JSON line)
    y.indent(mapping=2, sequence=sequence_indent, offset=offset)
    return y


def parse(text: str, name: str = "<config>") -> Document:
    """JSON stays JSON; YAML keeps comments, quotes and the list indentation it was written with."""
    candidates: list[Document] = []
    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InjectError(f"{name}: not valid JSON: {exc}") from None
        candidates = [Document(json.loads(text), "json", text=text, indent=indent) for indent in (2, 4)]
    else:
        for seq, off in ((2, 0), (4, 2)):   # `- item` under its key, or indented by two
            y = _yaml(seq, off)
            try:
                data = y.load(text)
            except YAMLError as exc:
                raise InjectError(f"{name}: not valid YAML: {exc}") from None
            candidates.append(Document(data, "yaml", y, text))
    if not isinstance(data, dict):
        raise InjectError(f"{name}: expected an Envoy v3 bootstrap (a mapping), got {type(data).__name__}")
    best, best_same = candidates[0], -1
    for doc in candidates:
        doc.pristine = doc.serialize()
        same = sum(block.size for block in difflib.SequenceMatcher(
            None, text.splitlines(), doc.pristine.splitlines(), autojunk=False).get_matching_blocks())
        if same > best_same:
            best, best_same = doc, same
    return best


# ---------------------------------------------------------------- finding HTTP connection managers


@dataclasses.dataclass
class HcmSite:
    listener: str
    where: str                        # "filter chain 0" / "default filter chain"
    hcm: dict

    @property
    def label(self) -> str:
        return f'listener "{self.listener}" ({self.where})'


def _type_url(typed_config: Any) -> str:
    return str(typed_config.get("@type", "")) if isinstance(typed_config, dict) else ""


def _is_hcm_filter(network_filter: dict) -> bool:
    t = _type_url(network_filter.get("typed_config"))
    return t.endswith(HCM_TYPE) or network_filter.get("name") in HCM_FILTER_NAMES


def http_connection_managers(bootstrap: dict, only: tuple[str, ...], report: Report) -> Iterator[HcmSite]:
    """Every HCM of the static listeners; what cannot be reached goes to report.problems."""
    dynamic = bootstrap.get("dynamic_resources") or {}
    if dynamic.get("lds_config") or dynamic.get("lds_resources_locator"):
        report.problems.append(
            "listeners from LDS (dynamic_resources.lds_config): a control plane delivers their HTTP "
            "connection managers, so they are not in this file. Have the control plane put the wirelens "
            f"filter into them as an ECDS filter (config_discovery; see {GUIDE}, \"Live updates\"), "
            "or run this command on the listener file it serves.")
    listeners = (bootstrap.get("static_resources") or {}).get("listeners") or []
    seen = set()
    for index, listener in enumerate(listeners):
        name = listener.get("name") or f"#{index}"
        seen.add(name)
        if only and name not in only:
            continue
        if listener.get("api_listener"):
            report.note(f'listener "{name}": an API listener (Envoy as a client library), left alone')
            continue
        chains = [(f"filter chain {i}", chain) for i, chain in enumerate(listener.get("filter_chains") or [])]
        if listener.get("default_filter_chain"):
            chains.append(("default filter chain", listener["default_filter_chain"]))
        found = False
        for where, chain in chains:
            for network_filter in chain.get("filters") or []:
                if network_filter.get("config_discovery") and (
                        any(str(t).endswith(HCM_TYPE) for t in network_filter["config_discovery"].get("type_urls", []))
                        or network_filter.get("name") in HCM_FILTER_NAMES):
                    report.problems.append(
                        f'listener "{name}" ({where}): its HTTP connection manager comes from a discovery '
                        "service (config_discovery), not from this file. Have that service add the wirelens "
                        f"filter (ECDS; see {GUIDE}, \"Live updates\").")
                    found = True
                    continue
                if not _is_hcm_filter(network_filter):
                    continue
                found = True
                typed = network_filter.get("typed_config")
                if any(_type_url(typed).endswith(t) for t in TYPED_STRUCT_TYPES):
                    report.problems.append(
                        f'listener "{name}" ({where}): the HTTP connection manager is written as a '
                        f'{_type_url(typed).rsplit("/", 1)[-1]}; write it as a typed '
                        f"{HCM_TYPE} and run this again.")
                    continue
                if not isinstance(typed, dict) or not _type_url(typed).endswith(HCM_TYPE):
                    report.problems.append(
                        f'listener "{name}" ({where}): cannot read its HTTP connection manager '
                        f"(typed_config @type {_type_url(typed) or 'missing'}); expected {HCM_TYPE}.")
                    continue
                yield HcmSite(name, where, typed)
        if not found:
            report.note(f'listener "{name}": no HTTP connection manager (TCP or other traffic), left alone')
    for name in only:
        if name not in seen:
            report.problems.append(f'--listener {name}: no static listener has that name '
                                   f"(listeners: {', '.join(sorted(seen)) or 'none'})")


# ---------------------------------------------------------------- what wirelens adds


def _is_transcoding(hcm: dict) -> bool:
    return any(_type_url(f.get("typed_config")).endswith(TRANSCODER_TYPE) for f in hcm.get("http_filters") or [])


def transcoder_descriptor(bootstrap: dict, report: Report) -> tuple[bytes, str] | None:
    """The descriptor set a grpc_json_transcoder of this config already uses, if any."""
    for site in http_connection_managers(bootstrap, (), Report()):
        for http_filter in site.hcm.get("http_filters") or []:
            typed = http_filter.get("typed_config")
            if not _type_url(typed).endswith(TRANSCODER_TYPE):
                continue
            if typed.get("proto_descriptor"):
                path = Path(typed["proto_descriptor"])
                try:
                    return path.read_bytes(), f"{path} (the grpc_json_transcoder's proto_descriptor on {site.label})"
                except OSError as exc:
                    report.problems.append(f"{site.label}: cannot read the transcoder's proto_descriptor: {exc}")
            elif typed.get("proto_descriptor_bin"):
                return (base64.b64decode(typed["proto_descriptor_bin"]),
                        f"the grpc_json_transcoder's proto_descriptor_bin on {site.label}")
    return None


def plugin_config(options: Options, operation_map: dict, transcoded: bool) -> str:
    """The filter's configuration: operation_map ({"operations", "descriptors"?}, opmap.py's) and the options."""
    config: dict[str, Any] = {"operations": operation_map["operations"]}
    if options.sample_rate is not None:
        config["sample_rate"] = options.sample_rate
    if options.grpc_message_bytes is not None:
        config["grpc_message_max_bytes"] = options.grpc_message_bytes
    if options.counterfactual_rate is not None:
        config["counterfactual_rate"] = options.counterfactual_rate
    if options.counterfactual_max_bytes is not None:
        config["counterfactual_max_bytes"] = options.counterfactual_max_bytes
    if transcoded:
        config["rest_transcoded"] = True
    if "descriptors" in operation_map:
        config["descriptors"] = operation_map["descriptors"]
    return json.dumps(config, separators=(",", ":"))


def wasm_config(name: str, configuration: str, code_path: Path) -> dict:
    """The envoy.extensions.filters.http.wasm.v3.Wasm of the filter."""
    return {
        "@type": WASM_TYPE,
        "config": {
            "name": name,
            "root_id": "wirelens",
            "failure_policy": "FAIL_OPEN",
            "configuration": {"@type": "type.googleapis.com/google.protobuf.StringValue", "value": configuration},
            "vm_config": {
                "vm_id": "wirelens",
                "runtime": "envoy.wasm.runtime.v8",
                "code": {"local": {"filename": str(code_path)}},
            },
        },
    }


def ecds_resource_path(directory: Path, name: str) -> Path:
    return directory / f"{name}.json"


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
            "type_urls": [WASM_TYPE],
        },
    }


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
    transcoded = _is_transcoding(hcm)
    name = TRANSCODED_FILTER_NAME if transcoded else FILTER_NAME
    configuration = plugin_config(options, operation_map, transcoded)
    code = options.wasm
    if options.ecds_dir is not None:
        code = ecds_wasm_path(options.ecds_dir, options.wasm)
    typed = wasm_config(name, configuration, code)
    if options.ecds_dir is not None:
        report.ecds_resources[name] = typed
    others = [f.get("name", "?") for f in hcm["http_filters"]]
    hcm["http_filters"].insert(0, filter_entry(options, name, typed))
    lines = [f"{site.label}, stat_prefix {hcm.get('stat_prefix', '?')}:",
             f"  + http filter {name} (wasm, FAIL_OPEN) first, before {', '.join(others)}"
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
    # Sampling: unsampled calls have no record, so the log keeps only recorded calls (render.py, "Sampling").
    recorded_only = render.sampled(json.loads(configuration))
    logs.append(render.access_logger(options.access_log, options.access_log_path, COLLECTOR_CLUSTER,
                                     name=ACCESS_LOG_NAME, recorded_only=recorded_only))
    sink = (f"OTLP/gRPC to {options.collector_host}:{options.collector_port}" if options.access_log == "otlp"
            else f"JSON lines to {options.access_log_path} (ship them with logship)")
    lines.append(f"  + access log {ACCESS_LOG_NAME}: the record as {sink}"
                 + (", only calls the filter sampled" if recorded_only else "")
                 + (f"; your {kept} access log(s) kept" if kept else ""))

    tracing = hcm.get("tracing")
    bootstrap_tracer = ((bootstrap.get("tracing") or {}).get("http") or {}).get("name")
    if isinstance(tracing, dict) and (tracing.get("provider") or bootstrap_tracer):
        provider = (tracing.get("provider") or {}).get("name") or f"{bootstrap_tracer} (from the bootstrap)"
        tags = tracing.setdefault("custom_tags", [])
        tags.extend(render.span_tags())
        lines.append(f"  = tracing: kept your tracer {provider}; added custom tags "
                     f"{', '.join(t['tag'] for t in render.span_tags())}. Its spans go where it sends them: "
                     "the Collector's transform/wirelens_record expands wirelens.record when they pass "
                     "through a wirelens Collector")
    else:
        block = {
            "random_sampling": {"value": options.trace_sampling},
            "spawn_upstream_span": False,
            "provider": render.otel_tracer(COLLECTOR_CLUSTER, options.service_name),
            "custom_tags": render.span_tags(),
        }
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
    """Ours by name, or a wasm filter running the wirelens root context (added by hand)."""
    if http_filter.get("name") in OUR_FILTER_NAMES:
        return True
    typed = http_filter.get("typed_config")
    return _type_url(typed) == WASM_TYPE and ((typed.get("config") or {}).get("root_id") == "wirelens")


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


def ecds_wasm_path(directory: Path, wasm: Path) -> Path:
    """Content-addressed: a new build is a new file name, so the resource changes and Envoy reloads it."""
    digest = hashlib.sha256(wasm.read_bytes()).hexdigest()[:16]
    return directory / f"wirelens-{digest}.wasm"


# ---------------------------------------------------------------- the commands


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
    rate = config.get("counterfactual_rate", render.COUNTERFACTUAL_RATE_DEFAULT)
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
            render.otlp_cluster(COLLECTOR_CLUSTER, options.collector_host, options.collector_port))
        report.note(f"+ cluster {COLLECTOR_CLUSTER}: the Collector's OTLP/gRPC endpoint "
                    f"{options.collector_host}:{options.collector_port}")
    node = bootstrap.get("node") or {}
    if options.access_log == "file" and report.injected:
        resource = {**render.ACCESS_LOG_RESOURCE, "log_name": "wirelens",
                    "node_name": node.get("id", "<--service-node>"), "cluster_name": node.get("cluster", "<--service-cluster>")}
        report.note(f"ship the file to the Collector with logship: bin/logship -file {options.access_log_path} "
                    f"-endpoint {options.collector_host}:{options.collector_port} "
                    f"-resource {render.resource_flag(resource)}")
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


def write_atomically(path: Path, data: bytes) -> None:
    """Write then rename in the same directory: Envoy's file watch sees one complete new file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.chmod(tmp, 0o644)          # Envoy may run as another user
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_ecds(directory: Path, resources: dict[str, dict], wasm: Path | None) -> list[Path]:
    """One file per resource (ECDS takes exactly one resource per file), and the wasm it names."""
    written = []
    if wasm is not None:
        code = ecds_wasm_path(directory, wasm)
        if not code.exists():
            write_atomically(code, wasm.read_bytes())
            written.append(code)
    for name, typed in sorted(resources.items()):
        resource = {"resources": [{"@type": TYPED_EXTENSION_CONFIG_TYPE, "name": name, "typed_config": typed}]}
        path = ecds_resource_path(directory, name)
        text = json.dumps(resource, indent=2) + "\n"
        if not path.exists() or path.read_text() != text:
            write_atomically(path, text.encode())
            written.append(path)
    return written


def update_ecds(directory: Path, options: Options, new_wasm: bool) -> tuple[Report, list[Path]]:
    """Change the ECDS resources in directory live: what the options name, the rest stays."""
    report = Report()
    names = [name for name in OUR_FILTER_NAMES if ecds_resource_path(directory, name).exists()]
    if not names:
        raise InjectError(f"{directory}: no wirelens ECDS resource here (expected "
                          f"{ecds_resource_path(directory, FILTER_NAME).name}); inject with --ecds-dir first")
    operations = operation_map({}, options, report) if options.descriptor_set is not None else None
    resources = {}
    sampling_changed = False
    unused: str | None = None         # why the counterfactual rate given sizes nothing
    for name in names:
        path = ecds_resource_path(directory, name)
        try:
            (resource,) = json.loads(path.read_text())["resources"]
            wasm = resource["typed_config"]["config"]
            current = json.loads(wasm["configuration"]["value"])
            code = Path(wasm["vm_config"]["code"]["local"]["filename"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise InjectError(f"{path}: not a wirelens ECDS resource this tool wrote ({exc!r}); "
                              "inject with --ecds-dir again") from None
        changes = []
        if operations is not None:
            changes.append(f"operations {len(current.get('operations', []))} -> {len(operations['operations'])}")
            current["operations"] = operations["operations"]
            current.pop("descriptors", None)
            if "descriptors" in operations:
                current["descriptors"] = operations["descriptors"]
        elif not options.descriptors and "descriptors" in current:
            changes.append("descriptors removed")
            del current["descriptors"]
            for op in current.get("operations", []):
                op.pop("request_type", None)
                op.pop("response_type", None)
        if options.sample_rate is not None:
            changes.append(f"sample_rate {current.get('sample_rate', 1)} -> {options.sample_rate}")
            if render.sampled({"sample_rate": options.sample_rate}) != render.sampled(current):
                sampling_changed = True
            current["sample_rate"] = options.sample_rate
        if options.grpc_message_bytes is not None:
            changes.append(f"grpc_message_max_bytes {current.get('grpc_message_max_bytes', 128)} -> "
                           f"{options.grpc_message_bytes}")
            current["grpc_message_max_bytes"] = options.grpc_message_bytes
        # The counterfactual share changes what the filter computes, not which calls have a record:
        # the access log needs no change (unlike the sample rate's).
        if options.counterfactual_rate is not None:
            was = current.get("counterfactual_rate", render.COUNTERFACTUAL_RATE_DEFAULT)
            changes.append(f"counterfactual_rate {was:g} -> {options.counterfactual_rate:g}")
            current["counterfactual_rate"] = options.counterfactual_rate
        if options.counterfactual_max_bytes is not None:
            changes.append(f"counterfactual_max_bytes "
                           f"{current.get('counterfactual_max_bytes', render.COUNTERFACTUAL_MAX_BYTES_DEFAULT)} -> "
                           f"{options.counterfactual_max_bytes}")
            current["counterfactual_max_bytes"] = options.counterfactual_max_bytes
        if options.counterfactual_rate is not None:
            unused = counterfactual_note(current) or unused
        if new_wasm:
            new_code = ecds_wasm_path(directory, options.wasm)
            changes.append(f"module {code.name} -> {new_code.name}")
            code = new_code
        report.note(f"{name}: {', '.join(changes) or 'nothing to change'}")
        resources[name] = wasm_config(name, json.dumps(current, separators=(",", ":")), code)
    if unused:
        report.note(unused)
    if sampling_changed:
        # The access log lives in the bootstrap, outside ECDS: its filter for recorded calls stays as injected.
        report.note(f"the access log {ACCESS_LOG_NAME} in your bootstrap keeps its injected filter: below rate 1 it "
                    "should log only sampled calls (unsampled ones have no record; the materialized view drops their "
                    "lines, so counts stay right, but they still travel to the Collector), at 1 every call. "
                    f"To change it, inject again with --sample-rate {options.sample_rate:g}")
    return report, write_ecds(directory, resources, options.wasm if new_wasm else None)


# ---------------------------------------------------------------- command line


def _collector(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"{value!r}: expected HOST:PORT of the Collector's OTLP/gRPC receiver")
    return host.strip("[]"), int(port)


def _grpc_message_bytes(value: str) -> int:
    try:
        return render.check_grpc_message_bytes(value, "--grpc-message-bytes")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _rate(value: str) -> float:
    try:
        rate = float(value)
    except ValueError:
        rate = -1.0
    if not 0 <= rate <= 1:
        raise argparse.ArgumentTypeError(f"{value!r}: expected a number in [0, 1]")
    return rate


def build_parser() -> argparse.ArgumentParser:
    default_wasm = HERE.parent / "build" / "wirelens_filter.wasm"
    parser = argparse.ArgumentParser(
        prog="wirelens inject", description="\n\n".join(__doc__.split("\n\n")[1:3]),
        epilog=f"Guide: {GUIDE}. What was changed is reported on stderr; the config goes to stdout or -o.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config", nargs="?", help="Envoy v3 bootstrap, YAML or JSON ('-' for stdin)")
    parser.add_argument("-o", "--output", help="write the config here instead of stdout (may be the input)")
    parser.add_argument("--diff", action="store_true",
                        help="print a unified diff of the change instead of the config (also with --remove)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--remove", action="store_true", help="take wirelens out again (inverse of the injection)")
    mode.add_argument("--update-ecds", action="store_true",
                      help="rewrite the ECDS resources in --ecds-dir with these options; Envoy picks them up live")
    what = parser.add_argument_group("what the filter knows")
    what.add_argument("--descriptor-set", metavar="FILE",
                      help="your services' descriptor set (protoc --include_imports --descriptor_set_out); "
                           "default: the one your grpc_json_transcoder names, if any")
    what.add_argument("--no-descriptors", action="store_true",
                      help="leave the messages' schema out of the filter's configuration (smaller; no "
                           "counterfactual sizes)")
    scope = what.add_mutually_exclusive_group()
    scope.add_argument("--package", action="append", metavar="PKG",
                       help="only services of PKG and its sub-packages (repeatable; default: all but google.*, grpc.*)")
    scope.add_argument("--all-packages", action="store_true", help=argparse.SUPPRESS)
    what.add_argument("--sample-rate", type=_rate, metavar="R", help="share of calls recorded, 0..1 (default 1)")
    what.add_argument("--grpc-message-bytes", type=_grpc_message_bytes, metavar="N",
                      help="most bytes of a grpc-message (which can echo client input) stored, 0..1024; "
                           "0: never (default 128)")
    render.add_counterfactual_flags(what)
    what.add_argument("--wasm", metavar="FILE",
                      help=f"the filter's .wasm (default: {default_wasm}; with --update-ecds: keep the module)")
    where = parser.add_argument_group("where the record goes")
    where.add_argument("--collector", type=_collector, default=("127.0.0.1", 4317), metavar="HOST:PORT",
                       help="the OpenTelemetry Collector's OTLP/gRPC receiver (default 127.0.0.1:4317)")
    where.add_argument("--access-log", choices=render.ACCESS_LOG_SINKS, default="otlp",
                       help="otlp: Envoy's OTel access logger to the Collector (default); file: JSON lines for "
                            "logship, nothing lost while the Collector is down")
    where.add_argument("--access-log-path", metavar="FILE", help="with --access-log file: the JSON-lines file")
    where.add_argument("--service-name", default="wirelens-envoy",
                       help="service.name of the spans when wirelens adds the tracer (default %(default)s)")
    where.add_argument("--trace-sampling", type=float, default=100.0, metavar="PERCENT",
                       help="share of calls traced when wirelens adds the tracer (default 100)")
    which = parser.add_argument_group("which HTTP connection managers")
    which.add_argument("--listener", action="append", default=[], metavar="NAME",
                       help="only this listener's HCMs (repeatable; default: every static listener)")
    live = parser.add_argument_group("live updates (ECDS)")
    live.add_argument("--ecds-dir", metavar="DIR",
                      help="serve the filter through Extension Config Discovery from files in DIR "
                           "(one resource per file, written atomically, and a content-addressed copy of the .wasm)")
    live.add_argument("--ecds-ads", action="store_true",
                      help="with --ecds-dir: the HCMs ask your control plane (ADS) instead; DIR gets the "
                           "resources it must serve")
    return parser


def options_from(args: argparse.Namespace) -> Options:
    wasm = Path(args.wasm or HERE.parent / "build" / "wirelens_filter.wasm").resolve()
    if not wasm.is_file():
        raise InjectError(f"--wasm {wasm}: no such file (build it with `make filter`)")
    if args.access_log == "file" and not args.access_log_path:
        raise InjectError("--access-log file needs --access-log-path FILE (the JSON-lines file logship ships)")
    options = Options(
        wasm=wasm, collector_host=args.collector[0], collector_port=args.collector[1],
        access_log=args.access_log,
        access_log_path=str(Path(args.access_log_path).resolve()) if args.access_log_path else None,
        service_name=args.service_name, trace_sampling=args.trace_sampling, sample_rate=args.sample_rate,
        grpc_message_bytes=args.grpc_message_bytes, counterfactual_rate=args.counterfactual_rate,
        counterfactual_max_bytes=args.counterfactual_max_bytes,
        packages=None if not args.package else tuple(args.package), listeners=tuple(args.listener),
        ecds_dir=Path(args.ecds_dir).resolve() if args.ecds_dir else None, ecds_ads=args.ecds_ads,
        descriptors=not args.no_descriptors)
    if args.descriptor_set:
        try:
            options.descriptor_set = Path(args.descriptor_set).read_bytes()
        except OSError as exc:
            raise InjectError(f"--descriptor-set: {exc}") from None
        options.descriptor_source = args.descriptor_set
    return options


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    say = lambda text: print(text, file=sys.stderr)  # noqa: E731
    try:
        if args.ecds_ads and not args.ecds_dir:
            parser.error("--ecds-ads needs --ecds-dir (where the resources to serve are written)")
        if args.update_ecds:
            if not args.ecds_dir or args.diff or args.config:
                parser.error("--update-ecds takes --ecds-dir and the settings to change, no config or --diff")
            report, written = update_ecds(Path(args.ecds_dir).resolve(), options_from(args), bool(args.wasm))
            for note in report.notes:
                say(note)
            say("\n".join(f"wrote {p}" for p in written) or "unchanged: the resources already say this")
            return 0
        if not args.config:
            parser.error("the Envoy config to change is missing")
        text = sys.stdin.read() if args.config == "-" else _read(args.config)
        doc = parse(text, args.config)
        if args.remove:
            report = remove(doc)
            if not report.injected:
                say("no wirelens found in this config: nothing removed")
        else:
            options = options_from(args)
            report = inject(doc, options)
        out = doc.dump()
        for note in report.notes:
            say(note)
        for problem in report.problems:
            say(f"cannot inject: {problem}")
        if not args.remove and not report.injected:
            say("error: no HTTP connection manager was changed")
            return 1
        if not args.remove and options.ecds_dir is not None and not args.diff:
            for path in write_ecds(options.ecds_dir, report.ecds_resources, options.wasm):
                say(f"wrote {path}")
        if args.diff:
            sys.stdout.writelines(difflib.unified_diff(
                text.splitlines(keepends=True), out.splitlines(keepends=True),
                fromfile=args.config, tofile=f"{args.config} ({'without' if args.remove else 'with'} wirelens)"))
        elif args.output:
            write_atomically(Path(args.output), out.encode())
        else:
            sys.stdout.write(out)
        return 0
    except InjectError as exc:
        say(f"error: {exc}")
        return 1


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError as exc:
        raise InjectError(f"{path}: {exc.strerror}") from None


if __name__ == "__main__":
    sys.exit(main())
