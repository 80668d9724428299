"""Every config wirelens renders stays byte for byte what it was (issue 28, "Behaviour stays").

tests/unit/rendered_goldens.py renders, from fixed inputs, the local Envoy
template (envoy/render.py), inject's output and report on the eight user
configs of tests/e2e/user_configs (and with other options, ECDS included),
the Envoy Gateway resources and the Istio resources; the goldens are the
files under tests/unit/goldens/rendered. A refactoring must leave them
unchanged. A change meant to alter a rendered config rewrites them, and the
diff of the goldens shows what it altered:

    .venv/bin/python -m tests.unit.rendered_goldens --update
"""

from __future__ import annotations

from tests.unit import rendered_goldens


def test_every_rendered_config_equals_its_golden():
    problems = rendered_goldens.differences(rendered_goldens.rendered(), rendered_goldens.golden_files())
    assert not problems, (f"{len(problems)} rendered config(s) differ from tests/unit/goldens/rendered "
                          "(if the change is meant: python -m tests.unit.rendered_goldens --update):\n\n"
                          + "\n".join(problems))


def test_the_goldens_cover_every_renderer():
    names = rendered_goldens.golden_files()
    for prefix in ("local/", "inject/", "envoy-gateway/", "istio/"):
        assert any(name.startswith(prefix) for name in names), prefix
    user_configs = [name for name in names if name.startswith("inject/") and name.count(".") == 1
                    and not name.endswith(".report")]
    assert len(user_configs) == 8, user_configs
