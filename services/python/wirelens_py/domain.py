"""Domain logic of the Python pair, shared by its REST and gRPC transports.

The same behaviour as the Go pair (internal/hello, mathsvc): the
same answers, the same errors with the same gRPC codes and messages.
"""

from __future__ import annotations

import time

import grpc

MODULUS = 100_000_007  # E1's 10^8+7
MAX_NUMBER = 10_000_000  # bounds the work a call can ask for, as in Go
BIG_ITEMS = 1000
DATA_LIST = [f"Item {i}" for i in range(BIG_ITEMS)]


class DomainError(Exception):
    """An error with a gRPC status code (internal/apierr)."""

    def __init__(self, code: grpc.StatusCode, message: str):
        super().__init__(message)
        self.code, self.message = code, message


def greeting(name: str) -> str:
    return "Hello, " + name


def factorial(number: int) -> int:
    """number! mod MODULUS; INVALID_ARGUMENT outside 0..MAX_NUMBER."""
    if number < 0 or number > MAX_NUMBER:
        raise DomainError(grpc.StatusCode.INVALID_ARGUMENT, f"number must be in 0..{MAX_NUMBER}, got {number}")
    result = 1
    for i in range(2, number + 1):
        result = result * i % MODULUS
    return result


def calculate_factorial(number: int) -> tuple[int, float]:
    """(number! mod MODULUS, seconds the computation took)."""
    start = time.perf_counter()
    value = factorial(number)
    return value, time.perf_counter() - start
