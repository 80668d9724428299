"""`python -m envoy.inject`: the command behind `bin/wirelens inject` (envoy/inject/cli.py)."""

import sys

from .cli import main

sys.exit(main())
