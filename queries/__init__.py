"""Saved queries and rollups over ClickHouse: the runners (saved.py, rollup.py) and the schema."""
