"""collector/hostmetrics.py: the per-stack part of collector/hostmetrics.yaml names each process by its command line.

That a real hostmetrics Collector then reports every component with procmetrics' numbers is
bench/process_metrics.py's job (a real stack, both sources into one ClickHouse); here: the rendered
file is valid YAML whose OTTL statements name exactly the commands the stack starts, quoting survives,
and the static file's pipeline uses what the rendered part defines."""

from __future__ import annotations

import io
import sys

import pytest
from ruamel.yaml import YAML

from collector import hostmetrics
from deploy.local import components, stack
from wirelens_helpers import ROOT


@pytest.fixture
def settings(tmp_path, monkeypatch):
    # The binaries need not be built for the commands to be rendered.
    monkeypatch.setattr(components, "require", lambda path, how: str(path))
    return stack.load_settings({"WIRELENS_STATE_DIR": str(tmp_path / "state")})


def rendered(settings) -> dict:
    return YAML(typ="safe").load(io.StringIO(hostmetrics.render(settings)))


def statements(settings) -> list[str]:
    return rendered(settings)["processors"]["transform/hostmetrics_stack"]["metric_statements"][0]["statements"]


def test_every_component_is_named_by_its_exact_command_line(settings):
    found = statements(settings)
    for component in components.COMPONENTS:
        if not component.enabled(settings):
            continue
        line = " ".join(component.command(settings))
        expected = (f'set(resource.attributes["service.name"], "{component.name}") where '
                    f'resource.attributes["process.command_line"] == "{line}"')
        assert expected in found, (component.name, found)
    own = " ".join(hostmetrics.command(settings))
    assert any(s.endswith(f'== "{own}"') and '"hostmetrics"' in s for s in found), found
    # Each component's state (ports, the state dir) is in its line, except Jaeger's (collector/hostmetrics.py).
    state = settings["WIRELENS_STATE_DIR"]
    assert any(state in s for s in found if '"envoy"' in s)


def test_the_clickhouse_engine_is_named_by_how_its_supervisor_starts_it(settings):
    # deploy/local/clickhouse_server.py: [sys.executable, abspath(__file__), "--engine", "--data-dir", DIR]
    data_dir = str(stack.state_dir(settings) / "clickhouse" / "data")
    engine = hostmetrics.command_line([sys.executable, str(ROOT / "deploy/local/clickhouse_server.py"),
                                       "--engine", "--data-dir", data_dir])
    suffixes = [s for s in statements(settings) if s.startswith('set(resource.attributes["service.name"], '
                                                                   '"clickhouse") where HasSuffix(')]
    assert len(suffixes) == 1, suffixes
    suffix = suffixes[0].split(", ", 2)[2].rsplit(")", 1)[0].strip('"')
    assert engine.endswith(suffix) and data_dir in suffix, (engine, suffix)
    source = (ROOT / "deploy/local/clickhouse_server.py").read_text()
    assert '[sys.executable, os.path.abspath(__file__), "--engine", "--data-dir", str(data_dir)]' in source, \
        "the supervisor starts the engine differently now: update collector/hostmetrics.py's pattern"


def test_quotes_and_backslashes_survive_yaml_and_ottl(settings, monkeypatch):
    odd = ["/opt/x y/rest-server", "-listen", 'a"b\\c']
    monkeypatch.setattr(components.BY_NAME["rest-service"], "command", lambda s: odd)
    line = [s for s in statements(settings) if '"rest-service"' in s][0]
    assert line.endswith('== "/opt/x y/rest-server -listen a\\"b\\\\c"'), line


def test_include_names_are_the_commands_executables(settings):
    include = rendered(settings)["receivers"]["host_metrics"]["scrapers"]["process"]["include"]
    assert include["match_type"] == "strict"
    assert {"envoy", "otelcol-wirelens", "logship", "procmetrics", "rest-server", "grpc-server",
            "jaeger"} <= set(include["names"]), include


def test_the_static_file_uses_the_rendered_processor_and_drops_the_rest(settings):
    static = YAML(typ="safe").load((ROOT / "collector" / "hostmetrics.yaml").read_text())
    pipeline = static["service"]["pipelines"]["metrics"]
    assert pipeline["receivers"] == ["host_metrics"]
    assert pipeline["processors"][0] == "transform/hostmetrics_stack"  # names first, then the filter drops
    assert "transform/hostmetrics_stack" in rendered(settings)["processors"]
    assert all(p in static["processors"] for p in pipeline["processors"][1:])
    conditions = static["processors"]["filter/hostmetrics"]["metrics"]
    assert 'resource.attributes["service.name"] == nil' in conditions["metric"]
    assert any('"wait"' in c for c in conditions["datapoint"])
