"""End-to-end tests: the whole stack on free ports, exact counts in ClickHouse, spans in Jaeger."""
