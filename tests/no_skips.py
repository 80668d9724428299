"""A pytest plugin (`-p tests.no_skips`) for `make test`: a skipped test fails the run, and the run's counts go to
build/test-counts/<name>.json for the summary `make test` ends with.

A check that skips itself when a tool or build is missing passes while checking nothing (issue 33); every test here
builds what it needs or fails naming it. WIRELENS_TEST_COUNTS names the run (unit, e2e); without it nothing is
written and only the skip rule applies.
"""
import json
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COUNTED = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    counts = {k: len(terminalreporter.stats.get(k, [])) for k in COUNTED}  # as pytest's own summary line counts
    skipped = terminalreporter.stats.get("skipped", []) + terminalreporter.stats.get("xfailed", [])
    name = os.environ.get("WIRELENS_TEST_COUNTS")
    if name:
        out = ROOT / "build" / "test-counts" / f"{name}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(counts) + "\n")
    terminalreporter.write_line(f"skipped tests: {len(skipped)} (must be 0)")
    for report in skipped:
        terminalreporter.write_line(f"  skipped: {report.nodeid}: {report.longrepr}", red=True)


def pytest_sessionfinish(session, exitstatus):
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) + reporter.stats.get("xfailed", []) if reporter else []
    if skipped and exitstatus == 0:
        session.exitstatus = 1


def main(names: list[str]) -> int:
    """`make test`'s last line: each run's counts and the skipped total, which must be 0."""
    totals, parts = {k: 0 for k in COUNTED}, []
    for name in names:
        path = ROOT / "build" / "test-counts" / f"{name}.json"
        if not path.exists():
            print(f"make test: no counts from the {name} tests ({path.relative_to(ROOT)} is missing)")
            return 1
        counts = json.loads(path.read_text())
        parts.append(f"{name} {counts['passed']} passed")
        totals = {k: totals[k] + counts.get(k, 0) for k in COUNTED}
    skipped = totals["skipped"] + totals["xfailed"]
    print(f"make test: {', '.join(parts)}; {totals['failed'] + totals['error']} failed, {skipped} skipped")
    return 1 if skipped or totals["failed"] or totals["error"] else 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
