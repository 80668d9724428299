"""The wirelens filter's settings in its plugin configuration: limits, defaults and checks, once for Python.

The filter (filters/core: its config module) reads these keys of its JSON
plugin configuration; every Python that writes them (envoy/render.py, `wirelens
inject`, the Envoy Gateway and Istio renderers, the local stack's settings)
checks them here, with one error text naming where a bad value came from.

    sample_rate               share of calls recorded, 0..1 (default 1)
    grpc_message_max_bytes    most bytes of a grpc-message stored, 0..1024 (default 128; 0: never)
    counterfactual_rate       share of recorded calls sized in the other encoding, 0..1 (default 0.01)
    counterfactual_max_bytes  most bytes read for one such estimate, 0..2^32-1 (default 65536)
"""

from __future__ import annotations

import argparse

# The filter's defaults and limits (filters/core/src: config, counterfactual DEFAULT_RATE, DEFAULT_MAX_BYTES).
SAMPLE_RATE_DEFAULT = 1
GRPC_MESSAGE_BYTES_DEFAULT = 128
GRPC_MESSAGE_BYTES_MAX = 1024
COUNTERFACTUAL_RATE_DEFAULT = 0.01
COUNTERFACTUAL_MAX_BYTES_DEFAULT = 64 * 1024
COUNTERFACTUAL_MAX_BYTES_MAX = 2**32 - 1  # a u32

SAMPLE_RATE_MEANING = "the share of calls recorded"
COUNTERFACTUAL_MEANING = "the share of recorded calls whose payloads are sized in the other protocol's encoding"


def check_sample_rate(value: str | float, name: str = "sample rate", meaning: str = SAMPLE_RATE_MEANING) -> float:
    """A sample rate in [0, 1], or ValueError naming where it came from."""
    try:
        rate = float(value)
    except (TypeError, ValueError):
        rate = float("nan")
    if not 0 <= rate <= 1:  # also NaN
        raise ValueError(f"{name}={value!r}: expected a number in [0, 1] ({meaning})")
    return rate


def check_counterfactual_rate(value: str | float, name: str = "counterfactual rate") -> float:
    """The filter's counterfactual_rate in [0, 1], or ValueError naming where it came from."""
    return check_sample_rate(value, name, COUNTERFACTUAL_MEANING)


def _whole_number(value: str | int, name: str, most: int, meaning: str) -> int:
    text = str(value).strip()
    if not (text.isascii() and text.isdigit()) or int(text) > most:
        raise ValueError(f"{name}={value!r}: expected a whole number of bytes in [0, {most}] ({meaning})")
    return int(text)


def check_counterfactual_max_bytes(value: str | int, name: str = "counterfactual max bytes") -> int:
    """The filter's counterfactual_max_bytes, or ValueError naming where it came from."""
    return _whole_number(value, name, COUNTERFACTUAL_MAX_BYTES_MAX,
                         "the most body bytes, or bytes of one streamed message, read for one counterfactual "
                         "estimate; larger ones get the reason too_large")


def check_grpc_message_bytes(value: str | int, name: str = "grpc-message bytes") -> int:
    """The filter's grpc_message_max_bytes (0 = never publish), or ValueError naming where it came from."""
    return _whole_number(value, name, GRPC_MESSAGE_BYTES_MAX, "0: the grpc-message is never stored")


# Each setting's check, in the order a configuration carries them.
CHECKS = {
    "sample_rate": check_sample_rate,
    "grpc_message_max_bytes": check_grpc_message_bytes,
    "counterfactual_rate": check_counterfactual_rate,
    "counterfactual_max_bytes": check_counterfactual_max_bytes,
}
DEFAULTS = {
    "sample_rate": SAMPLE_RATE_DEFAULT,
    "grpc_message_max_bytes": GRPC_MESSAGE_BYTES_DEFAULT,
    "counterfactual_rate": COUNTERFACTUAL_RATE_DEFAULT,
    "counterfactual_max_bytes": COUNTERFACTUAL_MAX_BYTES_DEFAULT,
}


def with_settings(config: dict, sample_rate: float | None = None, grpc_message_max_bytes: int | None = None,
                  counterfactual_rate: float | None = None, counterfactual_max_bytes: int | None = None) -> dict:
    """A copy of a plugin configuration with the settings given checked and set (None: left as it is)."""
    given = {"sample_rate": sample_rate, "grpc_message_max_bytes": grpc_message_max_bytes,
             "counterfactual_rate": counterfactual_rate, "counterfactual_max_bytes": counterfactual_max_bytes}
    config = dict(config)
    for key, value in given.items():
        if value is not None:
            config[key] = CHECKS[key](value)
    return config


def argument_type(check, flag: str):
    """An argparse type from one of the checks above: a bad value is a usage error naming the flag."""
    def convert(value: str):
        try:
            return check(value, flag)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return convert


def add_sample_rate_flag(parser, defaults: str = "the filter's") -> None:
    parser.add_argument("--sample-rate", metavar="R", type=argument_type(check_sample_rate, "--sample-rate"),
                        help=f"the filter's sample_rate: share of calls recorded, 0..1 (default: {defaults} "
                             f"{SAMPLE_RATE_DEFAULT:g}); below 1 the access log keeps only recorded calls")


def add_grpc_message_bytes_flag(parser, defaults: str = "the filter's") -> None:
    parser.add_argument("--grpc-message-bytes", metavar="N",
                        type=argument_type(check_grpc_message_bytes, "--grpc-message-bytes"),
                        help="the filter's grpc_message_max_bytes: most bytes of a grpc-message (which can echo "
                             f"client input) stored, 0..{GRPC_MESSAGE_BYTES_MAX}; 0: never (default: {defaults} "
                             f"{GRPC_MESSAGE_BYTES_DEFAULT})")


def add_counterfactual_flags(parser, defaults: str = "the filter's") -> None:
    """--counterfactual-rate and --counterfactual-max-bytes, checked (every renderer and inject take them).

    defaults says where an absent flag's value comes from, e.g. "the plugin configuration's, else the filter's".
    """
    parser.add_argument("--counterfactual-rate", metavar="R",
                        type=argument_type(check_counterfactual_rate, "--counterfactual-rate"),
                        help="the filter's counterfactual_rate: share of recorded calls whose payloads are sized in "
                             f"the other protocol's encoding, 0..1 (default: {defaults} "
                             f"{COUNTERFACTUAL_RATE_DEFAULT:g}; needs the messages' schema; docs/what-if.md)")
    parser.add_argument("--counterfactual-max-bytes", metavar="N",
                        type=argument_type(check_counterfactual_max_bytes, "--counterfactual-max-bytes"),
                        help="the filter's counterfactual_max_bytes: most bytes of a body (of one message, on "
                             f"streams) read for one estimate; larger ones get the reason too_large (default: "
                             f"{defaults} {COUNTERFACTUAL_MAX_BYTES_DEFAULT})")
