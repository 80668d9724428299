"""Unit tests of the local-stack tooling: settings, port checks, Envoy rendering, SQL helpers."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import socket
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from envoy import render, wiring
from wirelens_helpers import clickhouse  # ClickHouse over HTTP
from wirelens_helpers.ports import free_port
from deploy.local import stack

ROOT = Path(__file__).resolve().parents[2]


def test_ports_come_from_ports_env_and_environment_overrides_them():
    settings = stack.load_settings({"WIRELENS_ENVOY_PORT": "12345"})
    assert settings["WIRELENS_ENVOY_PORT"] == "12345"
    assert settings["WIRELENS_CLICKHOUSE_HTTP_PORT"] == "8123"
    assert settings["WIRELENS_CLICKHOUSE_ENDPOINT"].startswith("tcp://127.0.0.1:9000")


def test_a_bad_port_names_the_variable():
    with pytest.raises(stack.StackError, match="WIRELENS_GRPC_PORT='http' is not a valid port"):
        stack.load_settings({"WIRELENS_GRPC_PORT": "http"})


def test_taken_port_names_the_port_variable_and_holder():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        with pytest.raises(stack.StackError) as error:
            stack.check_port_free(port, "WIRELENS_ENVOY_PORT", "envoy")
    message = str(error.value)
    assert f"port {port} (WIRELENS_ENVOY_PORT) is already taken by pid {os.getpid()}" in message
    assert "envoy:" in message


def test_every_component_port_is_a_setting():
    settings = stack.load_settings({})
    for component in stack.COMPONENTS:
        for variable in component.ports:
            assert variable in settings, (component.name, variable)


def test_rendered_envoy_config_carries_every_record_field(tmp_path):
    ports = stack.load_settings({})
    plugin_config = json.dumps({"operations": []})
    text = render.render(ports, tmp_path / "f.wasm", plugin_config, tmp_path / "d.pb")
    assert "${" not in text
    config = YAML(typ="safe").load(text)
    hcms = [chain["filters"][0]["typed_config"] for listener in config["static_resources"]["listeners"]
            for chain in listener["filter_chains"]]
    for hcm in hcms:
        (log,) = hcm["access_log"]
        attributes = {a["key"]: a["value"]["string_value"] for a in log["typed_config"]["attributes"]["values"]}
        assert attributes == {name: fmt for name, fmt, _ in wiring.RECORD_FIELDS}
        tags = {t["tag"]: t["value"] for t in hcm["tracing"]["custom_tags"]}
        assert tags == {name: fmt for name, fmt, is_tag in wiring.RECORD_FIELDS if is_tag}
        wasm = hcm["http_filters"][0]["typed_config"]["config"]
        assert wasm["failure_policy"] == "FAIL_OPEN"
    # The plugin configuration is embedded as one string that decodes back to the JSON.
    configs = [json.loads(hcm["http_filters"][0]["typed_config"]["config"]["configuration"]["value"])
               for hcm in hcms]
    assert configs == [{"operations": []}, {"operations": [], "rest_transcoded": True}]


def test_file_sink_writes_the_same_attributes_as_json_lines(tmp_path):
    ports = stack.load_settings({})
    text = render.render(ports, tmp_path / "f.wasm", "{}", tmp_path / "d.pb", access_log="file",
                         access_log_path=tmp_path / "access.jsonl")
    config = YAML(typ="safe").load(text)
    (log,) = config["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]["access_log"]
    assert log["typed_config"]["path"] == str(tmp_path / "access.jsonl")
    assert log["typed_config"]["log_format"]["json_format"]["attributes"] == {
        name: fmt for name, fmt, _ in wiring.RECORD_FIELDS}


def test_render_refuses_a_missing_port(tmp_path):
    with pytest.raises(ValueError, match="WIRELENS_GRPC_PORT"):
        render.render({"WIRELENS_ENVOY_PORT": "1"}, tmp_path / "f.wasm", "{}", tmp_path / "d.pb")


def test_split_sql_keeps_statements_and_drops_comments():
    text = "-- a comment; with a semicolon\nCREATE DATABASE x;\n\nSELECT 1\nFROM y;\n"
    assert stack.split_sql(text) == ["CREATE DATABASE x", "SELECT 1\nFROM y"]


def test_schema_files_split_into_idempotent_statements():
    for path in (ROOT / "queries" / "schema").glob("*.sql"):
        for statement in stack.split_sql(path.read_text()):
            # ALTER ... MODIFY TTL re-applies the configured retention, MODIFY COLUMN ... CODEC a column's
            # codec, MODIFY COLUMN ... MATERIALIZED its expression (type unchanged: metadata only),
            # CREATE OR REPLACE the current definition of a view or a function, DROP VIEW IF EXISTS removes
            # an older schema's view: idempotent too.
            assert ("IF NOT EXISTS" in statement
                    or re.match(r"ALTER TABLE wirelens\.\w+\s+MODIFY (TTL|COLUMN \w+ (CODEC\(|\S+ MATERIALIZED ))",
                                statement)
                    or statement.startswith("DROP VIEW IF EXISTS ")
                    or statement.startswith(("CREATE OR REPLACE MATERIALIZED VIEW ", "CREATE OR REPLACE VIEW ",
                                             "CREATE OR REPLACE FUNCTION "))), \
                (path.name, statement[:60])


def test_saved_queries_open_with_their_question_and_are_parameterized():
    for path in [*(ROOT / "queries").glob("*.sql"), *(ROOT / "queries" / "rollup").glob("*.sql")]:
        text = path.read_text()
        assert text.startswith("-- Question:"), path.name
        assert "{since:DateTime64(3)}" in text and "{until:DateTime64(3)}" in text, path.name


def test_durations_and_windows():
    assert clickhouse.parse_duration("15m") == dt.timedelta(minutes=15)
    with pytest.raises(clickhouse.QueryError, match="30x"):
        clickhouse.parse_duration("30x")
    end = dt.datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=dt.timezone.utc)
    assert clickhouse.window(dt.timedelta(hours=1), end) == {
        "since": "2026-01-02 02:04:05.678", "until": "2026-01-02 03:04:05.678"}


def test_unreachable_clickhouse_names_the_url():
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(clickhouse.QueryError, match=f"not reachable at {url}"):
        clickhouse.run(url, "SELECT 1", {})


def test_the_collector_expands_every_short_name_of_the_record():
    """collector/config.yaml maps each short name the filter publishes (filters/record.yaml, the
    record's one definition) to its attribute, on logs and spans, and makes exactly the integer
    keys (filters/README.md) int span tags."""
    import re
    short = wiring.record_short_names()
    assert len(short) == 37 and len(set(short.values())) == 37
    readme = (ROOT / "filters" / "README.md").read_text()
    numbers = re.findall(r"^\| `([a-z_.]+)` \| number \|", readme, re.M)
    # 0.25 stays a double
    integers = [k for k in numbers if k not in ("wirelens.sample_rate", "wirelens.counterfactual.rate")]
    assert len(integers) == 26, integers
    config = (ROOT / "collector" / "config.yaml").read_text()
    logs = dict(re.findall(r'set\(log\.attributes\["([a-z_.]+)"\], log\.cache\["(\w+)"\]\)', config))
    # and the operation map's key of a format-2 record (collector/opmap.py restores the labels by it)
    key = {"wirelens.opmap.key": "ok"}
    assert logs == {**short, **key}
    span_ints = dict(re.findall(r'set\(span\.attributes\["([a-z_.]+)"\], Int\(span\.cache\["(\w+)"\]\)\)',
                                config))
    span_others = dict(re.findall(r'set\(span\.attributes\["([a-z_.]+)"\], span\.cache\["(\w+)"\]\)', config))
    span_doubles = dict(re.findall(r'set\(span\.attributes\["([a-z_.]+)"\], Double\(span\.cache\["(\w+)"\]\)\)',
                                   config))
    assert sorted(span_ints) == sorted(integers)
    assert sorted(span_doubles) == ["wirelens.counterfactual.rate", "wirelens.sample_rate"]
    assert {**span_ints, **span_doubles, **span_others} == {**short, **key}


def test_experiment_load_wording_tells_other_work_from_the_runs_own_load():
    from experiments import experiment_report

    busy_machine = experiment_report.load_line(60, 5.9, 6.0, 2, session_start_load=5.5)
    assert "Other work kept the machine overloaded (load 5.5" in busy_machine
    own_load = experiment_report.load_line(60, 0.2, 5.9, 2, session_start_load=0.2)
    assert "quiet when the session started" in own_load and "overloaded" not in own_load
    quiet = experiment_report.load_line(60, 0.2, 1.1, 2, session_start_load=0.2)
    assert quiet == "Ran in 60 s; load average 0.20 before, 1.10 after, on 2 cores."
