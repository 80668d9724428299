"""The filter served through Extension Config Discovery from files: one resource per file,
written atomically, a content-addressed copy of the module, and live updates of them.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from envoy import plugin_settings, wiring

from .edit import counterfactual_note, operation_map
from .model import (
    ACCESS_LOG_NAME,
    FILTER_NAME,
    OUR_FILTER_NAMES,
    TYPED_EXTENSION_CONFIG_TYPE,
    InjectError,
    Options,
    Report,
    ecds_module_path,
    ecds_resource_path,
)

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
    """One file per resource (ECDS takes exactly one resource per file), and the module (.wasm or .so) it names."""
    written = []
    if wasm is not None:
        code = ecds_module_path(directory, wasm)
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


def update_ecds(directory: Path, options: Options, new_wasm: bool,
                module_named: bool = False) -> tuple[Report, list[Path]]:
    """Change the ECDS resources in directory live: what the options name, the rest stays.

    new_wasm: the options carry a new build of the module (options.code); module_named: the
    user named the build (--module), which must be the resources' own (the HCMs accept only
    the type they were injected with)."""
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
            module, configuration, code = wiring.filter_parts(resource["typed_config"])
            current = json.loads(configuration)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise InjectError(f"{path}: not a wirelens ECDS resource this tool wrote ({exc!r}); "
                              "inject with --ecds-dir again") from None
        if (new_wasm or module_named) and module != options.module:
            raise InjectError(f"{path}: serves the {module} build, and --module {options.module} was given: the "
                              f"HTTP connection managers accept only the {module} filter's type through ECDS. "
                              f"To switch builds, inject again with --module {options.module}")
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
            changes.append(f"sample_rate {current.get('sample_rate', plugin_settings.SAMPLE_RATE_DEFAULT)} -> {options.sample_rate}")
            if wiring.sampled({"sample_rate": options.sample_rate}) != wiring.sampled(current):
                sampling_changed = True
            current["sample_rate"] = options.sample_rate
        if options.grpc_message_bytes is not None:
            changes.append(f"grpc_message_max_bytes {current.get('grpc_message_max_bytes', plugin_settings.GRPC_MESSAGE_BYTES_DEFAULT)} -> "
                           f"{options.grpc_message_bytes}")
            current["grpc_message_max_bytes"] = options.grpc_message_bytes
        # The counterfactual share changes what the filter computes, not which calls have a record:
        # the access log needs no change (unlike the sample rate's).
        if options.counterfactual_rate is not None:
            was = current.get("counterfactual_rate", plugin_settings.COUNTERFACTUAL_RATE_DEFAULT)
            changes.append(f"counterfactual_rate {was:g} -> {options.counterfactual_rate:g}")
            current["counterfactual_rate"] = options.counterfactual_rate
        if options.counterfactual_max_bytes is not None:
            changes.append(f"counterfactual_max_bytes "
                           f"{current.get('counterfactual_max_bytes', plugin_settings.COUNTERFACTUAL_MAX_BYTES_DEFAULT)} -> "
                           f"{options.counterfactual_max_bytes}")
            current["counterfactual_max_bytes"] = options.counterfactual_max_bytes
        if options.counterfactual_rate is not None:
            unused = counterfactual_note(current) or unused
        if new_wasm:
            new_code = ecds_module_path(directory, options.code)
            changes.append(f"module {code.name} -> {new_code.name}")
            code = new_code
        report.note(f"{name}: {', '.join(changes) or 'nothing to change'}")
        resources[name] = wiring.filter_config(module, name, wiring.plugin_configuration(current), code)
    if unused:
        report.note(unused)
    if sampling_changed:
        # The access log lives in the bootstrap, outside ECDS: its filter for recorded calls stays as injected.
        report.note(f"the access log {ACCESS_LOG_NAME} in your bootstrap keeps its injected filter: below rate 1 it "
                    "should log only sampled calls (unsampled ones have no record; the materialized view drops their "
                    "lines, so counts stay right, but they still travel to the Collector), at 1 every call. "
                    f"To change it, inject again with --sample-rate {options.sample_rate:g}")
    return report, write_ecds(directory, resources, options.code if new_wasm else None)

