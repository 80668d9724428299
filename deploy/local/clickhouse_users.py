"""The local stack's ClickHouse users: a writer for the Collector, a read-only reporter, and `default` on loopback.

The embedded engine has no SQL user management (CREATE USER fails: "no
writeable access storage"), so users and their grants live in a users.xml
that config.xml names in <users_config> (docs/clickhouse-cluster.md, "Users
and grants"). Passwords are generated at the stack's first start into a 0600
credentials file in its state directory and reused on later starts; users.xml
holds only their SHA-256.

  wirelens_writer  the Collector's exporter: INSERT into otel.* and (through
                   wirelens's views, which run with the inserting user's
                   rights) wirelens.*, and what its create_schema needs
                   (cluster_schema.ROLES, checked live by the cluster test).
  wirelens_reader  the report, `wirelens query`, /play: readonly = 1, SELECT
                   on otel.* and wirelens.*.
  default          no password, loopback only: the admin path of the stack's
                   schema step (DDL) and of the tests.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from pathlib import Path
from xml.sax.saxutils import escape

from queries.schema.cluster import cluster_schema  # the roles' grants


CREDENTIALS_FILE = "credentials.env"
WRITER = "wirelens_writer"
READER = "wirelens_reader"

# Keys of the credentials file. The reporter's are the names clickhouse-client,
# `wirelens report` and `wirelens query` read from the environment.
READER_USER, READER_PASSWORD = "CLICKHOUSE_USER", "CLICKHOUSE_PASSWORD"
WRITER_USER, WRITER_PASSWORD = "WIRELENS_CLICKHOUSE_WRITER_USER", "WIRELENS_CLICKHOUSE_WRITER_PASSWORD"

WRITER_GRANTS = cluster_schema.ROLES[WRITER]
# system.view_refreshes: wirelens report names a stopped or failing rollup refresh (queries/rollup.py)
READER_GRANTS = ["SELECT ON wirelens.*", "SELECT ON otel.*", "SELECT ON system.view_refreshes"]
LOOPBACK = ("127.0.0.1", "::1")


def credentials_path(state_dir: Path) -> Path:
    return state_dir / CREDENTIALS_FILE


def ensure_credentials(state_dir: Path) -> dict[str, str]:
    """The stack's credentials: read from its file, or generated into a new 0600 file on the first start."""
    path = credentials_path(state_dir)
    if path.exists():
        if path.stat().st_mode & 0o077:
            path.chmod(0o600)  # a copy or an editor may have widened it; the file holds passwords
        return read_credentials(path)
    values = {READER_USER: READER, READER_PASSWORD: secrets.token_urlsafe(24),
              WRITER_USER: WRITER, WRITER_PASSWORD: secrets.token_urlsafe(24)}
    text = ("# ClickHouse users of this wirelens stack, generated at its first start; delete the file\n"
            "# (with the stack down) for new passwords. The reporter (read-only) is CLICKHOUSE_USER,\n"
            "# which `wirelens report` and `wirelens query` read; the Collector writes as the writer.\n"
            + "".join(f"{key}={value}\n" for key, value in values.items()))
    path.parent.mkdir(parents=True, exist_ok=True)
    # O_EXCL: never overwrite a file another start wrote meanwhile; mode 0600 from the first byte.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    return values


def read_credentials(path: Path) -> dict[str, str]:
    """KEY=VALUE lines of a credentials file (comments and blank lines skipped); ValueError names a missing key."""
    values = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            values[key.strip()] = value.strip()
    missing = [key for key in (READER_USER, READER_PASSWORD, WRITER_USER, WRITER_PASSWORD) if not values.get(key)]
    if missing:
        raise ValueError(f"{path}: no {', '.join(missing)}; delete the file (with the stack down) to regenerate it")
    return values


def users_xml(credentials: dict[str, str]) -> str:
    """users.xml for the engine: the profiles, default on loopback, the writer and the reader with their grants."""

    def user(name: str, password: str, profile: str, grants: list[str], networks: str) -> str:
        digest = hashlib.sha256(password.encode()).hexdigest()
        queries = "".join(f"<query>GRANT {escape(grant)}</query>" for grant in grants)
        return (f"    <{name}><password_sha256_hex>{digest}</password_sha256_hex>"
                f"<networks>{networks}</networks><profile>{profile}</profile><quota>default</quota>"
                f"<grants>{queries}</grants></{name}>\n")

    loopback = "".join(f"<ip>{ip}</ip>" for ip in LOOPBACK)
    # Writer and reader have passwords: they may log in from wherever ClickHouse
    # listens (loopback unless configured otherwise).
    anywhere = "<ip>::/0</ip>"
    return ("<clickhouse>\n"
            "  <profiles><default/><readonly><readonly>1</readonly></readonly></profiles>\n"
            "  <quotas><default/></quotas>\n"
            "  <users>\n"
            f"    <default><password></password><networks>{loopback}</networks>"
            "<profile>default</profile><quota>default</quota><access_management>0</access_management></default>\n"
            + user(credentials[WRITER_USER], credentials[WRITER_PASSWORD], "default", WRITER_GRANTS, anywhere)
            + user(credentials[READER_USER], credentials[READER_PASSWORD], "readonly", READER_GRANTS, anywhere)
            + "  </users>\n</clickhouse>\n")


def write_users_xml(path: Path, credentials: dict[str, str]) -> None:
    """users.xml with mode 0600 (it holds the password hashes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(users_xml(credentials))
