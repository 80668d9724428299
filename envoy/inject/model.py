"""The injector's vocabulary: the names it gives what it adds (and recognises as its own),
where ECDS files of those go, its options, its report and its error.
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

from envoy import plugin_settings, wiring

FILTER_NAME = wiring.FILTER_NAME


TRANSCODED_FILTER_NAME = "wirelens_transcoded"


OUR_FILTER_NAMES = (FILTER_NAME, TRANSCODED_FILTER_NAME)


ACCESS_LOG_NAME = "wirelens.access_log"


COLLECTOR_CLUSTER = "wirelens_otel_collector"


TAG_PREFIX = "wirelens."


WASM_TYPE = wiring.WASM_TYPE


DYNAMIC_MODULE_TYPE = wiring.DYNAMIC_MODULE_TYPE


TYPED_EXTENSION_CONFIG_TYPE = "type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig"


HCM_TYPE = "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"


HCM_FILTER_NAMES = ("envoy.filters.network.http_connection_manager", "envoy.http_connection_manager")


TRANSCODER_TYPE = "envoy.extensions.filters.http.grpc_json_transcoder.v3.GrpcJsonTranscoder"


TYPED_STRUCT_TYPES = ("udpa.type.v1.TypedStruct", "xds.type.v3.TypedStruct")


GUIDE = "envoy/INJECT.md"


# The filter's settings the options can set (numbers), as the report names them.
PLUGIN_SETTINGS = tuple(plugin_settings.CHECKS)


class InjectError(Exception):
    """Input the tool cannot handle; the message says where and what to do instead."""


@dataclasses.dataclass
class Options:
    wasm: Path | None                 # the Wasm build (module wasm)
    collector_host: str = "127.0.0.1"
    collector_port: int = 4317
    access_log: str = "file"          # wiring.ACCESS_LOG_SINKS: file (+ an agent beside Envoy) or otlp
    access_log_path: str | None = None
    agent: str = "logship"            # what ships the file (agent.AGENTS)
    agent_port: int = 13135           # the agent's /healthz (logship: and /progress) on 127.0.0.1
    agent_metrics_port: int | None = None  # filelog: the agent Collector's own metrics (None: agent_port + 1)
    rotate_bytes: int = 64 << 20      # the agent rotates the file at this size (0: never)
    max_bytes: int = 1 << 30          # the agent's cap on the file and its unshipped rotations (0: none)
    service_name: str = "wirelens-envoy"
    trace_sampling: float = 100.0
    sample_rate: float | None = None
    grpc_message_bytes: int | None = None  # the filter's grpc_message_max_bytes; None: its default (plugin_settings)
    counterfactual_rate: float | None = None      # None: the filter's default (0.01)
    counterfactual_max_bytes: int | None = None   # None: the filter's default (65536)
    descriptor_set: bytes | None = None
    descriptor_source: str = ""
    descriptors: bool = True          # the map carries the messages' schema (opmap.py's "descriptors")
    packages: tuple[str, ...] | None = None
    listeners: tuple[str, ...] = ()
    ecds_dir: Path | None = None
    ecds_ads: bool = False
    module: str = "wasm"              # which build of the filter (wiring.MODULES)
    native: Path | None = None        # the native build, the dynamic module's .so (module native)

    @property
    def code(self) -> Path:
        """The chosen build's file: the .wasm or the .so."""
        return self.native if self.module == "native" else self.wasm


@dataclasses.dataclass
class Report:
    notes: list[str] = dataclasses.field(default_factory=list)
    problems: list[str] = dataclasses.field(default_factory=list)
    injected: int = 0
    tracers_added: int = 0            # HCMs that got wirelens' tracer (it exports to the Collector cluster)
    ecds_resources: dict[str, dict] = dataclasses.field(default_factory=dict)
    plugin_configurations: list[str] = dataclasses.field(default_factory=list)  # injected, one per HCM (JSON)
    agent: object | None = None       # agent.Agent: what ships the access-log file (--access-log file)

    def note(self, text: str) -> None:
        self.notes.append(text)


def ecds_resource_path(directory: Path, name: str) -> Path:
    return directory / f"{name}.json"


def ecds_module_path(directory: Path, module: Path) -> Path:
    """Content-addressed: a new build is a new file name, so the resource changes and Envoy reloads it
    (for a .so also a new path to dlopen: the same path would give back the library already loaded)."""
    digest = hashlib.sha256(module.read_bytes()).hexdigest()[:16]
    suffix = ".so" if module.suffix == ".so" else ".wasm"
    return directory / f"wirelens-{digest}{suffix}"


ecds_wasm_path = ecds_module_path

