"""wirelens inject: add the wirelens filter to an Envoy config you already run (envoy/INJECT.md).

Run as `python -m envoy.inject` from the checkout, or `bin/wirelens inject`. One job per module:

    model                the names it gives what it adds (and recognises as its own),
                         its options, its report, its error
    layout               configs read and written back as the user wrote them
    connection_managers  finding the HTTP connection managers of the static listeners
    edit                 adding wirelens to one and taking it out again
    ecds                 the filter's ECDS resource files and their live updates
    cli                  the command line
"""

from .cli import main
from .edit import inject, remove
from .layout import parse
from .model import ACCESS_LOG_NAME, DYNAMIC_MODULE_TYPE, HCM_TYPE, TRANSCODER_TYPE, WASM_TYPE, InjectError, Options

__all__ = ["ACCESS_LOG_NAME", "DYNAMIC_MODULE_TYPE", "HCM_TYPE", "TRANSCODER_TYPE", "WASM_TYPE", "InjectError", "Options",
           "inject", "main", "parse", "remove"]
