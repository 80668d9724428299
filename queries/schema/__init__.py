"""ClickHouse DDL, applied in order by the local stack's schema step."""
