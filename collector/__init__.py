"""The OpenTelemetry Collector: its build manifest and configs, logship and procmetrics (Go), and
the gateway tier runner beside the local stack (tier.py, this package's one module)."""
