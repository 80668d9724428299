"""filters/release.py: the release a user downloads, and the checks that refuse a .so they could not load."""
from __future__ import annotations

import hashlib
import json
import shutil
import tarfile
from pathlib import Path

import pytest

from filters import release

# A library of this machine linked against its own glibc (Debian 12: 2.36): it needs more than Envoy's floor.
NEWER_GLIBC_LIBRARY = Path("/usr/lib/x86_64-linux-gnu/libstdc++.so.6")


def test_the_built_native_module_loads_where_envoy_does():
    facts = release.check_native()
    assert facts.glibc_floor <= release.envoy_glibc_floor() == (2, 31)
    assert (facts.abi_version, facts.envoy_version) == ("v0.2.0", "1.40.0")
    assert "envoy_dynamic_module_on_program_init" in facts.exported_hooks
    assert "envoy_dynamic_module_on_http_filter_request_headers" in facts.exported_hooks


def test_a_library_needing_a_newer_glibc_is_refused(tmp_path, monkeypatch):
    assert release.glibc_floor(NEWER_GLIBC_LIBRARY) > (2, 31)
    monkeypatch.setattr(release, "NATIVE", tmp_path / "libwirelens.so")
    shutil.copy(NEWER_GLIBC_LIBRARY, release.NATIVE)
    with pytest.raises(release.ReleaseError, match=r"needs glibc 2\.\d+, newer than Envoy's own floor 2\.31"):
        release.check_native(release.NATIVE)


def test_a_missing_module_names_the_make_target(tmp_path):
    with pytest.raises(release.ReleaseError, match="run `make native`"):
        release.check_native(tmp_path / "libwirelens.so")


def test_the_release_holds_both_builds_with_their_sums(tmp_path):
    tarball = release.package(tmp_path)
    folder = tmp_path / tarball.name.removesuffix(".tar.gz")
    manifest = json.loads((folder / "manifest.json").read_text())
    native = manifest["files"]["libwirelens.so"]
    assert native["envoy"] == "1.40.0" and native["abi_version"] == "v0.2.0"
    assert tuple(int(x) for x in native["glibc_min"].split(".")) <= (2, 31)
    for line in (folder / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split("  ")
        assert hashlib.sha256((folder / name).read_bytes()).hexdigest() == digest, name
    with tarfile.open(tarball) as tar:
        assert sorted(Path(n).name for n in tar.getnames() if "/" in n) == [
            "SHA256SUMS", "libwirelens.so", "manifest.json", "wirelens_filter.wasm"]
