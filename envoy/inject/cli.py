"""wirelens inject: add the wirelens filter to an Envoy config you already run.

    wirelens inject envoy.yaml > envoy-wirelens.yaml          add wirelens to every HTTP connection manager
    wirelens inject --diff envoy.yaml                         show the change instead
    wirelens inject --remove envoy-wirelens.yaml              take it out again
    wirelens inject --ecds-dir /etc/envoy/wirelens envoy.yaml serve the filter through ECDS (live updates)
    wirelens inject --update-ecds --ecds-dir DIR --sample-rate 0.1   change it live
    wirelens inject --update-ecds --ecds-dir DIR --counterfactual-rate 1   size every recorded call's payloads
    wirelens inject --collector-config collector-opmap.yaml envoy.yaml > envoy-wirelens.yaml
                                                              also write the Collector's copy of the operation map
    wirelens inject --access-log-path /var/log/wirelens/access.jsonl --agent-config ship-access-log.sh envoy.yaml
                                                              also write the agent that ships the access log

In every HTTP connection manager of the bootstrap's static listeners (or
those named with --listener) it puts the wirelens filter first among
the http_filters (failing open: the Wasm build, or with --module native the
Envoy dynamic module), appends an access log that carries the
per-call record, and either adds OpenTelemetry tracing or, where the HCM
already traces, adds wirelens' custom tags to the tracer it has. Everything
else is left as it was; YAML keeps its comments and layout. Running it twice
gives the same output, and --remove gives back the original.

The record is durable by default: Envoy appends it to a JSON-lines file
(--access-log-path) and an agent beside Envoy ships the file to the
Collector (--agent logship: its command is printed, --agent-config writes
it), so a Collector restart or outage loses nothing. --access-log otlp has
Envoy send it straight to the Collector instead, which drops every record
made while the Collector is unreachable (envoy/INJECT.md, "The durable path").

The operation map comes from a descriptor set of your services
(protoc --include_imports --descriptor_set_out), built by proto/opmap.py,
or, when there is none, from the descriptor your grpc_json_transcoder uses;
with the schema of its messages ("descriptors") unless --no-descriptors.

What it recognises as its own (and --remove takes out): http filters named
`wirelens` / `wirelens_transcoded`, running the wasm root context
`wirelens` or the dynamic module's filter `wirelens`, access logs named `wirelens.access_log`,
custom tags named `wirelens.*`, tracing whose provider exports to the cluster
`wirelens_otel_collector`, and that cluster.
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from pathlib import Path

from envoy import plugin_settings, wiring

from . import agent
from .ecds import update_ecds, write_atomically, write_ecds
from .edit import inject, remove
from .layout import parse
from .model import GUIDE, InjectError, Options

ROOT = Path(__file__).resolve().parents[2]


def _collector(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"{value!r}: expected HOST:PORT of the Collector's OTLP/gRPC receiver")
    return host.strip("[]"), int(port)


def _port(value: str) -> int:
    if not value.isdigit() or not 0 < int(value) < 65536:
        raise argparse.ArgumentTypeError(f"{value!r}: expected a TCP port (1-65535)")
    return int(value)


def _size(value: str) -> int:
    if not value.isdigit():
        raise argparse.ArgumentTypeError(f"{value!r}: expected a number of bytes (0 or more)")
    return int(value)


def build_parser() -> argparse.ArgumentParser:
    default_wasm = ROOT / "build" / "wirelens_filter.wasm"
    parser = argparse.ArgumentParser(
        prog="wirelens inject", description="\n\n".join(__doc__.split("\n\n")[1:4]),
        epilog=f"Guide: {GUIDE}. What was changed is reported on stderr; the config goes to stdout or -o.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config", nargs="?", help="Envoy v3 bootstrap, YAML or JSON ('-' for stdin)")
    parser.add_argument("-o", "--output", help="write the config here instead of stdout (may be the input)")
    parser.add_argument("--diff", action="store_true",
                        help="print a unified diff of the change instead of the config (also with --remove)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--remove", action="store_true", help="take wirelens out again (inverse of the injection)")
    mode.add_argument("--update-ecds", action="store_true",
                      help="rewrite the ECDS resources in --ecds-dir with these options; Envoy picks them up live")
    what = parser.add_argument_group("what the filter knows")
    what.add_argument("--descriptor-set", metavar="FILE",
                      help="your services' descriptor set (protoc --include_imports --descriptor_set_out); "
                           "default: the one your grpc_json_transcoder names, if any")
    what.add_argument("--no-descriptors", action="store_true",
                      help="leave the messages' schema out of the filter's configuration (smaller; no "
                           "counterfactual sizes)")
    scope = what.add_mutually_exclusive_group()
    scope.add_argument("--package", action="append", metavar="PKG",
                       help="only services of PKG and its sub-packages (repeatable; default: all but google.*, grpc.*)")
    scope.add_argument("--all-packages", action="store_true", help=argparse.SUPPRESS)
    plugin_settings.add_sample_rate_flag(what)
    plugin_settings.add_grpc_message_bytes_flag(what)
    plugin_settings.add_counterfactual_flags(what)
    what.add_argument("--module", choices=wiring.MODULES,
                      help="which build of the filter: wasm (proxy-wasm in V8, sandboxed; the default) or native "
                           "(the Envoy dynamic module: cheaper, Envoy 1.40 and Envoy Gateway). Both record the "
                           "same and publish it the same way: the access log and tracing are the same")
    what.add_argument("--wasm", metavar="FILE",
                      help=f"the filter's .wasm (default: {default_wasm}; with --update-ecds: keep the module)")
    what.add_argument("--native", metavar="FILE",
                      help=f"with --module native (implies it): the dynamic module's .so (default: "
                           f"{wiring.MODULE_FILES['native']}, `make native`; with --update-ecds: keep the module)")
    where = parser.add_argument_group("where the record goes")
    where.add_argument("--collector", type=_collector, default=("127.0.0.1", 4317), metavar="HOST:PORT",
                       help="the OpenTelemetry Collector's OTLP/gRPC receiver (default 127.0.0.1:4317)")
    where.add_argument("--access-log", choices=wiring.ACCESS_LOG_SINKS, default="file",
                       help="file (default): Envoy appends the record as JSON lines to --access-log-path and an "
                            "agent beside Envoy (--agent) ships them to --collector: nothing is lost while the "
                            "Collector is down or restarts. otlp: Envoy's OTel access logger sends each record to "
                            "--collector itself and drops every record made while the Collector is unreachable "
                            "(no retry, no buffer on disk; measured in envoy/INJECT.md, \"The durable path\")")
    where.add_argument("--access-log-path", metavar="FILE",
                       help=f"with --access-log file: the JSON-lines file Envoy writes and the agent reads "
                            f"(default {agent.DEFAULT_ACCESS_LOG_PATH}; its directory must exist and be writable "
                            f"by Envoy and the agent)")
    where.add_argument("--collector-config", metavar="FILE",
                       help="also write FILE: the Collector's copy of the operation map injected (python -m "
                            "collector.opmap's fragment), which restores rpc.service, rpc.method, wirelens.streaming "
                            "and http.route the filter's record leaves out. Pass it to your Collector as a --config "
                            "after collector/config.yaml, and restart the Collector before the Envoys get a new map")
    ship = parser.add_argument_group("the agent beside Envoy (with --access-log file)")
    ship.add_argument("--agent", choices=agent.AGENTS, default="logship",
                      help="what ships the file to --collector: logship (default; checkpoints only what the "
                           "Collector has queued on disk, rotates and caps the file, counts every drop) or filelog "
                           "(the Collector's filelog receiver in an agent Collector; collector/README.md says what "
                           "it does not guarantee). The command is printed on stderr")
    ship.add_argument("--agent-config", metavar="FILE",
                      help="also write FILE: a shell script that runs the agent with exactly these settings "
                           "(exec, in the foreground: for systemd, supervisord or a container's command)")
    ship.add_argument("--agent-port", type=_port, default=agent.DEFAULT_AGENT_PORT, metavar="PORT",
                      help="the agent's health endpoint on 127.0.0.1 (logship: /healthz and /progress; default "
                           "%(default)s)")
    ship.add_argument("--agent-metrics-port", type=_port, metavar="PORT",
                      help="with --agent filelog: the agent Collector's own metrics on 127.0.0.1 (default: "
                           "--agent-port + 1)")
    ship.add_argument("--access-log-rotate-bytes", type=_size, default=agent.DEFAULT_ROTATE_BYTES, metavar="N",
                      help="the agent renames the file at N bytes once it shipped it all and has Envoy reopen it "
                           "(POST /reopen_logs on the bootstrap's admin); 0: never (default %(default)s)")
    ship.add_argument("--access-log-max-bytes", type=_size, default=agent.DEFAULT_MAX_BYTES, metavar="N",
                      help="cap on the file and its rotated, unshipped files: past it the agent drops the oldest "
                           "records and counts them; 0: no cap, at least twice the rotation size "
                           "(default %(default)s)")
    where.add_argument("--service-name", default=wiring.SERVICE_NAME,
                       help="service.name of the spans when wirelens adds the tracer (default %(default)s)")
    where.add_argument("--trace-sampling", type=float, default=100.0, metavar="PERCENT",
                       help="share of calls traced when wirelens adds the tracer (default 100)")
    which = parser.add_argument_group("which HTTP connection managers")
    which.add_argument("--listener", action="append", default=[], metavar="NAME",
                       help="only this listener's HCMs (repeatable; default: every static listener)")
    live = parser.add_argument_group("live updates (ECDS)")
    live.add_argument("--ecds-dir", metavar="DIR",
                      help="serve the filter through Extension Config Discovery from files in DIR "
                           "(one resource per file, written atomically, and a content-addressed copy of the module)")
    live.add_argument("--ecds-ads", action="store_true",
                      help="with --ecds-dir: the HCMs ask your control plane (ADS) instead; DIR gets the "
                           "resources it must serve")
    return parser


def chosen_module(args: argparse.Namespace) -> str:
    """The build --module names (--native implies native), or InjectError when --wasm/--native disagree with it."""
    module = args.module or ("native" if args.native else "wasm")
    other = "wasm" if module == "native" else "native"
    if getattr(args, other):
        raise InjectError(f"--{other} is the {other} build's file, and the build is {module} "
                          f"(--module {module}): give --{module} FILE, or --module {other}")
    return module


def options_from(args: argparse.Namespace) -> Options:
    module = chosen_module(args)
    wasm = native = None
    if module == "wasm":
        wasm = Path(args.wasm or ROOT / "build" / "wirelens_filter.wasm").resolve()
        if not wasm.is_file():
            raise InjectError(f"--wasm {wasm}: no such file (build it with `make filter`)")
    else:
        native = Path(args.native or wiring.MODULE_FILES["native"]).resolve()
        if not native.is_file() and (args.native or not args.update_ecds):
            raise InjectError(f"--native {native}: no such file (build it with `{wiring.MODULE_BUILDS['native']}`)")
    if args.access_log == "otlp" and args.access_log_path:
        raise InjectError("--access-log-path is the file of --access-log file; with --access-log otlp there is none")
    cap, rotate = args.access_log_max_bytes, args.access_log_rotate_bytes
    if cap and not rotate:
        raise InjectError(f"--access-log-max-bytes {cap} needs --access-log-rotate-bytes above 0 (the agent drops a "
                          "rotated file at a time)")
    if cap and cap < 2 * rotate:
        raise InjectError(f"--access-log-max-bytes {cap} must be at least twice --access-log-rotate-bytes {rotate} "
                          "(the agent drops a rotated file at a time), or 0 for no cap")
    path = args.access_log_path or agent.DEFAULT_ACCESS_LOG_PATH
    options = Options(
        wasm=wasm, collector_host=args.collector[0], collector_port=args.collector[1],
        access_log=args.access_log,
        access_log_path=str(Path(path).resolve()) if args.access_log == "file" else None,
        agent=args.agent, agent_port=args.agent_port, agent_metrics_port=args.agent_metrics_port,
        rotate_bytes=rotate, max_bytes=cap,
        service_name=args.service_name, trace_sampling=args.trace_sampling, sample_rate=args.sample_rate,
        grpc_message_bytes=args.grpc_message_bytes, counterfactual_rate=args.counterfactual_rate,
        counterfactual_max_bytes=args.counterfactual_max_bytes,
        packages=None if not args.package else tuple(args.package), listeners=tuple(args.listener),
        ecds_dir=Path(args.ecds_dir).resolve() if args.ecds_dir else None, ecds_ads=args.ecds_ads,
        descriptors=not args.no_descriptors, module=module, native=native)
    if args.descriptor_set:
        try:
            options.descriptor_set = Path(args.descriptor_set).read_bytes()
        except OSError as exc:
            raise InjectError(f"--descriptor-set: {exc}") from None
        options.descriptor_source = args.descriptor_set
    return options


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    say = lambda text: print(text, file=sys.stderr)  # noqa: E731
    try:
        if args.ecds_ads and not args.ecds_dir:
            parser.error("--ecds-ads needs --ecds-dir (where the resources to serve are written)")
        if args.update_ecds:
            if not args.ecds_dir or args.diff or args.config or args.collector_config or args.agent_config:
                parser.error("--update-ecds takes --ecds-dir and the settings to change, no config, --diff, "
                             "--collector-config or --agent-config (the settings it changes leave the operation map "
                             "and the access log as they are)")
            report, written = update_ecds(Path(args.ecds_dir).resolve(), options_from(args),
                                          bool(args.wasm or args.native), module_named=bool(args.module))
            for note in report.notes:
                say(note)
            say("\n".join(f"wrote {p}" for p in written) or "unchanged: the resources already say this")
            return 0
        if not args.config:
            parser.error("the Envoy config to change is missing")
        if args.collector_config and (args.remove or args.diff):
            parser.error("--collector-config is written when the filter is injected: not with --remove or --diff")
        if args.agent_config and (args.remove or args.diff or args.access_log != "file"):
            parser.error("--agent-config is written when the filter is injected with --access-log file: not with "
                         "--remove, --diff or --access-log otlp")
        text = sys.stdin.read() if args.config == "-" else _read(args.config)
        doc = parse(text, args.config)
        if args.remove:
            report = remove(doc)
            if not report.injected:
                say("no wirelens found in this config: nothing removed")
        else:
            options = options_from(args)
            report = inject(doc, options)
        out = doc.dump()
        for note in report.notes:
            say(note)
        for problem in report.problems:
            say(f"cannot inject: {problem}")
        if not args.remove and not report.injected:
            say("error: no HTTP connection manager was changed")
            return 1
        if not args.remove and options.ecds_dir is not None and not args.diff:
            for path in write_ecds(options.ecds_dir, report.ecds_resources, options.code):
                say(f"wrote {path}")
        if args.collector_config:
            path = Path(args.collector_config)
            write_atomically(path, collector_config(report.plugin_configurations).encode())
            say(f"wrote {path}: the Collector's copy of the operation map; start your Collector with "
                f"--config collector/config.yaml --config {path} (envoy/INJECT.md, \"Upgrading\")")
        if args.agent_config and report.agent is not None:
            path = Path(args.agent_config)
            write_atomically(path, report.agent.script().encode())
            path.chmod(0o755)
            say(f"wrote {path}: the agent ({report.agent.name}) as a script; run it beside Envoy")
        if args.diff:
            sys.stdout.writelines(difflib.unified_diff(
                text.splitlines(keepends=True), out.splitlines(keepends=True),
                fromfile=args.config, tofile=f"{args.config} ({'without' if args.remove else 'with'} wirelens)"))
        elif args.output:
            write_atomically(Path(args.output), out.encode())
        else:
            sys.stdout.write(out)
        return 0
    except InjectError as exc:
        say(f"error: {exc}")
        return 1


def collector_config(configurations: list[str]) -> str:
    """The Collector's config fragment (collector/opmap.py) for the plugin configurations injected (JSON texts)."""
    from collector import opmap  # noqa: PLC0415

    return opmap.fragment([json.loads(text) for text in dict.fromkeys(configurations)])


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError as exc:
        raise InjectError(f"{path}: {exc.strerror}") from None



if __name__ == "__main__":
    sys.exit(main())
