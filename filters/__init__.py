"""The filter's Python side: the record's one definition and its generator (filters/recordgen.py)."""
