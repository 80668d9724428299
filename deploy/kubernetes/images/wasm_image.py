"""The modules as OCI artifacts: what `make wasm-image` (bin/wasm-image, tools/wasm-image) built.

    python -m deploy.kubernetes.images.wasm_image                 each artifact's name and digest in build/oci
    python -m deploy.kubernetes.images.wasm_image --ref REG/REPO  the references by digest under a registry

The layout (build/oci, an OCI image layout) holds

  wirelens-filter   the proxy-wasm module, in the "compat" form Istio's and Envoy
                    Gateway's fetchers read (one tar+gzip layer with plugin.wasm)
  wirelens-native   the Envoy dynamic module (libwirelens.so), an OCI artifact of
                    type application/vnd.wirelens.envoy.dynamic-module.v1

each named by its index.json entry's org.opencontainers.image.ref.name.
Manifests reference the module by the manifest digest (`…/wirelens-filter@sha256:…`):
that is what both fetchers check (Istio's WasmPlugin `sha256`, Envoy Gateway's
`code.image.sha256`), not the sha256 of the .wasm file.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
LAYOUT = ROOT / "build" / "oci"
TOOL = ROOT / "bin" / "wasm-image"
FILTER = "wirelens-filter"
NATIVE = "wirelens-native"
REF_NAME = "org.opencontainers.image.ref.name"
BUILD_HINT = "run `make wasm-image` (bin/wasm-image build: build/oci from build/wirelens_filter.wasm)"


class LayoutError(Exception):
    pass


def digests(layout: Path = LAYOUT) -> dict[str, str]:
    """Artifact name -> manifest digest ("sha256:…"), from the layout's index.json."""
    index = layout / "index.json"
    try:
        manifests = json.loads(index.read_text())["manifests"]
    except FileNotFoundError:
        raise LayoutError(f"{index} is missing: {BUILD_HINT}") from None
    except (ValueError, KeyError) as exc:
        raise LayoutError(f"{index} is not an OCI image index ({exc}): {BUILD_HINT}") from None
    found = {m["annotations"][REF_NAME]: m["digest"] for m in manifests if REF_NAME in m.get("annotations", {})}
    if FILTER not in found:
        raise LayoutError(f"{index} has no {FILTER} entry: {BUILD_HINT}")
    return found


def reference(registry_repo: str, digest: str, name: str = FILTER) -> str:
    """REG/REPO + name + @digest, e.g. 127.0.0.1:5000/wirelens/wirelens-filter@sha256:…"""
    if "://" in registry_repo:
        raise ValueError(f"registry {registry_repo!r}: host[:port]/repo, without a scheme")
    if not digest.startswith("sha256:") or len(digest) != 71:
        raise ValueError(f"digest {digest!r}: want sha256:<64 hex>")
    return f"{registry_repo.rstrip('/')}/{name}@{digest}"


def digest_hex(ref: str) -> str:
    """The 64 hex digits of a reference by digest; ValueError naming the reference otherwise."""
    _, at, digest = ref.rpartition("@sha256:")
    if not at or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        raise ValueError(f"{ref!r} is not a reference by digest (…@sha256:<64 hex>)")
    return digest


def build(wasm: Path, native: Path | None = None, tool: Path = TOOL) -> dict[str, dict]:
    """Build the artifacts from these files into a throwaway layout; name -> {digest, module_sha256, …}."""
    if not tool.exists():
        raise LayoutError(f"{tool} is missing: {BUILD_HINT}")
    with tempfile.TemporaryDirectory(prefix="wasm-image-") as tmp:
        command = [str(tool), "build", "--wasm", str(wasm), "--out", str(Path(tmp) / "oci")]
        command += ["--native", str(native)] if native else ["--no-native"]
        result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise LayoutError(f"{' '.join(command)} failed:\n{result.stderr}")
    return {a["name"]: a for a in json.loads(result.stdout)["artifacts"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layout", type=Path, default=LAYOUT, help="the OCI layout (default build/oci)")
    parser.add_argument("--ref", metavar="REG/REPO", help="print the references by digest under this registry")
    args = parser.parse_args(argv)
    try:
        found = digests(args.layout)
    except LayoutError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for name, digest in sorted(found.items()):
        print(reference(args.ref, digest, name) if args.ref else f"{name} {digest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
