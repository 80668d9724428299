"""The local stack's settings: NAME=VALUE files such as deploy/local/ports.env."""

from __future__ import annotations

from pathlib import Path

from . import ROOT

PORTS_FILE = ROOT / "deploy" / "local" / "ports.env"


def read_ports(path: Path, environ: dict[str, str]) -> dict[str, str]:
    """NAME=VALUE lines of a ports file, each overridable by the environment; *_PORT values must be ports."""
    settings: dict[str, str] = {}
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, value = line.partition("=")
        if not sep:
            raise ValueError(f"{path}:{number}: expected NAME=VALUE, got {raw!r}")
        settings[name.strip()] = environ.get(name.strip(), value.strip())
    for name, value in settings.items():
        if name.endswith("_PORT") and not (value.isdigit() and 0 < int(value) < 65536):
            raise ValueError(f"{name}={value!r} is not a valid port (set in {path} or the environment)")
    return settings


def clickhouse_url(settings: dict[str, str]) -> str:
    """The HTTP interface of a stack's ClickHouse, from its settings."""
    return f"http://127.0.0.1:{settings['WIRELENS_CLICKHOUSE_HTTP_PORT']}"
