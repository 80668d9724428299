"""The Istio resources (WasmPlugin, Telemetry, mesh config), rendered from the project's sources."""
