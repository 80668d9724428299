// Unit tests of the page's non-DOM logic against the project's real .proto files.
import { test } from "node:test";
import assert from "node:assert/strict";
import { loadDescriptor } from "../build.mjs";
import { SAMPLES, loadOperations, operationName, restRequest } from "../src/operations.js";

const { json } = loadDescriptor();
const operations = loadOperations(json);
const byName = Object.fromEntries(operations.map((op) => [op.name, op]));

test("every operation of the page is in the project's descriptor", () => {
  // loadOperations leaves out an operation whose service is missing: here that is a failure, by name.
  assert.deepEqual(operations.map((op) => op.name), Object.keys(SAMPLES));
  assert.deepEqual(Object.keys(SAMPLES), ["hello.SayHello", "catalog.GetProduct", "echo.Unary"]);
});

test("operation names follow proto/opmap.py", () => {
  assert.equal(operationName("Hello", "SayHello"), "hello.SayHello");
  assert.equal(operationName("Catalog", "GetProduct"), "catalog.GetProduct");
  assert.ok(byName["hello.SayHello"], "hello.SayHello is always on the page");
  assert.equal(byName["hello.SayHello"].grpcPath, "/wirelens.v1.Hello/SayHello");
});

test("REST requests come from the google.api.http rules", () => {
  assert.deepEqual(restRequest(byName["hello.SayHello"], { name: "a b" }),
    { method: "POST", path: "/v1/hello", body: '{"name":"a b"}' });
  assert.deepEqual(restRequest(byName["catalog.GetProduct"], { id: 42 }),
    { method: "GET", path: "/v1/products/42", body: undefined });
  assert.deepEqual(restRequest(byName["echo.Unary"], { content: "hello & bye" }),
    { method: "GET", path: "/v1/echo?content=hello+%26+bye", body: undefined });
});

test("request messages encode as protobuf", () => {
  const op = byName["hello.SayHello"];
  const bytes = op.requestType.encode(op.requestType.fromObject({ name: "wirelens" })).finish();
  // field 1, wire type 2, length 8, "wirelens": the bytes the e2e tests expect too.
  assert.deepEqual([...bytes], [0x0a, 8, ...Buffer.from("wirelens")]);
  const reply = op.responseType.toObject(op.responseType.decode(Uint8Array.from([0x0a, 2, 0x68, 0x69])));
  assert.deepEqual(reply, { message: "hi" });
});

test("every sample's check accepts its correct answer only", () => {
  assert.ok(byName["hello.SayHello"].check({ message: "Hello, browser" }));
  assert.ok(!byName["hello.SayHello"].check({ message: "Hello, someone" }));
  assert.ok(byName["catalog.GetProduct"].check({ id: 42, name: "a product" }));
  assert.ok(!byName["catalog.GetProduct"].check({ id: 43, name: "a product" }));
  assert.ok(byName["echo.Unary"].check({ content: "hello from the browser" }));
  assert.ok(!byName["echo.Unary"].check({ content: "hello" }));
});
