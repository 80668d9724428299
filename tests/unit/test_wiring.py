"""envoy/wiring.py is the one library of Envoy fragments, envoy/plugin_settings.py the one check of the filter's settings.

The local template (envoy/envoy.yaml.tmpl) keeps its hand-laid YAML (comments,
anchors, byte-identical output), so its filter, tracer and Collector cluster are
checked here against the fragments: a change to one without the other fails.
"""

from __future__ import annotations

import json

import pytest
from ruamel.yaml import YAML

from deploy.local import stack
from envoy import plugin_settings, render, wiring


def _local_config(tmp_path) -> tuple[dict, dict, str]:
    settings = stack.load_settings({})
    plugin_config = {"operations": [], "sample_rate": 0.5}
    text = render.render(settings, tmp_path / "f.wasm", json.dumps(plugin_config), tmp_path / "d.pb")
    return YAML(typ="safe").load(text), settings, wiring.plugin_configuration(plugin_config)


def test_the_local_template_is_the_fragments(tmp_path):
    config, settings, configuration = _local_config(tmp_path)
    listeners = {listener["name"]: listener["filter_chains"][0]["filters"][0]["typed_config"]
                 for listener in config["static_resources"]["listeners"]}
    transcoded_configuration = wiring.plugin_configuration({**json.loads(configuration), "rest_transcoded": True})
    expected_filters = {
        "wirelens_ingress": wiring.wasm_filter(configuration, tmp_path / "f.wasm"),
        "wirelens_transcoded": wiring.wasm_filter(transcoded_configuration, tmp_path / "f.wasm",
                                                  config_name="wirelens_transcoded"),
    }
    for name, hcm in listeners.items():
        assert hcm["http_filters"][0] == expected_filters[name], name
        assert hcm["tracing"] == wiring.tracing(), name
        assert hcm["access_log"] == [wiring.access_logger("otlp", recorded_only=True)], name
    (cluster,) = [c for c in config["static_resources"]["clusters"] if c["name"] == wiring.OTEL_COLLECTOR_CLUSTER]
    assert cluster == wiring.otlp_cluster(wiring.OTEL_COLLECTOR_CLUSTER, "127.0.0.1",
                                          int(settings["WIRELENS_COLLECTOR_OTLP_PORT"]))


@pytest.mark.parametrize("key, bad, good", [
    ("sample_rate", "1.5", 0.25),
    ("grpc_message_max_bytes", plugin_settings.GRPC_MESSAGE_BYTES_MAX + 1, plugin_settings.GRPC_MESSAGE_BYTES_MAX),
    ("counterfactual_rate", "nan", 1.0),
    ("counterfactual_max_bytes", -1, plugin_settings.COUNTERFACTUAL_MAX_BYTES_MAX),
])
def test_every_setting_is_checked_in_one_place(key, bad, good):
    assert plugin_settings.with_settings({"operations": []}, **{key: good}) == {"operations": [], key: good}
    with pytest.raises(ValueError) as error:
        plugin_settings.with_settings({}, **{key: bad})
    assert str(error.value).startswith(f"{key.replace('_', ' ').replace('grpc message max', 'grpc-message')}=")
    assert set(plugin_settings.CHECKS) == set(plugin_settings.DEFAULTS)
