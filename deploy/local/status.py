"""`stack status`: each component's pid, port and health, and what was dropped past the caps."""

from __future__ import annotations

import urllib.error
from pathlib import Path
from typing import Callable

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from deploy.local import clickhouse_users
from deploy.local.components import COMPONENTS, _file_sink, logship_progress
from deploy.local.settings import log_path, read_pid, state_dir
from envoy import wiring
from wirelens_helpers.supervise import http_get


def status(settings: dict[str, str], log: Callable[[str], None] = print) -> bool:
    healthy, foreign = True, False
    log(f"  {'component':<13} {'pid':<8} {'port':<6} {'health':<8} log")
    for component in COMPONENTS:
        pid = read_pid(settings, component.name)
        if not component.enabled(settings) and not pid:
            continue
        answers = component.ready(settings)()
        health = ("up" if answers else "DOWN") if pid else ("foreign" if answers else "stopped")
        healthy &= bool(pid) and answers
        foreign |= answers and not pid
        log(f"  {component.name:<13} {str(pid or '-'):<8} {component.port(settings):<6} {health:<8} "
            f"{log_path(settings, component.name)}")
    if foreign:
        log("  (foreign: something not started by this stack answers on the port)")
    module = running_filter(settings)
    if module is not None:
        log(f"  envoy runs the wirelens filter's {module[0]} build: {module[1]}"
            + ("" if module[0] == settings.get("WIRELENS_FILTER_MODULE", module[0]) else
               f" (WIRELENS_FILTER_MODULE={settings['WIRELENS_FILTER_MODULE']} takes effect at the next `make up`)"))
    credentials = clickhouse_users.credentials_path(state_dir(settings))
    if credentials.exists():
        log(f"  ClickHouse users {clickhouse_users.WRITER} (the Collector) and {clickhouse_users.READER} "
            f"(read-only: report, saved queries, /play); passwords in {credentials}")
    for line in backpressure_lines(settings):
        log(line)
    return healthy


# The Collector's own counters (its Prometheus endpoint) of data it refused
# (receiver: the client keeps it; logship retries) or dropped (exporter: the
# sending queue was full).
COLLECTOR_DROP_COUNTERS = (
    ("otelcol_receiver_refused_log_records", "log-record refusals (logship keeps and resends them)"),
    ("otelcol_receiver_refused_spans", "spans refused"),
    ("otelcol_exporter_enqueue_failed_spans", "spans dropped (queue full)"),
    ("otelcol_receiver_refused_metric_points", "metric points refused"),
    ("otelcol_exporter_enqueue_failed_metric_points", "metric points dropped (queue full)"),
)


def collector_counters(settings: dict[str, str]) -> dict[str, float] | None:
    """The Collector's /metrics summed per metric name (over labels); None if it does not answer."""
    try:
        code, body = http_get(f"http://127.0.0.1:{settings['WIRELENS_COLLECTOR_METRICS_PORT']}/metrics")
    except (OSError, urllib.error.URLError):
        return None
    if code != 200:
        return None
    totals: dict[str, float] = {}
    for line in body.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name, _, value = line.rpartition(" ")
        name = name.split("{", 1)[0]
        try:
            totals[name] = totals.get(name, 0.0) + float(value)
        except ValueError:
            continue
    return totals


def running_filter(settings: dict[str, str]) -> tuple[str, Path] | None:
    """(module, file) of the wirelens filter in the Envoy config the stack rendered, None without one."""
    path = state_dir(settings) / "envoy.yaml"
    if not read_pid(settings, "envoy") or not path.exists():
        return None
    try:
        config = YAML(typ="safe").load(path.read_text())
        hcm = config["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
        (entry,) = [f for f in hcm["http_filters"] if f.get("name") == wiring.FILTER_NAME]
        module, _, code = wiring.filter_parts(entry["typed_config"])
    except (OSError, YAMLError, KeyError, IndexError, TypeError, ValueError):
        return None
    return module, code


def backpressure_lines(settings: dict[str, str]) -> list[str]:
    """What was dropped past the caps: logship's count (since its checkpoint began) and the Collector's."""
    lines = []
    progress = logship_progress(settings) if _file_sink(settings) else None
    if progress is not None:
        cap = progress.get("max_disk_bytes", 0)
        lines.append(f"  logship: dropped {progress.get('records_dropped', 0)} access-log records past the "
                     f"{_mib(cap) + ' cap' if cap else 'cap (none set)'} since {progress.get('dropped_since', '?')}; "
                     f"disk {_mib(progress.get('disk_bytes', 0))}, {progress.get('pending_bytes', 0)} bytes pending")
    counters = collector_counters(settings)
    if counters is not None:
        lines.append("  collector: " + ", ".join(f"{int(counters.get(name, 0))} {what}"
                                                 for name, what in COLLECTOR_DROP_COUNTERS))
    return lines


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB"
