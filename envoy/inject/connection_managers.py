"""Finding the HTTP connection managers of a bootstrap's static listeners (and saying
why the ones it cannot reach are out of reach), and the descriptor set a
grpc_json_transcoder among them already uses.
"""

from __future__ import annotations

import base64
import dataclasses
from pathlib import Path
from typing import Any, Iterator

from .model import GUIDE, HCM_FILTER_NAMES, HCM_TYPE, TRANSCODER_TYPE, TYPED_STRUCT_TYPES, Report

@dataclasses.dataclass
class HcmSite:
    listener: str
    where: str                        # "filter chain 0" / "default filter chain"
    hcm: dict

    @property
    def label(self) -> str:
        return f'listener "{self.listener}" ({self.where})'


def type_url(typed_config: Any) -> str:
    return str(typed_config.get("@type", "")) if isinstance(typed_config, dict) else ""


def _is_hcm_filter(network_filter: dict) -> bool:
    t = type_url(network_filter.get("typed_config"))
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
                if any(type_url(typed).endswith(t) for t in TYPED_STRUCT_TYPES):
                    report.problems.append(
                        f'listener "{name}" ({where}): the HTTP connection manager is written as a '
                        f'{type_url(typed).rsplit("/", 1)[-1]}; write it as a typed '
                        f"{HCM_TYPE} and run this again.")
                    continue
                if not isinstance(typed, dict) or not type_url(typed).endswith(HCM_TYPE):
                    report.problems.append(
                        f'listener "{name}" ({where}): cannot read its HTTP connection manager '
                        f"(typed_config @type {type_url(typed) or 'missing'}); expected {HCM_TYPE}.")
                    continue
                yield HcmSite(name, where, typed)
        if not found:
            report.note(f'listener "{name}": no HTTP connection manager (TCP or other traffic), left alone')
    for name in only:
        if name not in seen:
            report.problems.append(f'--listener {name}: no static listener has that name '
                                   f"(listeners: {', '.join(sorted(seen)) or 'none'})")


def is_transcoding(hcm: dict) -> bool:
    return any(type_url(f.get("typed_config")).endswith(TRANSCODER_TYPE) for f in hcm.get("http_filters") or [])


def transcoder_descriptor(bootstrap: dict, report: Report) -> tuple[bytes, str] | None:
    """The descriptor set a grpc_json_transcoder of this config already uses, if any."""
    for site in http_connection_managers(bootstrap, (), Report()):
        for http_filter in site.hcm.get("http_filters") or []:
            typed = http_filter.get("typed_config")
            if not type_url(typed).endswith(TRANSCODER_TYPE):
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

