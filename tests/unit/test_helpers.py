"""tools/pyhelpers (wirelens_helpers): one copy of each Python helper; the checkout's programs as real packages."""

import ast
import importlib
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

import wirelens_helpers
from wirelens_helpers import programs
from wirelens_helpers.ports import free_port, free_ports
from wirelens_helpers.wait import WaitTimeout, wait_for

ROOT = Path(__file__).resolve().parents[2]
# Folders of Python that are not the checkout's packages: standalone scripts run by path
# (the counterfactual vectors' generator), the Python service pair's own source root, the helpers' own.
NOT_PACKAGES = ("filters/core/tests/", "services/python/", "tools/")


def python_files():
    """The checkout's Python files as committed or added (git ls-files), and tools/pyhelpers."""
    listed = subprocess.run(["git", "ls-files", "--cached", "*.py"], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout.split()
    return {ROOT / p for p in listed if (ROOT / p).exists()} | set((ROOT / "tools" / "pyhelpers").rglob("*.py"))


def package_modules():
    """Every module of the checkout's packages, by dotted name."""
    return sorted(".".join(p.relative_to(ROOT).with_suffix("").parts) for p in python_files()
                  if not str(p.relative_to(ROOT)).startswith(NOT_PACKAGES) and p.name != "__init__.py")


def test_the_package_is_the_checkouts():
    assert wirelens_helpers.ROOT == ROOT


def test_every_folder_of_python_is_a_package():
    missing = sorted({str(folder.relative_to(ROOT)) for p in python_files()
                      if not str(p.relative_to(ROOT)).startswith(NOT_PACKAGES)
                      for folder in p.relative_to(ROOT).parents if folder != Path(".")
                      if not (ROOT / folder / "__init__.py").exists()})
    assert missing == [], f"add an __init__.py so `import` names the folder: {missing}"


def test_every_module_imports_from_anywhere(tmp_path):
    """Each module imports by its dotted name with the root on PYTHONPATH, from an unrelated directory."""
    code = ("import importlib, sys\nfailed = []\nfor name in sys.argv[1:]:\n    try:\n        importlib.import_module(name)\n"
            "    except Exception as exc:\n        failed.append(f'{name}: {type(exc).__name__}: {exc}')\nprint('\\n'.join(failed))")
    out = subprocess.run([sys.executable, "-c", code, *package_modules()], cwd=tmp_path, env=programs.environment(),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "", out.stdout + out.stderr


def test_envoy_is_the_checkouts_package_and_the_binary_is_the_wheels(tmp_path):
    code = "import envoy.render; from deploy.local import stack; print(envoy.render.__file__, stack.envoy_binary().is_file())"
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=programs.environment(), capture_output=True,
                         text=True, check=True)
    assert out.stdout.split() == [str(ROOT / "envoy" / "render.py"), "True"]


def test_imports_at_the_top_no_path_edits_no_import_hooks():
    # Generated code (build/python/gen) is the one path a test still adds: it is built, not a program.
    offenders = [f"{p.relative_to(ROOT)}:{n}: {line.strip()}" for p in python_files() if p != Path(__file__)
                 for n, line in enumerate(p.read_text().splitlines(), 1)
                 if "noqa: E402" in line or "sys.meta_path" in line
                 or ("sys.path.insert" in line and 'sys.path.insert(0, str(ROOT / "build" / "python" / "gen"))' not in line)]
    assert offenders == [], "import by package (`from deploy.local import stack`) at the top of the file"


def test_imports_name_the_package():
    """No bare `import stack`: a first-party module is imported through its package."""
    modules = package_modules()
    packages = {name.rsplit(".", i)[0] for name in modules for i in range(1, name.count(".") + 1)}
    first_party = {name.rsplit(".", 1)[-1] for name in modules} - packages
    offenders = []
    for p in python_files():
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.Import):
                offenders += [f"{p.relative_to(ROOT)}:{node.lineno}: import {a.name}" for a in node.names
                              if a.name in first_party]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in first_party:
                offenders.append(f"{p.relative_to(ROOT)}:{node.lineno}: from {node.module} import ...")
    assert offenders == [], offenders


def test_one_free_ports_and_one_ports_file_reader():
    defs = {name: [str(p.relative_to(ROOT)) for p in python_files()
                   if re.search(rf"^\s*def {name}\(", p.read_text(), re.M)]
            for name in ("free_ports", "read_ports", "post")}
    assert all(len(where) == 1 and where[0].startswith("tools/pyhelpers/") for where in defs.values()), defs
    assert importlib.import_module("deploy.local.stack").free_ports is free_ports


def test_free_ports_are_distinct():
    ports = free_ports(20)
    assert len(set(ports)) == 20


def test_a_port_handed_out_is_never_handed_out_again():
    # one at a time, each probe closed before the next: the kernel offers recent ports again (~4 repeats
    # expected in 500 draws from its range), which is how a cluster's node and the Collector once got one port
    ports = [free_port() for _ in range(500)]
    assert len(set(ports)) == 500


def test_wait_for_returns_the_probes_value_once_done():
    answers = iter([0, 0, 7])
    assert wait_for("the third answer", lambda: next(answers), interval_s=0.01) == 7
    answers = iter([1, 2, 3])
    assert wait_for("an answer above 2", lambda: next(answers), lambda n: n > 2, interval_s=0.01) == 3


def test_wait_for_fails_naming_what_was_missing_the_last_value_and_the_state():
    with pytest.raises(WaitTimeout) as failed:
        wait_for("the answer", lambda: "", timeout_s=0.2, interval_s=0.01, state=lambda: "queue: 3 pending")
    assert isinstance(failed.value, AssertionError)
    assert str(failed.value) == "timed out after 0.2s waiting for the answer; last seen: ''; queue: 3 pending"
    assert failed.value.last_seen == ""


def test_wait_for_gives_up_when_a_watched_process_exits():
    process = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    started = time.monotonic()
    with pytest.raises(WaitTimeout, match=rf"gave up waiting for the server: python\S* \(pid {process.pid}\) "
                                          "exited with code 3; last seen: False"):
        wait_for("the server", lambda: False, timeout_s=60, interval_s=0.01, processes=[process])
    assert time.monotonic() - started < 30, "it waited for the deadline instead of the process"


def test_wait_for_counts_the_exceptions_it_is_told_to_retry_as_not_yet():
    answers = iter([ConnectionRefusedError("not yet"), "up"])

    def server():
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert wait_for("the server", server, interval_s=0.01, retry_on=(OSError,)) == "up"
    with pytest.raises(WaitTimeout, match=r"last seen: ConnectionRefusedError\('not yet'\)"):
        wait_for("the server", lambda: server_refusing(), timeout_s=0.05, interval_s=0.01, retry_on=(OSError,))
    with pytest.raises(ZeroDivisionError):
        wait_for("the server", lambda: 1 / 0, interval_s=0.01, retry_on=(OSError,))


def server_refusing():
    raise ConnectionRefusedError("not yet")


def test_one_wait_for_and_no_other_polling_helper():
    defs = [f"{p.relative_to(ROOT)}" for p in python_files()
            for line in p.read_text().splitlines() if re.match(r"\s*def (wait_for|poll)\(", line)]
    assert defs == ["tools/pyhelpers/wirelens_helpers/wait.py"], \
        "poll under a deadline with wirelens_helpers.wait.wait_for"
