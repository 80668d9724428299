"""The Collector tier's Python side: the gateway/agent tier runner (collector/tier.py)."""
