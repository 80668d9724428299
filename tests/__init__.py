"""The tests: unit (make test-unit) and end to end on the real stack (make test-e2e)."""
