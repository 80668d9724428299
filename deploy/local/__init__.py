"""The local stack (make up / demo): every component on loopback, its settings, schema and status."""
