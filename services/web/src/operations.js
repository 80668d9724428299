// The operations the page calls and the three ways it calls them. No DOM here:
// this module also runs under node for the unit tests (test/operations.test.mjs).
import protobuf from "protobufjs/light.js";
import { GrpcWebClientBase, MethodDescriptor, MethodType } from "grpc-web";

const PACKAGE = "wirelens.v1";

// One sample request per operation, and what a correct answer looks like. An
// operation whose service is not in the descriptor is left out.
export const SAMPLES = {
  "hello.SayHello": {
    request: { name: "browser" },
    check: (reply) => reply.message === "Hello, browser",
  },
  "catalog.GetProduct": {
    request: { id: 42 },
    check: (reply) => reply.id === 42 && typeof reply.name === "string" && reply.name.length > 0,
  },
  "echo.Unary": {
    request: { content: "hello from the browser" },
    check: (reply) => reply.content === "hello from the browser",
  },
};

export const PROTOCOLS = ["rest", "grpc-web", "grpc-web-text"];

// The logical operation name, as proto/opmap.py derives it: the service's short
// name with its first letter lower-cased, a dot, the method name.
export function operationName(service, method) {
  return service.slice(0, 1).toLowerCase() + service.slice(1) + "." + method;
}

// The google.api.http rule of a method, from its parsed options: {verb, pattern, body}.
export function httpRule(method) {
  for (const option of method.parsedOptions || []) {
    const rule = option["(google.api.http)"];
    if (!rule) continue;
    for (const verb of ["get", "post", "put", "patch", "delete"]) {
      if (rule[verb]) return { verb: verb.toUpperCase(), pattern: rule[verb], body: rule.body || "" };
    }
  }
  return null;
}

// The operations of SAMPLES whose service and method exist in the descriptor.
export function loadOperations(descriptorJson) {
  const root = protobuf.Root.fromJSON(descriptorJson);
  const operations = [];
  for (const [name, sample] of Object.entries(SAMPLES)) {
    const [serviceShort, methodName] = name.split(".");
    const serviceName = serviceShort.slice(0, 1).toUpperCase() + serviceShort.slice(1);
    const service = root.lookup(`${PACKAGE}.${serviceName}`);
    const method = service && service.methods && service.methods[methodName];
    if (!method) continue;
    method.resolve();
    operations.push({
      name: operationName(serviceName, methodName),
      grpcPath: `/${PACKAGE}.${serviceName}/${methodName}`,
      requestType: method.resolvedRequestType,
      responseType: method.resolvedResponseType,
      http: httpRule(method),
      ...sample,
    });
  }
  return operations;
}

// The REST request of an operation: path fields fill the template, the body
// carries the message (body "*") and, without a body, the remaining fields go
// to the query string, as the google.api.http rules say.
export function restRequest(op, request) {
  const rule = op.http;
  if (!rule) throw new Error(`${op.name} has no google.api.http rule`);
  const rest = { ...request };
  const path = rule.pattern.replace(/\{([^}=]+)\}/g, (_, field) => {
    const value = rest[field];
    delete rest[field];
    return encodeURIComponent(String(value));
  });
  if (rule.body === "*") {
    return { method: rule.verb, path, body: JSON.stringify(request) };
  }
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(rest)) query.append(key, String(value));
  const qs = query.toString();
  return { method: rule.verb, path: qs ? `${path}?${qs}` : path, body: undefined };
}

// A protobuf message as proto3 JSON would show it: lowerCamel keys, int64 as
// strings, defaults omitted; the same shape the REST service answers.
function asObject(type, message) {
  return type.toObject(message, { longs: String, enums: String, bytes: String });
}

function descriptorFor(op) {
  return new MethodDescriptor(
    op.grpcPath,
    MethodType.UNARY,
    op.requestType.ctor,
    op.responseType.ctor,
    (request) => op.requestType.encode(op.requestType.fromObject(request)).finish(),
    (bytes) => asObject(op.responseType, op.responseType.decode(bytes)),
  );
}

// Each call resolves to {reply, status, ok}; status is the HTTP status for REST
// and the gRPC status code for gRPC-Web. It never rejects: errors are results.
export async function callRest(origin, op, runId) {
  const { method, path, body } = restRequest(op, op.request);
  const headers = { accept: "application/json", "x-wirelens-run": runId };
  if (body !== undefined) headers["content-type"] = "application/json";
  try {
    const response = await fetch(origin + path, { method, headers, body, cache: "no-store" });
    const text = await response.text();
    let reply;
    try { reply = JSON.parse(text); } catch { reply = text; }
    return { reply, status: response.status, ok: response.ok && op.check(reply) };
  } catch (err) {
    return { reply: String(err), status: 0, ok: false };
  }
}

const clients = {
  "grpc-web": new GrpcWebClientBase({ format: "binary" }), // application/grpc-web+proto
  "grpc-web-text": new GrpcWebClientBase({ format: "text" }), // application/grpc-web-text
};

export async function callGrpcWeb(origin, op, runId, protocol) {
  const client = clients[protocol];
  try {
    // unaryCall is the promise API (grpc-web 2.1.1 exports no thenableCall despite its .d.ts).
    const reply = await client.unaryCall(origin + op.grpcPath, op.request, { "x-wirelens-run": runId },
      descriptorFor(op));
    return { reply, status: 0, ok: op.check(reply) };
  } catch (err) {
    return { reply: err && err.message ? err.message : String(err), status: err && err.code !== undefined ? err.code : 2, ok: false };
  }
}

export function call(origin, op, protocol, runId) {
  return protocol === "rest" ? callRest(origin, op, runId) : callGrpcWeb(origin, op, runId, protocol);
}
