"""Unit tests of the local stack's ClickHouse users and of the grpc-message setting (no engine needed)."""

from __future__ import annotations

import hashlib
import json
import stat
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from deploy.local import clickhouse_users
from envoy import render
from deploy.local import stack

ROOT = Path(__file__).resolve().parents[2]


def test_credentials_are_made_once_private_and_reused(tmp_path):
    first = clickhouse_users.ensure_credentials(tmp_path)
    path = clickhouse_users.credentials_path(tmp_path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert first[clickhouse_users.READER_USER] == "wirelens_reader"
    assert first[clickhouse_users.READER_PASSWORD] != first[clickhouse_users.WRITER_PASSWORD]
    assert clickhouse_users.ensure_credentials(tmp_path) == first  # the next start keeps them
    path.chmod(0o644)
    assert clickhouse_users.ensure_credentials(tmp_path) == first
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # widened by hand: tightened again
    path.write_text("CLICKHOUSE_USER=wirelens_reader\n")
    with pytest.raises(ValueError, match="no CLICKHOUSE_PASSWORD, WIRELENS_CLICKHOUSE_WRITER_USER"):
        clickhouse_users.ensure_credentials(tmp_path)


def test_users_xml_holds_hashes_grants_and_a_loopback_default(tmp_path):
    credentials = clickhouse_users.ensure_credentials(tmp_path)
    target = tmp_path / "clickhouse" / "users.xml"
    clickhouse_users.write_users_xml(target, credentials)
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    text = target.read_text()
    assert credentials[clickhouse_users.WRITER_PASSWORD] not in text
    users = ET.fromstring(text).find("users")
    default = users.find("default")
    assert [ip.text for ip in default.find("networks")] == ["127.0.0.1", "::1"]
    reader, writer = users.find("wirelens_reader"), users.find("wirelens_writer")
    assert reader.findtext("password_sha256_hex") == \
        hashlib.sha256(credentials[clickhouse_users.READER_PASSWORD].encode()).hexdigest()
    assert reader.findtext("profile") == "readonly"
    assert [q.text for q in reader.find("grants")] == ["GRANT SELECT ON wirelens.*", "GRANT SELECT ON otel.*",
                                                      "GRANT SELECT ON system.view_refreshes"]
    writer_grants = [q.text for q in writer.find("grants")]
    assert "GRANT INSERT ON otel.*" in writer_grants and not any("DROP" in g or "ALTER" in g for g in writer_grants)


def test_grpc_message_setting_is_checked_and_reaches_the_plugin_configuration(tmp_path):
    assert stack.load_settings({"WIRELENS_STATE_DIR": str(tmp_path)})["WIRELENS_GRPC_MESSAGE_BYTES"] == "128"
    for bad in ("-1", "1025", "lots", "12.5"):
        with pytest.raises(stack.StackError, match=f"WIRELENS_GRPC_MESSAGE_BYTES='{bad}'"):
            stack.load_settings({"WIRELENS_STATE_DIR": str(tmp_path), "WIRELENS_GRPC_MESSAGE_BYTES": bad})
    ports = {name: "1" for name in render.PORT_VARIABLES}
    rendered = render.render(ports, Path("f.wasm"), json.dumps({"operations": []}), Path("d.pb"),
                             access_log="file", access_log_path="/tmp/a.jsonl", grpc_message_max_bytes=0)
    assert '\\"grpc_message_max_bytes\\":0' in rendered
    assert "%REQ(:PATH)%" not in rendered and "x-request-id" in rendered
