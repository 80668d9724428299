"""tools/pyhelpers (wirelens_helpers): one copy of each Python helper, the programs by name."""

import importlib
import re
import subprocess
import sys
from pathlib import Path

import wirelens_helpers
from wirelens_helpers import programs
from wirelens_helpers.ports import free_ports

ROOT = Path(__file__).resolve().parents[2]


def python_files():
    """The checkout's Python files as committed or added (git ls-files), and tools/pyhelpers."""
    listed = subprocess.run(["git", "ls-files", "--cached", "*.py"], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout.split()
    return {ROOT / p for p in listed if (ROOT / p).exists()} | set((ROOT / "tools" / "pyhelpers").rglob("*.py"))


def test_the_package_is_the_checkouts():
    assert wirelens_helpers.ROOT == ROOT


def test_every_program_is_where_the_table_says():
    for name, where in programs.PROGRAMS.items():
        assert (ROOT / where).is_file(), f"{name}: {where} is missing"


def test_programs_import_by_name_from_anywhere(tmp_path):
    code = "import wirelens_helpers, stack, render, cluster_schema; print(stack.__file__, render.__file__)"
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert out.stdout.split() == [str(ROOT / "deploy/local/stack.py"), str(ROOT / "envoy/render.py")]


def test_no_script_edits_sys_path_for_the_programs():
    # Generated code (build/python/gen) is the one path a test still adds: it is built, not a program.
    offenders = [f"{p.relative_to(ROOT)}:{n}" for p in python_files() if p != Path(__file__)
                 for n, line in enumerate(p.read_text().splitlines(), 1)
                 if "sys.path.insert" in line and 'sys.path.insert(0, str(ROOT / "build" / "python" / "gen"))' not in line]
    assert offenders == [], "import wirelens_helpers (tools/pyhelpers), then the program by its name"


def test_one_free_ports_and_one_ports_file_reader():
    defs = {name: [str(p.relative_to(ROOT)) for p in python_files()
                   if re.search(rf"^\s*def {name}\(", p.read_text(), re.M)]
            for name in ("free_ports", "read_ports", "post")}
    assert all(len(where) == 1 and where[0].startswith("tools/pyhelpers/") for where in defs.values()), defs
    assert importlib.import_module("stack").free_ports is free_ports


def test_free_ports_are_distinct():
    ports = free_ports(20)
    assert len(set(ports)) == 20
