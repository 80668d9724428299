"""The reference experiments E1-E5 (make experiments) on the Go, Python and JVM stacks."""
