"""The helpers wirelens' Python programs, benchmarks and tests share: one copy each.

    ports       free loopback ports, for tests and side stacks
    clickhouse  statements over ClickHouse's HTTP interface (query parameters,
                never spliced), saved query texts, report windows
    settings    the local stack's settings file (deploy/local/ports.env)
    wait        wait_for: poll under a deadline, fail naming what was missing,
                the last value seen, and a watched process that died
    supervise   start, watch, stop and restart the processes of a stack
    programs    the argv and environment that run a checkout program as a
                module (`python -m deploy.local.stack`) from anywhere

Installed into .venv in editable mode (`make venv`; requirements.txt has
`-e tools/pyhelpers`).
"""

from pathlib import Path

# The checkout: this package is installed in editable mode from tools/pyhelpers.
ROOT = Path(__file__).resolve().parents[3]
