"""End to end: the local stack's doors are locked.

ClickHouse's users (deploy/local/clickhouse_users.py): the reporter reads and
nothing else, the Collector's writer inserts but cannot drop, a wrong password
is refused, the credentials file is 0600 and the report runs as the reporter.
And every listener of every process the stack started is bound to 127.0.0.1.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path


from tests.e2e.conftest import ROOT, stack

from deploy.local import clickhouse_users  # deploy/local, on the path through conftest
from wirelens_helpers import programs


def credentials(settings) -> dict[str, str]:
    return clickhouse_users.read_credentials(clickhouse_users.credentials_path(Path(settings["WIRELENS_STATE_DIR"])))


def query_as(settings, user: str, password: str, sql: str) -> tuple[int, str]:
    """(HTTP status, answer) of one statement as a user (ClickHouse's X-ClickHouse-User/-Key headers)."""
    request = urllib.request.Request(f"http://127.0.0.1:{settings['WIRELENS_CLICKHOUSE_HTTP_PORT']}/",
                                     data=sql.encode(),
                                     headers={"X-ClickHouse-User": user, "X-ClickHouse-Key": password})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")


def refused(settings, user: str, password: str, sql: str, why: str) -> None:
    """The statement is refused with ClickHouse's error code `why` (e.g. ACCESS_DENIED)."""
    status, answer = query_as(settings, user, password, sql)
    assert status != 200, f"{user} was allowed to run {sql!r}, expected a refusal ({why})"
    assert f"({why})" in answer, f"{user} running {sql!r}: expected {why} in the refusal, got: {answer[:300]}"


def test_credentials_file_is_private_and_holds_both_users(local_stack):
    path = clickhouse_users.credentials_path(Path(local_stack["WIRELENS_STATE_DIR"]))
    mode = stat.S_IMODE(path.stat().st_mode)
    assert mode == 0o600, f"{path} has mode {mode:o}, expected 600"
    users_xml = stack.users_xml_path(local_stack)
    assert stat.S_IMODE(users_xml.stat().st_mode) == 0o600, f"{users_xml} is not 0600"
    values = credentials(local_stack)
    assert values[clickhouse_users.READER_USER] == clickhouse_users.READER
    assert values[clickhouse_users.WRITER_USER] == clickhouse_users.WRITER
    assert len(values[clickhouse_users.READER_PASSWORD]) >= 24 and len(values[clickhouse_users.WRITER_PASSWORD]) >= 24
    # users.xml keeps hashes only; no component's log prints a password
    assert values[clickhouse_users.WRITER_PASSWORD] not in users_xml.read_text()
    logs = Path(local_stack["WIRELENS_STATE_DIR"]) / "logs"
    for log in logs.glob("*.log"):
        text = log.read_text(errors="replace")
        for key in (clickhouse_users.READER_PASSWORD, clickhouse_users.WRITER_PASSWORD):
            assert values[key] not in text, f"{log} prints {key}"


def test_reporter_reads_only(local_stack):
    values = credentials(local_stack)
    user, password = values[clickhouse_users.READER_USER], values[clickhouse_users.READER_PASSWORD]
    for sql in ("SELECT count() FROM wirelens.requests", "SELECT count() FROM otel.otel_logs"):
        status, answer = query_as(local_stack, user, password, sql)
        assert status == 200, f"the reporter could not run {sql!r}: {answer[:300]}"
    # No grant to write (ClickHouse checks grants before the readonly profile) ...
    refused(local_stack, user, password, "INSERT INTO wirelens.runs (run_id) VALUES ('reporter-was-here')",
            "ACCESS_DENIED")
    refused(local_stack, user, password, "CREATE TABLE wirelens.reporter_table (x UInt8) ENGINE = MergeTree ORDER BY x",
            "ACCESS_DENIED")
    refused(local_stack, user, password, "DROP TABLE wirelens.runs", "ACCESS_DENIED")
    refused(local_stack, user, password, "SELECT count() FROM system.users", "ACCESS_DENIED")
    # ... and its profile is readonly = 1: it cannot even change a setting.
    refused(local_stack, user, password, "SELECT 1 SETTINGS max_threads = 1", "READONLY")


def test_writer_inserts_but_cannot_drop(local_stack):
    values = credentials(local_stack)
    user, password = values[clickhouse_users.WRITER_USER], values[clickhouse_users.WRITER_PASSWORD]
    refused(local_stack, user, password, "DROP TABLE wirelens.runs", "ACCESS_DENIED")
    refused(local_stack, user, password, "DROP DATABASE otel", "ACCESS_DENIED")
    refused(local_stack, user, password, "TRUNCATE TABLE otel.otel_logs", "ACCESS_DENIED")
    refused(local_stack, user, password, "SELECT count() FROM wirelens.runs", "ACCESS_DENIED")


def test_default_is_the_admin_path_on_loopback_only(local_stack):
    status, answer = query_as(local_stack, "default", "", "SELECT count() FROM system.processes")
    assert status == 200, f"default on loopback is the stack's admin path and should answer: {answer[:300]}"
    # Its <networks> are loopback: from any other address ClickHouse refuses it.
    users = stack.users_xml_path(local_stack).read_text()
    default = users.split("<default>", 1)[1].split("</default>", 1)[0]
    assert "<networks><ip>127.0.0.1</ip><ip>::1</ip></networks>" in default, default


def test_wrong_password_and_unknown_user_are_refused(local_stack):
    values = credentials(local_stack)
    for user in (values[clickhouse_users.READER_USER], values[clickhouse_users.WRITER_USER]):
        refused(local_stack, user, "not-the-password", "SELECT 1", "AUTHENTICATION_FAILED")
        refused(local_stack, user, "", "SELECT 1", "AUTHENTICATION_FAILED")
    refused(local_stack, "nobody", "", "SELECT 1", "AUTHENTICATION_FAILED")


def test_report_and_saved_queries_run_as_the_reporter(local_stack):
    values = credentials(local_stack)
    env = {**os.environ, "CLICKHOUSE_USER": values[clickhouse_users.READER_USER],
           "CLICKHOUSE_PASSWORD": values[clickhouse_users.READER_PASSWORD]}
    url = f"http://127.0.0.1:{local_stack['WIRELENS_CLICKHOUSE_HTTP_PORT']}"
    report = subprocess.run([str(ROOT / "bin" / "wirelens"), "report", "--since", "10m", "--clickhouse-url", url,
                             "--format", "tsv"], env=env, capture_output=True, text=True, timeout=180)
    assert report.returncode == 0 and "ERROR" not in report.stdout, report.stdout[-2000:] + report.stderr[-2000:]
    saved_query = subprocess.run([*programs.command("queries.saved"), "errors_by_status",
                                  "--since", "10m", "--clickhouse-url", url], env=programs.environment(env), capture_output=True,
                                 text=True, timeout=60)
    assert saved_query.returncode == 0, saved_query.stderr
    # The same with a wrong password: refused, and the error says so.
    bad = subprocess.run([str(ROOT / "bin" / "wirelens"), "report", "--since", "10m", "--clickhouse-url", url],
                         env={**env, "CLICKHOUSE_PASSWORD": "wrong"}, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1 and "AUTHENTICATION_FAILED" in bad.stdout + bad.stderr, bad.stdout + bad.stderr


# ---------------------------------------------------------------- listeners

LISTEN = "0A"


def listening_sockets() -> dict[str, tuple[str, int]]:
    """Socket inode -> (local address, port) of every TCP socket in LISTEN state (/proc/net/tcp, tcp6)."""
    sockets = {}
    for table, family in (("/proc/net/tcp", 4), ("/proc/net/tcp6", 6)):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state != LISTEN:
                continue
            address_hex, port_hex = local.rsplit(":", 1)
            sockets[inode] = (decode_address(address_hex, family), int(port_hex, 16))
    return sockets


def decode_address(address_hex: str, family: int) -> str:
    """/proc/net/tcp's address: 32-bit words in host (little-endian) order."""
    raw = bytes.fromhex(address_hex)
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    if family == 4:
        return ".".join(str(b) for b in words)
    if words[:12] == b"\0" * 10 + b"\xff\xff":  # IPv4-mapped
        return ".".join(str(b) for b in words[12:])
    import ipaddress
    return str(ipaddress.IPv6Address(words))


def descendants(pid: int) -> set[int]:
    """pid and every process below it (from /proc/*/stat parent pids)."""
    children: dict[int, list[int]] = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                ppid = int((proc / "stat").read_text().rsplit(") ", 1)[1].split()[1])
            except (OSError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(proc.name))
    found, todo = set(), [pid]
    while todo:
        current = todo.pop()
        if current not in found:
            found.add(current)
            todo.extend(children.get(current, []))
    return found


def socket_inodes(pid: int) -> set[str]:
    inodes = set()
    try:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    except OSError:
        pass
    return inodes


def test_every_listener_of_the_stack_is_on_loopback(local_stack):
    listening = listening_sockets()
    seen, offenders = {}, []
    for component in stack.COMPONENTS:
        pid = stack.read_pid(local_stack, component.name)
        if not component.enabled(local_stack):
            continue
        assert pid, f"{component.name} is not running: the check needs every component of the stack"
        for process in descendants(pid):
            for inode in socket_inodes(process) & listening.keys():
                address, port = listening[inode]
                seen.setdefault(component.name, set()).add(f"{address}:{port}")
                if address != "127.0.0.1":
                    offenders.append(f"{component.name} (pid {process}) listens on {address}:{port}")
    assert not offenders, "listeners not on 127.0.0.1:\n  " + "\n  ".join(offenders)
    # Each component's configured ports are among what it was seen listening on.
    for component in stack.COMPONENTS:
        if component.enabled(local_stack):
            for variable in component.ports:
                assert f"127.0.0.1:{local_stack[variable]}" in seen.get(component.name, set()), \
                    f"{component.name}: {variable}={local_stack[variable]} not seen listening; saw {seen.get(component.name)}"


def test_the_listener_check_names_an_offender():
    """The check above can fail: a socket on all interfaces is reported with its address and port."""
    import socket

    with socket.socket() as sock:
        sock.bind(("0.0.0.0", 0))
        sock.listen()
        port = sock.getsockname()[1]
        mine = socket_inodes(os.getpid()) & listening_sockets().keys()
        addresses = {listening_sockets()[inode] for inode in mine}
    assert ("0.0.0.0", port) in addresses, addresses
