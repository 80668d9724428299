"""Facts written in more than one place agree with their source."""

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def go_mod_version() -> str:
    return re.search(r"^go (\d+\.\d+)", (ROOT / "go.mod").read_text(), re.M).group(1)


def test_readme_asks_for_the_go_version_go_mod_needs():
    asked = re.search(r"Needs Go ≥ (\d+\.\d+)", (ROOT / "README.md").read_text()).group(1)
    assert asked == go_mod_version()


def test_check_prereqs_reads_the_go_version_from_go_mod(tmp_path):
    fake = tmp_path / "go"
    fake.write_text("#!/bin/sh\necho go1.1.0\n")
    fake.chmod(0o755)
    result = subprocess.run([str(ROOT / "tools" / "check-prereqs")], capture_output=True, text=True,
                            env={"PATH": f"{tmp_path}:/usr/bin:/bin"})
    assert f"go >= {go_mod_version()}" in result.stderr, result.stderr


def test_documents_named_in_the_local_stacks_and_experiments_docstrings_exist():
    for script in [*(ROOT / "deploy" / "local").glob("*.py"), *(ROOT / "experiments").glob("*.py")]:
        docstring = script.read_text().split('"""')[1]
        for name in re.findall(r"([\w./-]+\.md)\b", docstring):
            if not name.startswith(("build/", "/")):  # outputs the script writes
                assert (ROOT / name).exists(), f"{script.name} names {name}"


def test_readme_layout_table_matches_the_top_level_folders():
    """Every tracked top-level folder has a row in README.md's "Layout" table, and every row a folder."""
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    folders = {path.split("/", 1)[0] for path in tracked if "/" in path and not path.startswith(".")}
    layout = (ROOT / "README.md").read_text().split("## Layout", 1)[1].split("\n## ", 1)[0]
    rows = set(re.findall(r"^\| `([^`/]+)/` \|", layout, re.M))
    assert folders - rows == set(), f"folders without a row in README.md's Layout table: {sorted(folders - rows)}"
    assert rows - folders == set(), f"Layout rows naming no tracked folder: {sorted(rows - folders)}"
