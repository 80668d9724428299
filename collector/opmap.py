"""The Collector's copy of the operation map: what restores the labels the filter no longer publishes.

The filter's record (format 2, filters/record.yaml `published`) leaves out what
is constant per operation and REST rule: `rpc.service`, `rpc.method`,
`wirelens.streaming` and `http.route`. It carries the key of those labels
instead (`ok`, 4 characters: filters/core/src/opmap/key.rs), and
`transform/wirelens_record` sets it as the attribute `wirelens.opmap.key`.
This module writes the Collector config fragment that restores them from the
same operation map the filter was given (the plugin configuration JSON):
`transform/wirelens_opmap`, one statement per (operation, rule) matching
(`wirelens.operation`, `wirelens.opmap.key`) for logs and for spans.

    python -m collector.opmap build/opmap.json > collector-opmap.yaml
    otelcol-wirelens --config collector/config.yaml --config collector-opmap.yaml

The second `--config` replaces the statements of `collector/config.yaml`'s own
`transform/wirelens_opmap` (maps merge, lists are replaced), which restore
nothing. A record whose (operation, key) the fragment does not know (no
fragment, or one from another version of the map) keeps `wirelens.opmap.key`
and gets none of the four labels: never dropped, never another version's
labels. To serve two versions of a map during a change, pass both files
(`python -m collector.opmap old.json new.json`): their statements are merged.

Records in format 1 (a JSON object from an older filter) carry the four
labels themselves; this processor leaves them alone (no key).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

PROCESSOR = "transform/wirelens_opmap"
KEY_ATTRIBUTE = "wirelens.opmap.key"
OPERATION = "wirelens.operation"
RESOLVED = "wirelens.opmap.resolved"  # set with the labels, deleted with the key
LABELS = ("rpc.service", "rpc.method", "wirelens.streaming", "http.route")
KEY_LEN = 4
_ALPHABET = "0123456789abcdefghijklmnopqrstuv"


def labels_key(operation: str, service: str, method: str, streaming: str, route: str) -> str:
    """The filter's labels_key (filters/core/src/opmap/key.rs): FNV-1a 64 over length-prefixed values, 20 bits."""
    h = 0xCBF29CE484222325
    for part in (operation, service, method, streaming, route):
        data = part.encode()
        for b in len(data).to_bytes(4, "little") + data:
            h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return "".join(_ALPHABET[(h >> (59 - 5 * i)) & 31] for i in range(KEY_LEN))


def _derive_operation(service: str, method: str) -> str:
    short = service.rsplit(".", 1)[-1]
    return short[:1].lower() + short[1:] + "." + method


def label_sets(config: dict) -> list[tuple[str, str, dict[str, str]]]:
    """(operation, key, labels) of every operation's gRPC labels and every REST rule's, as the filter derives them.

    The defaults are the filter's (filters/README.md, "Plugin configuration"): the operation from
    `grpc_path` when absent, `rpc_service`/`rpc_method` from it. Empty labels are left out, as the
    record omits them.
    """
    out = []
    for op in (config or {}).get("operations") or []:
        grpc_path = op.get("grpc_path")
        service = method = ""
        if grpc_path:
            service, _, method = grpc_path[1:].partition("/")
        name = op.get("operation") or _derive_operation(service, method)
        service = op["rpc_service"] if op.get("rpc_service") is not None else service
        method = op["rpc_method"] if op.get("rpc_method") is not None else method
        streaming = op.get("streaming") or ""
        base = {"rpc.service": service, "rpc.method": method, "wirelens.streaming": streaming}
        out.append((name, labels_key(name, service, method, streaming, ""),
                    {k: v for k, v in base.items() if v}))
        for rule in op.get("http_rules") or []:
            route = rule["pattern"]
            labels = {**base, "http.route": route}
            out.append((name, labels_key(name, service, method, streaming, route),
                        {k: v for k, v in labels.items() if v}))
    return out


def _quote(s: str) -> str:
    """An OTTL string literal."""
    return json.dumps(s, ensure_ascii=False)


def statements(ctx: str, configs: list[dict]) -> list[str]:
    """The statements of one context (`log` or `span`): one per known (operation, key), then the clean-up."""
    attrs = f"{ctx}.attributes"
    seen: dict[tuple[str, str], dict[str, str]] = {}
    clash: set[tuple[str, str]] = set()
    for config in configs:
        for name, key, labels in label_sets(config):
            if (name, key) in seen and seen[(name, key)] != labels:
                clash.add((name, key))  # two label sets with one key: restore neither
            seen.setdefault((name, key), labels)
    out = []
    for (name, key), labels in seen.items():
        if (name, key) in clash:
            continue
        merged = json.dumps({**labels, RESOLVED: "1"}, ensure_ascii=False, separators=(",", ":"))
        out.append(f'merge_maps({attrs}, {merged}, "upsert") where {attrs}["{KEY_ATTRIBUTE}"] == {_quote(key)} '
                   f'and {attrs}["{OPERATION}"] == {_quote(name)}')
    return out + cleanup(ctx)


def cleanup(ctx: str) -> list[str]:
    """The key goes once its labels are restored; a key the map does not know stays, as the sign."""
    attrs = f"{ctx}.attributes"
    return [f'delete_key({attrs}, "{KEY_ATTRIBUTE}") where {attrs}["{RESOLVED}"] != nil',
            f'delete_key({attrs}, "{RESOLVED}")']


def processor(configs: list[dict]) -> dict:
    """The transform processor's config for the given operation maps (plugin configurations)."""
    return {
        "error_mode": "ignore",
        "log_statements": [{"context": "log", "statements": statements("log", configs)}],
        "trace_statements": [{"context": "span", "statements": statements("span", configs)}],
    }


def fragment(configs: list[dict]) -> str:
    """The Collector config file to pass after collector/config.yaml (a second --config)."""
    from ruamel.yaml import YAML  # noqa: PLC0415  (requirements.txt)
    import io  # noqa: PLC0415

    buf = io.StringIO()
    buf.write("# Generated by `python -m collector.opmap` from the operation map; pass it after\n"
              "# collector/config.yaml (a second --config). collector/opmap.py says what it does.\n")
    yaml = YAML()
    yaml.width = 1 << 16
    yaml.dump({"processors": {PROCESSOR: processor(configs)}}, buf)
    return buf.getvalue()


def write(opmap_json: Path, out: Path) -> Path:
    """Writes the fragment for one plugin configuration file (the local stack: build/opmap.json)."""
    text = fragment([json.loads(opmap_json.read_text() or "null") or {}])
    out.parent.mkdir(parents=True, exist_ok=True)
    if not out.exists() or out.read_text() != text:
        out.write_text(text)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("plugin_config", nargs="+", type=Path,
                    help="the filter's plugin configuration (JSON, e.g. build/opmap.json); several: "
                         "every version a fleet runs")
    ap.add_argument("-o", "--output", type=Path, help="write here instead of stdout")
    args = ap.parse_args(argv)
    configs = [json.loads(p.read_text() or "null") or {} for p in args.plugin_config]
    text = fragment(configs)
    if args.output:
        args.output.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
