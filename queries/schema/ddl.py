"""queries/schema/*.sql as statements: the schema's single-node form, as the schema step applies it.

    statements(ttl_days)   every file in name order, ${WIRELENS_REQUESTS_TTL_DAYS} filled in
    split_sql(text)        a DDL file's statements

The cluster form is cluster/cluster_schema.py's, over these statements; the
local stack's schema step (deploy/local/schema.py) applies one or the other.
"""

from __future__ import annotations

import string
from pathlib import Path

SCHEMA_DIR = Path(__file__).resolve().parent


def statements(ttl_days: str) -> list[str]:
    """queries/schema/*.sql in file order with ${WIRELENS_REQUESTS_TTL_DAYS} filled in."""
    out = []
    for path in sorted(SCHEMA_DIR.glob("*.sql")):
        out += split_sql(string.Template(path.read_text()).substitute(WIRELENS_REQUESTS_TTL_DAYS=ttl_days))
    return out


def split_sql(text: str) -> list[str]:
    """Statements of a DDL file: split on ';' at line ends, comments dropped."""
    statements, current = [], []
    for line in text.splitlines():
        if line.strip().startswith("--"):
            continue
        current.append(line)
        if line.rstrip().endswith(";"):
            statement = "\n".join(current).strip().rstrip(";").strip()
            if statement:
                statements.append(statement)
            current = []
    tail = "\n".join(current).strip()
    if tail:
        statements.append(tail)
    return statements
