"""The benchmarks (make bench): filter cost, instructions per call, ingest, queries, soak, Envoy
kill.
"""
