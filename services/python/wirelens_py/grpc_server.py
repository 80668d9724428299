"""gRPC transport of the Python pair: grpcio's server (a thread pool).

Serves wirelens.v1.Hello (SayHello, SayHelloBig) and wirelens.v1.Math
(CalculateFactorial) from the generated stubs (build/python/gen); every other
method answers UNIMPLEMENTED, as grpcio does for unknown methods.

    python -m wirelens_py.grpc_server --listen 127.0.0.1:18091 [--workers 16]
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from concurrent import futures

import grpc

from wirelens.v1 import hello_pb2, hello_pb2_grpc, math_pb2, math_pb2_grpc
from wirelens_py import domain, tracing


class Hello(hello_pb2_grpc.HelloServicer):
    def SayHello(self, request, context):
        return hello_pb2.HelloReply(message=domain.greeting(request.name))

    def SayHelloBig(self, request, context):
        return hello_pb2.HelloBigReply(message=domain.greeting(request.name), data_list=domain.DATA_LIST)


class Math(math_pb2_grpc.MathServicer):
    def CalculateFactorial(self, request, context):
        try:
            value, seconds = domain.calculate_factorial(request.number)
        except domain.DomainError as exc:
            context.abort(exc.code, exc.message)
        return math_pb2.FactorialReply(result=value, time_taken=seconds)


def serve(listen: str, workers: int) -> grpc.Server:
    # OpenTelemetry's grpcio server interceptor unless WIRELENS_SERVICE_TRACING=off (tracing.py).
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers), interceptors=tracing.grpc_interceptors(),
                         options=[("grpc.max_receive_message_length", 64 << 20)])
    hello_pb2_grpc.add_HelloServicer_to_server(Hello(), server)
    math_pb2_grpc.add_MathServicer_to_server(Math(), server)
    if server.add_insecure_port(listen) == 0:
        raise SystemExit(f"grpc_server: cannot listen on {listen}")
    server.start()
    return server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--listen", default=os.environ.get("WIRELENS_PYTHON_GRPC_LISTEN", "127.0.0.1:18091"))
    parser.add_argument("--workers", type=int, default=16, help="threads serving calls")
    args = parser.parse_args(argv)
    server = serve(args.listen, args.workers)
    signal.signal(signal.SIGTERM, lambda *_: server.stop(5))
    print(f"grpc_server: listening on {args.listen}", file=sys.stderr, flush=True)
    server.wait_for_termination()
    return 0


if __name__ == "__main__":
    sys.exit(main())
