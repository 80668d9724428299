"""docs/experiments.md is what its two runs' results render to, not numbers typed by hand.

The E1-E5 part re-renders from docs/experiments.json (experiments.py --rerender); the
"Protocol versus stack" section holds, verbatim, what docs/experiments-stacks.json renders to
(stacks.py --rerender), between its hand-written introduction and its Reading.
"""

import json
from pathlib import Path

from experiments import experiments
from experiments import stacks


ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "experiments.md"


def test_the_five_experiments_rerender_byte_for_byte(tmp_path):
    rendered = experiments.rerender(ROOT / "docs" / "experiments.json", tmp_path / "experiments.md").read_text()
    doc = DOC.read_text()
    assert stacks.DOCS_SECTION in doc, "docs/experiments.md has no protocol-versus-stack section"
    assert doc.split(stacks.DOCS_SECTION, 1)[0].rstrip("\n") == rendered.rstrip("\n"), \
        "docs/experiments.md (E1-E5) differs from experiments.py --rerender docs/experiments.json"


def test_the_per_stack_run_is_in_the_doc_as_its_results_render():
    results = json.loads((ROOT / "docs" / "experiments-stacks.json").read_text())
    assert results["size"] == "full" and set(results["stacks"]) == {"go", "python", "jvm"}, results["stacks"]
    assert {s["exp"] for s in results["steps"]} == {"cpu", "e1", "e2", "e3", "e4"}, "not all four experiments"
    section = DOC.read_text().split(stacks.DOCS_SECTION, 1)[1]
    generated = stacks.docs_section(results).strip("\n")
    assert generated in section, \
        "docs/experiments.md's protocol-versus-stack section differs from docs/experiments-stacks.json rendered"
