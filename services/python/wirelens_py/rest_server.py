"""REST transport of the Python pair: FastAPI on uvicorn.

Routes, bodies and errors are those of the Go REST server
(internal/restserver): the google.api.http route of each operation,
the proto3 JSON mapping in compact form (lowerCamel names, int64 as strings,
default values left out), `Accept: application/protobuf` answers protobuf, a
protobuf `Content-Type` body is decoded as protobuf, unknown JSON fields
answer 400, errors are `{"code":N,"message":"..."}` with the HTTP status of
the gRPC code. Request and reply are the generated protobuf messages
(build/python/gen), so both transports share one data model, as in Go.

    python -m uvicorn wirelens_py.rest_server:app --host 127.0.0.1 --port 18081
"""

from __future__ import annotations

import json

import grpc
from fastapi import FastAPI, Request
from fastapi.responses import PlainTextResponse, Response
from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message

from wirelens.v1 import hello_pb2, math_pb2
from wirelens_py import domain, tracing

CONTENT_TYPE_JSON = "application/json"
PROTOBUF_TYPES = ("application/protobuf", "application/x-protobuf")
MAX_BODY_BYTES = 1 << 20

# gRPC code -> HTTP status (internal/apierr, the transcoder's mapping).
HTTP_STATUS = {
    grpc.StatusCode.INVALID_ARGUMENT: 400, grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429, grpc.StatusCode.CANCELLED: 499,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504, grpc.StatusCode.INTERNAL: 500,
}

app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)
# OpenTelemetry's FastAPI instrumentation unless WIRELENS_SERVICE_TRACING=off (tracing.py).
tracing.instrument_fastapi(app)


def _media(value: str) -> str:
    return value.split(";", 1)[0].strip().lower()


def accepts_protobuf(accept: str) -> str | None:
    """The first protobuf media type an Accept header lists, if any (q-values not weighed, as in Go)."""
    for part in accept.split(","):
        media = _media(part)
        if media in PROTOBUF_TYPES:
            return media
    return None


def error(code: grpc.StatusCode, message: str, status: int | None = None) -> Response:
    body = json.dumps({"code": code.value[0], "message": message}, separators=(",", ":"),
                      ensure_ascii=False).encode()
    return Response(body, status_code=status or HTTP_STATUS.get(code, 500), media_type=CONTENT_TYPE_JSON)


async def bind(request: Request, message: Message) -> Response | None:
    """Fill message from the body (body "*"); an empty body is the empty message. An error Response, or None."""
    body = await request.body()
    if len(body) > MAX_BODY_BYTES:
        return error(grpc.StatusCode.RESOURCE_EXHAUSTED, f"request body larger than {MAX_BODY_BYTES} bytes", 413)
    if not body:
        return None
    if _media(request.headers.get("content-type", "")) in PROTOBUF_TYPES:
        try:
            message.ParseFromString(body)
        except DecodeError as exc:
            return error(grpc.StatusCode.INVALID_ARGUMENT, f"invalid protobuf body: {exc}")
        return None
    try:
        json_format.Parse(body, message)
    except (json_format.ParseError, UnicodeDecodeError) as exc:
        return error(grpc.StatusCode.INVALID_ARGUMENT, f"invalid JSON body: {exc}")
    return None


def reply(request: Request, message: Message) -> Response:
    """The reply as protobuf when Accept asks for it, as compact proto3 JSON otherwise."""
    media = accepts_protobuf(request.headers.get("accept", ""))
    if media:
        return Response(message.SerializeToString(deterministic=True), media_type=media)
    body = json.dumps(json_format.MessageToDict(message), separators=(",", ":"), ensure_ascii=False).encode()
    return Response(body, media_type=CONTENT_TYPE_JSON)


@app.get("/healthz")
async def healthz() -> PlainTextResponse:
    return PlainTextResponse("ok")


@app.post("/v1/hello")
async def say_hello(request: Request) -> Response:
    req = hello_pb2.HelloRequest()
    if (failed := await bind(request, req)) is not None:
        return failed
    return reply(request, hello_pb2.HelloReply(message=domain.greeting(req.name)))


@app.post("/v1/hello-big")
async def say_hello_big(request: Request) -> Response:
    req = hello_pb2.HelloRequest()
    if (failed := await bind(request, req)) is not None:
        return failed
    return reply(request, hello_pb2.HelloBigReply(message=domain.greeting(req.name), data_list=domain.DATA_LIST))


@app.post("/v1/factorial")
async def calculate_factorial(request: Request) -> Response:
    req = math_pb2.FactorialRequest()
    if (failed := await bind(request, req)) is not None:
        return failed
    try:
        value, seconds = domain.calculate_factorial(req.number)
    except domain.DomainError as exc:
        return error(exc.code, exc.message)
    return reply(request, math_pb2.FactorialReply(result=value, time_taken=seconds))
