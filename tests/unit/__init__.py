"""Unit tests: no stack, each component alone (some start a ClickHouse engine or Envoy of their
own).
"""
