"""The Python pair of wirelens' paired services (services/python/README.md)."""
