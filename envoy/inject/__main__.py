"""`python -m envoy.inject`: the command behind `bin/wirelens inject` (envoy/inject/cli.py)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
