"""The modules as OCI artifacts (tools/wasm-image, deploy/kubernetes/images/wasm_image.py): the committed
manifests name the module by the digest `make wasm-image` builds, never by a tag; Envoy Gateway's image policy.

The Go side (two builds give the same digests, the TLS registry round trip) is tools/wasm-image/image_test.go.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from deploy.envoy_gateway import manifests
from deploy.kubernetes.images import wasm_image

ROOT = Path(__file__).resolve().parents[2]
WASM = ROOT / "build" / "wirelens_filter.wasm"
# Where a manifest that deploys wirelens into a proxy may name the module.
MANIFEST_GLOBS = ("deploy/istio/**/*.yaml", "deploy/kubernetes*/**/*.yaml", "deploy/envoy_gateway/**/*.yaml")
# A reference to the filter's image: the name, then a tag (:...) or a digest (@...).
REFERENCE = re.compile(r"wirelens-filter(?P<sep>[:@])(?P<rest>[^\s\"',]+)")


def built_digest() -> str:
    if not WASM.exists():
        pytest.fail(f"{WASM} is missing: run `make filter` (make bootstrap builds it)")
    try:
        return wasm_image.build(WASM)[wasm_image.FILTER]["digest"]
    except wasm_image.LayoutError as exc:
        pytest.fail(str(exc))


def committed_references() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for pattern in MANIFEST_GLOBS:
        for path in sorted(ROOT.glob(pattern)):
            for match in REFERENCE.finditer(path.read_text()):
                found.setdefault(str(path.relative_to(ROOT)), []).append(match.group(0))
    return found


def test_committed_manifests_name_the_module_by_the_digest_make_wasm_image_builds():
    digest = built_digest()
    found = committed_references()
    assert found, f"no manifest names wirelens-filter ({', '.join(MANIFEST_GLOBS)}): the WasmPlugin should"
    wrong = {path: [ref for ref in refs if ref != f"wirelens-filter@{digest}"] for path, refs in found.items()}
    wrong = {path: refs for path, refs in wrong.items() if refs}
    # A WasmPlugin's sha256 (what istio-agent checks the pull against) is the same manifest digest.
    for path in sorted(ROOT.glob("deploy/istio/**/*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            if isinstance(document, dict) and document.get("kind") == "WasmPlugin" and "sha256" in document["spec"]:
                if document["spec"]["sha256"] != digest.removeprefix("sha256:"):
                    wrong.setdefault(str(path.relative_to(ROOT)), []).append(f"sha256: {document['spec']['sha256']}")
    assert not wrong, (f"these manifests name the module by a tag or by another digest than {digest}, which "
                       f"`bin/wasm-image build` makes of {WASM} (make wasm-image, then re-render: "
                       f"python -m deploy.istio.render): {wrong}")


def test_a_reference_check_catches_a_tag_and_a_stale_digest():
    """The check above, on planted references: a floating tag and a digest one hex digit off both fail."""
    digest = "sha256:" + "a" * 64
    for text in ("url: oci://reg.example/wirelens/wirelens-filter:0.1.0",
                 f"url: oci://reg.example/wirelens/wirelens-filter@sha256:{'a' * 63}b"):
        refs = [m.group(0) for m in REFERENCE.finditer(text)]
        assert refs and refs != [f"wirelens-filter@{digest}"], refs
    good = f"url: oci://reg.example/wirelens/wirelens-filter@{digest}\n"
    assert [m.group(0) for m in REFERENCE.finditer(good)] == [f"wirelens-filter@{digest}"]


def test_references_by_digest_only():
    digest = "sha256:" + "0123456789abcdef" * 4
    assert wasm_image.reference("reg.example:5000/wirelens", digest) == \
        f"reg.example:5000/wirelens/wirelens-filter@{digest}"
    assert wasm_image.digest_hex(f"reg.example/wirelens/wirelens-filter@{digest}") == digest[7:]
    for bad in ("reg.example/wirelens/wirelens-filter:0.1.0", "reg.example/wirelens/wirelens-filter@sha256:abc"):
        with pytest.raises(ValueError, match=re.escape(repr(bad))):
            wasm_image.digest_hex(bad)
    with pytest.raises(ValueError, match="without a scheme"):
        wasm_image.reference("https://reg.example/wirelens", digest)
    with pytest.raises(ValueError, match="sha256:<64 hex>"):
        wasm_image.reference("reg.example/wirelens", "latest")


def test_layout_errors_say_how_to_build_it(tmp_path):
    with pytest.raises(wasm_image.LayoutError, match=r"index.json is missing: run `make wasm-image`"):
        wasm_image.digests(tmp_path)
    (tmp_path / "index.json").write_text('{"manifests": []}')
    with pytest.raises(wasm_image.LayoutError, match="has no wirelens-filter entry"):
        wasm_image.digests(tmp_path)


def _inputs(**extra) -> manifests.Inputs:
    fields = {"wasm_url": "", "wasm_sha256": "", **extra}
    return manifests.Inputs(gateway_port=1, rest_port=2, grpc_port=3, collector_port=4,
                            plugin_config={"operations": []}, standalone=False, **fields)


def test_envoy_gateway_pulls_the_image_by_digest_and_trusts_the_registry_ca(tmp_path):
    digest = "sha256:" + "ab" * 32
    image = f"127.0.0.1:5000/wirelens/wirelens-filter@{digest}"
    ca = tmp_path / "ca.crt"
    ca.write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    files = manifests.render_files(_inputs(wasm_image=image, wasm_image_ca=ca))
    (policy,) = files["wirelens-policy.yaml"]
    assert policy["spec"]["wasm"][0]["code"] == {"type": "Image", "image": {
        "url": image, "sha256": "ab" * 32,
        "tls": {"caCertificateRef": {"kind": "Secret", "name": manifests.REGISTRY_CA_SECRET}}}}
    (secret,) = files["registry-ca.yaml"]
    assert (secret["kind"], secret["metadata"]) == ("Secret", {"name": manifests.REGISTRY_CA_SECRET,
                                                               "namespace": manifests.NAMESPACE})
    assert secret["data"]["ca.crt"]  # base64 of the file: Envoy Gateway reads key ca.crt
    # Without a CA: the system roots, no Secret. A tag is refused, naming the reference.
    plain = manifests.render_files(_inputs(wasm_image=image))
    assert "tls" not in plain["wirelens-policy.yaml"][0]["spec"]["wasm"][0]["code"]["image"]
    assert "registry-ca.yaml" not in plain
    with pytest.raises(ValueError, match="not a reference by digest"):
        manifests.render_files(_inputs(wasm_image="127.0.0.1:5000/wirelens/wirelens-filter:0.1.0"))
    # No image: the HTTP code source as before.
    http = manifests.render_files(_inputs(wasm_url="https://x.example/f.wasm", wasm_sha256="0" * 64))
    assert http["wirelens-policy.yaml"][0]["spec"]["wasm"][0]["code"]["type"] == "HTTP"


def test_envoy_gateway_renderer_flags(tmp_path):
    command = [sys.executable, "-m", "deploy.envoy_gateway.manifests", "-o", str(tmp_path / "out")]
    result = subprocess.run([*command, "--wasm-image-ca", str(tmp_path / "ca.crt")], cwd=ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 2 and "--wasm-image-ca goes with --wasm-image" in result.stderr, result.stderr
    result = subprocess.run([*command, "--wasm-image", "https://reg.example/wirelens"], cwd=ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 2 and "--wasm-image" in result.stderr, result.stderr
    assert not (tmp_path / "out").exists()
