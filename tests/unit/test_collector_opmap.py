"""The Collector's copy of the operation map (collector/opmap.py): the same keys as the filter, the labels
the filter derives, and a fragment that restores them only for the (operation, key) it knows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from collector import opmap
from filters import recordgen

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("labels, key", [
    # The vectors of filters/core/src/opmap/key.rs (its test `vectors`): both sides compute the same key.
    (("", "", "", "", ""), "tq2v"),
    (("hello.SayHello", "wirelens.v1.Hello", "SayHello", "unary", ""), "igg4"),
    (("hello.SayHello", "wirelens.v1.Hello", "SayHello", "unary", "/v1/hello"), "dnjv"),
    (("catalog.GetProduct", "wirelens.v1.Catalog", "GetProduct", "unary", "/v1/products/{id}"), "feno"),
    (("x", "", "", "", "/a,b%"), "bkjm"),
])
def test_the_key_is_the_filters(labels, key):
    assert opmap.labels_key(*labels) == key
    assert len(key) == opmap.KEY_LEN


def test_the_key_hashes_each_value_with_its_length():
    assert opmap.labels_key("ab", "c", "", "", "") != opmap.labels_key("a", "bc", "", "", "")


def test_label_sets_take_the_filters_defaults():
    config = {"operations": [
        {"grpc_path": "/wirelens.v1.Hello/SayHello", "streaming": "unary",
         "http_rules": [{"method": "post", "pattern": "/v1/hello"}, {"method": "GET", "pattern": "/v1/hi"}]},
        {"operation": "health", "http_rules": [{"method": "GET", "pattern": "/healthz"}]},
        {"grpc_path": "/a.B/C", "operation": "renamed", "rpc_service": "svc", "rpc_method": None},
    ]}
    sets = opmap.label_sets(config)
    hello = {"rpc.service": "wirelens.v1.Hello", "rpc.method": "SayHello", "wirelens.streaming": "unary"}
    assert sets == [
        ("hello.SayHello", opmap.labels_key("hello.SayHello", "wirelens.v1.Hello", "SayHello", "unary", ""), hello),
        ("hello.SayHello", "dnjv", {**hello, "http.route": "/v1/hello"}),
        ("hello.SayHello", opmap.labels_key("hello.SayHello", "wirelens.v1.Hello", "SayHello", "unary", "/v1/hi"),
         {**hello, "http.route": "/v1/hi"}),
        # no gRPC path: no service or method (left out, as the record omits empty values)
        ("health", opmap.labels_key("health", "", "", "", ""), {}),
        ("health", opmap.labels_key("health", "", "", "", "/healthz"), {"http.route": "/healthz"}),
        # rpc_method null: the default from the path
        ("renamed", opmap.labels_key("renamed", "svc", "C", "", ""), {"rpc.service": "svc", "rpc.method": "C"}),
    ]


def test_each_known_key_restores_its_labels_and_the_key_goes():
    stmts = opmap.statements("log", [{"operations": [
        {"grpc_path": "/wirelens.v1.Hello/SayHello", "streaming": "unary",
         "http_rules": [{"method": "POST", "pattern": "/v1/hello"}]}]}])
    assert stmts == [
        'merge_maps(log.attributes, {"rpc.service":"wirelens.v1.Hello","rpc.method":"SayHello",'
        '"wirelens.streaming":"unary","wirelens.opmap.resolved":"1"}, "upsert") '
        'where log.attributes["wirelens.opmap.key"] == "igg4" and log.attributes["wirelens.operation"] == '
        '"hello.SayHello"',
        'merge_maps(log.attributes, {"rpc.service":"wirelens.v1.Hello","rpc.method":"SayHello",'
        '"wirelens.streaming":"unary","http.route":"/v1/hello","wirelens.opmap.resolved":"1"}, "upsert") '
        'where log.attributes["wirelens.opmap.key"] == "dnjv" and log.attributes["wirelens.operation"] == '
        '"hello.SayHello"',
        'delete_key(log.attributes, "wirelens.opmap.key") where log.attributes["wirelens.opmap.resolved"] != nil',
        'delete_key(log.attributes, "wirelens.opmap.resolved")',
    ]


def test_two_versions_of_a_map_are_both_served_and_a_clash_restores_neither():
    v1 = {"operations": [{"grpc_path": "/wirelens.v1.Hello/SayHello", "streaming": "unary"}]}
    v2 = {"operations": [{"grpc_path": "/wirelens.v2.Hello/SayHello", "streaming": "unary"}]}
    both = opmap.statements("span", [v1, v2])
    assert sum("merge_maps" in s for s in both) == 2  # same operation name, two keys: each its own labels
    assert any('"wirelens.v1.Hello"' in s for s in both) and any('"wirelens.v2.Hello"' in s for s in both)
    # The same map twice: one statement per (operation, key).
    assert sum("merge_maps" in s for s in opmap.statements("span", [v1, v1])) == 1


def test_the_fragment_replaces_the_configs_statements(tmp_path):
    if not (ROOT / "build" / "opmap.json").exists():
        pytest.fail("build/opmap.json is missing: make proto builds it")
    out = opmap.write(ROOT / "build" / "opmap.json", tmp_path / "fragment.yaml")
    fragment = YAML(typ="safe", pure=True).load(out.read_text())
    config = YAML(typ="safe", pure=True).load((ROOT / "collector" / "config.yaml").read_text())
    processor = fragment["processors"][opmap.PROCESSOR]
    assert set(fragment) == {"processors"} and set(fragment["processors"]) == {opmap.PROCESSOR}
    assert opmap.PROCESSOR in config["processors"]
    for pipeline in ("logs", "traces"):
        processors = config["service"]["pipelines"][pipeline]["processors"]
        assert processors.index(opmap.PROCESSOR) == processors.index("transform/wirelens_record") + 1
    operations = json.loads((ROOT / "build" / "opmap.json").read_text())["operations"]
    rules = sum(len(op.get("http_rules") or []) for op in operations)
    for ctx, group in (("log", "log_statements"), ("span", "trace_statements")):
        statements = processor[group][0]["statements"]
        assert sum("merge_maps" in s for s in statements) == len(operations) + rules
        assert statements[-2:] == opmap.cleanup(ctx)
        # the config's own statements, without the fragment: only the clean-up
        assert config["processors"][opmap.PROCESSOR][group][0]["statements"] == opmap.cleanup(ctx)[-1:]


def test_the_record_table_names_the_key_the_collector_reads():
    record = recordgen.load()
    assert record.key.attribute == opmap.KEY_ATTRIBUTE
    assert [record.by_wire(w).attribute for w in record.restored] == list(opmap.LABELS)
