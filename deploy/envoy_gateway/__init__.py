"""Envoy Gateway: its resources rendered from the project's sources, and a standalone run of it."""
