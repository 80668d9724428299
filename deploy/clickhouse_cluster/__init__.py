"""A ClickHouse cluster of embedded-engine nodes on loopback, and the replication probe."""
