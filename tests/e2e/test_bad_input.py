"""Bad input: broken and hostile requests to the real Envoy of the local stack.

Every kind in bad_inputs.CASES is one named test case. For each:

(a) Envoy still answers good calls right after, correctly: a REST GET (200,
    the product's JSON) and a gRPC unary SayHello through grpcio (OK, the
    exact reply bytes).
(b) No wasm failure moved. Envoy 1.40 has no counter for a VM that trapped
    under FAIL_OPEN (the filter is then silently skipped), so three signals:
    every `wasm.*` stat of /stats (`wasm.envoy.wasm.runtime.v8.created` and
    `.active`: a VM (re)created or lost; `wasm.wasm_vm_count`;
    `wasm.wirelens.vm_reload*`, `wasm.wirelens_transcoded.vm_reload*`: the
    reload machinery after a VM failure) and `server.envoy_bug_failures`,
    `server.debug_assertion_failures` are unchanged; Envoy's log has no new
    "Wasm VM failed" (Wasm::error, logged when a VM traps) or "panicked" (the
    module's panic message on stderr); and the good calls of (a) are rows
    in ClickHouse: a trapped VM publishes nothing, so its calls would be missing.
(c) The bad call is exactly `rows` rows under its own run id (header
    x-wirelens-run), with `malformed` as expected (1 exactly where the gRPC
    framing or base64 was broken, filters/README.md) and the case's columns.
    Where Envoy refuses the request before the filter (codec errors, floods)
    the expectation is no row: the good calls, sent after, are rows by then
    (the access log is written in order), and the bad run id has none.

Cases (id: expectation; the bytes are in bad_inputs.py):

    grpc_length_4gib                    row, malformed
    grpc_length_1mib_short              row, malformed
    grpc_prefix_truncated_3             row, malformed
    grpc_prefix_truncated_after_message row, malformed, 1 message
    grpc_unknown_flag_bits              row, not malformed (well framed), 1 message
    grpc_compressed_without_encoding    row, not malformed, 1 compressed message
    grpc_empty_messages_to_unary        row, not malformed, 3000 messages of 0 bytes
    grpc_trailer_frame_from_client      row, not malformed (the block parses)
    grpc_trailer_frame_garbage          row, malformed (the block does not parse)
    grpc_web_trailer_frame_from_client  row, not malformed
    grpc_web_text_invalid_base64        row, malformed
    grpc_web_text_padding_inside        row, malformed
    grpc_web_text_padded_frames         row, not malformed, 2 messages
    grpc_web_text_dangling_char         row, malformed
    h2_rst_stream_mid_request           row, not malformed (a reset is not malformed)
    h2_rst_stream_mid_response          row, not malformed
    h2_client_gone_mid_body             row, not malformed
    h2_headers_56kib                    row
    h2_non_utf8_grpc_path               row
    h2_rapid_reset                      100 rows (bounded: 100 streams)
    h2_settings_flood                   no row: no request; Envoy closes the connection
    h2_ping_flood                       no row: no request; Envoy closes the connection
    h1_headers_60kib                    no row: Envoy's codec answers 431
    h1_path_non_utf8                    no row: Envoy's codec answers 400
    h1_path_percent_encoded             row
    h1_http10                           no row: Envoy answers 426 (accept_http_10 off)
    h1_pipelined                        3 rows
    h1_websocket_upgrade                row
    h1_connect                          row
    h1_head                             row, response body 0
    h1_options_cors_preflight           row
    h1_client_gone_mid_body             row
    h1_grpc_web_client_gone_mid_frame   row, not malformed
    h1_chunked_bad_size                 row (headers reached the filter; the body did not parse)
    h1_content_length_and_chunked       no row: Envoy's codec answers 400
    h1_tls_hello_on_cleartext           no row: not HTTP, the connection is closed

The same inputs are seeds of the filter core's fuzz corpus
(filters/fuzz/make-seeds.py writes filters/fuzz/corpus/*/bad_<id>).
"""

from __future__ import annotations

import io
import json
import re
import socket
import time
import urllib.request
import uuid
from pathlib import Path

import grpc
import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings
import pytest

import bad_inputs
from bad_inputs import CASES, RUN_PLACEHOLDER, BadInput
from conftest import stack

DEADLINE_S = 20.0  # per network exchange and per ClickHouse wait; generous for 2 shared cores
# Floods: bounded in count and rate (at most 10,000 frames/s here), they stop by themselves.
FLOOD_FRAMES, FLOOD_BATCH, FLOOD_GAP_S = 5000, 100, 0.01
WASM_FAILURE_LOG = re.compile(r"Wasm VM failed|panicked", re.IGNORECASE)
# Stats outside wasm.* that count Envoy's own broken invariants.
ENVOY_BUG_STATS = ("server.envoy_bug_failures", "server.debug_assertion_failures")


# -- HTTP/2 by hand ----------------------------------------------------------------------


class H2Client:
    """One cleartext HTTP/2 connection (prior knowledge) written frame by frame with h2."""

    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=DEADLINE_S)
        # Off: the cases send headers h2 would refuse (non-UTF-8 paths) on purpose.
        config = h2.config.H2Configuration(client_side=True, header_encoding=None,
                                           validate_outbound_headers=False, normalize_outbound_headers=False)
        self.conn = h2.connection.H2Connection(config)
        self.conn.initiate_connection()
        self.flush()
        self.closed = False
        self.events: list[h2.events.Event] = []

    def flush(self) -> None:
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def receive(self) -> list[h2.events.Event]:
        """Reads once (blocking up to the socket deadline); returns the events it produced."""
        try:
            data = self.sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            data = b""
        if not data:
            self.closed = True
            return []
        try:
            events = self.conn.receive_data(data)
        except h2.exceptions.ProtocolError:
            self.closed = True
            return []
        self.flush()
        self.events.extend(events)
        return events

    def send_body(self, stream_id: int, body: bytes, end_stream: bool) -> None:
        """Sends body in frames the peer's frame size and flow-control windows allow."""
        view = memoryview(body)
        while view:
            window = min(self.conn.local_flow_control_window(stream_id), self.conn.max_outbound_frame_size)
            if window == 0:
                if not self.receive() and self.closed:
                    raise ConnectionError(f"connection closed with {len(view)} body bytes unsent")
                continue
            piece, view = view[:window], view[window:]
            self.conn.send_data(stream_id, piece.tobytes(), end_stream=end_stream and not view)
            self.flush()
        if end_stream and not body:
            self.conn.end_stream(stream_id)
            self.flush()

    def wait_for(self, done, what: str) -> None:
        deadline = time.monotonic() + DEADLINE_S
        while not done():
            if self.closed:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {what} within {DEADLINE_S:.0f}s; events: {self.events[-5:]}")
            self.receive()

    def stream_over(self, stream_id: int) -> bool:
        return any(isinstance(e, (h2.events.StreamEnded, h2.events.StreamReset))
                   and e.stream_id == stream_id for e in self.events)

    def close(self) -> None:
        self.sock.close()


def send_h2(port: int, case: BadInput, headers, body: bytes, ending: str) -> str:
    client = H2Client(port)
    try:
        # Envoy's SETTINGS first: its windows and frame size decide how the body is cut.
        client.wait_for(lambda: any(isinstance(e, h2.events.RemoteSettingsChanged) for e in client.events),
                        "SETTINGS from Envoy")
        sid = client.conn.get_next_available_stream_id()
        client.conn.send_headers(sid, headers, end_stream=not body and ending == "end")
        client.flush()
        if ending == "end":
            if body:
                client.send_body(sid, body, end_stream=True)
            client.wait_for(lambda: client.stream_over(sid), "end of the response")
        elif ending == "reset_mid_request":
            client.send_body(sid, body, end_stream=False)
            client.conn.reset_stream(sid, h2.errors.ErrorCodes.CANCEL)
            client.flush()
            # A PING answered after the reset: Envoy has read the reset by then.
            client.conn.ping(b"resetack")
            client.flush()
            client.wait_for(lambda: any(isinstance(e, h2.events.PingAckReceived) for e in client.events),
                            "PING ACK after the reset")
        elif ending == "close_mid_request":
            client.send_body(sid, body, end_stream=False)
        elif ending == "reset_mid_response":
            client.send_body(sid, body, end_stream=True)
            client.wait_for(lambda: any(isinstance(e, h2.events.DataReceived) and e.stream_id == sid
                                        for e in client.events), "the first response data")
            client.conn.reset_stream(sid, h2.errors.ErrorCodes.CANCEL)
            client.flush()
            client.conn.ping(b"resetack")
            client.flush()
            client.wait_for(lambda: any(isinstance(e, h2.events.PingAckReceived) for e in client.events),
                            "PING ACK after the reset")
        else:
            raise ValueError(f"unknown ending {ending!r}")
        status = [dict(e.headers).get(b":status") for e in client.events
                  if isinstance(e, h2.events.ResponseReceived) and e.stream_id == sid]
        return f"status {status[0].decode() if status else 'none'}, connection closed: {client.closed}"
    finally:
        client.close()


def send_h2_rapid_reset(port: int, case: BadInput, headers, body: bytes) -> str:
    client = H2Client(port)
    try:
        client.wait_for(lambda: any(isinstance(e, h2.events.RemoteSettingsChanged) for e in client.events),
                        "SETTINGS from Envoy")
        for _ in range(case.rows):
            sid = client.conn.get_next_available_stream_id()
            client.conn.send_headers(sid, headers, end_stream=True)
            client.conn.reset_stream(sid, h2.errors.ErrorCodes.CANCEL)
        client.conn.ping(b"rapidend")
        client.flush()
        client.wait_for(lambda: any(isinstance(e, h2.events.PingAckReceived) for e in client.events),
                        "PING ACK after the resets")
        return f"{case.rows} streams reset, connection closed: {client.closed}"
    finally:
        client.close()


def send_h2_flood(port: int, case: BadInput, frame_kind: str) -> str:
    """Writes FLOOD_FRAMES control frames, FLOOD_BATCH per write at most every FLOOD_GAP_S, without
    reading Envoy's ACKs; then one PING whose ACK shows Envoy got through them (or Envoy closed)."""
    client = H2Client(port)
    try:
        sent = 0
        try:
            for batch in range(FLOOD_FRAMES // FLOOD_BATCH):
                for i in range(FLOOD_BATCH):
                    if frame_kind == "settings":
                        client.conn.update_settings({h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: 100 + i % 2})
                    else:
                        client.conn.ping((batch * FLOOD_BATCH + i).to_bytes(8, "big"))
                client.sock.sendall(client.conn.data_to_send())
                sent += FLOOD_BATCH
                time.sleep(FLOOD_GAP_S)  # rate limit of the flood, not a synchronization
            client.conn.ping(b"flood-ok")
            client.flush()
        except (ConnectionResetError, BrokenPipeError):
            client.closed = True  # Envoy's flood protection closed the connection: also fine
        client.wait_for(lambda: any(isinstance(e, h2.events.PingAckReceived) and e.ping_data == b"flood-ok"
                                    for e in client.events), "the PING ACK after the flood")
        return f"{sent} {frame_kind} frames sent, connection closed by Envoy: {client.closed}"
    finally:
        client.close()


# -- HTTP/1 by hand ----------------------------------------------------------------------


class _NoClose(io.BufferedReader):
    """A socket reader http.client can read several responses from (it closes its reader after each)."""

    def close(self) -> None:
        pass


class _OneReader:
    def __init__(self, reader):
        self.reader = reader

    def makefile(self, *_args, **_kwargs):
        return self.reader


def send_h1(port: int, case: BadInput, raw: bytes) -> str:
    """Writes raw bytes; reads HTTP/1 responses until Envoy closes the connection (or one without keep-alive)."""
    import http.client
    sock = socket.create_connection(("127.0.0.1", port), timeout=DEADLINE_S)
    try:
        sock.sendall(raw)
        reader = _OneReader(_NoClose(socket.SocketIO(sock, "rb")))
        methods = re.findall(rb"(?m)^([A-Z]+) \S+ HTTP/1\.[01]\r$", raw) or [b"GET"]
        statuses = []
        for method in methods:
            response = http.client.HTTPResponse(reader, method=method.decode())
            try:
                response.begin()
            except (http.client.RemoteDisconnected, ConnectionResetError):
                break
            response.read()
            statuses.append(response.status)
            if response.will_close or response.status == 101:
                break
        return f"statuses {statuses}"
    finally:
        sock.close()


def send_h1_close(port: int, case: BadInput, raw: bytes) -> str:
    """Writes raw bytes (a request cut short) and closes the connection at once."""
    with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE_S) as sock:
        sock.sendall(raw)
    return "closed after the partial request"


SENDERS = {
    "h2": lambda port, case, headers, body, raw: send_h2(port, case, headers, body, "end"),
    "h2_reset_mid_request": lambda port, case, headers, body, raw: send_h2(port, case, headers, body,
                                                                           "reset_mid_request"),
    "h2_reset_mid_response": lambda port, case, headers, body, raw: send_h2(port, case, headers, body,
                                                                            "reset_mid_response"),
    "h2_close_mid_request": lambda port, case, headers, body, raw: send_h2(port, case, headers, body,
                                                                           "close_mid_request"),
    "h2_rapid_reset": lambda port, case, headers, body, raw: send_h2_rapid_reset(port, case, headers, body),
    "h2_settings_flood": lambda port, case, headers, body, raw: send_h2_flood(port, case, "settings"),
    "h2_ping_flood": lambda port, case, headers, body, raw: send_h2_flood(port, case, "ping"),
    "h1": lambda port, case, headers, body, raw: send_h1(port, case, raw),
    "h1_close": lambda port, case, headers, body, raw: send_h1_close(port, case, raw),
}


# -- the stack's side ----------------------------------------------------------------------


def envoy_stats(settings) -> dict[str, int]:
    """Every wasm.* stat and Envoy's own bug counters, from the admin /stats."""
    _, text = stack.http_get(f"http://127.0.0.1:{settings['WIRELENS_ENVOY_ADMIN_PORT']}/stats", timeout=10)
    watched = {}
    for line in text.splitlines():
        name, _, value = line.partition(": ")
        if (name.startswith("wasm.") or name in ENVOY_BUG_STATS) and value.strip().isdigit():
            watched[name] = int(value)
    return watched


def envoy_log(settings) -> Path:
    return stack.log_path(settings, "envoy")


def rows_of(settings, run_id: str) -> list[dict]:
    out = stack.clickhouse_query(
        settings, f"SELECT * FROM wirelens.requests FINAL WHERE run_id = '{run_id}' FORMAT JSONEachRow")
    return [json.loads(line) for line in out.splitlines() if line]


def wait_rows(settings, run_id: str, count: int, what: str) -> list[dict]:
    deadline = time.monotonic() + DEADLINE_S
    while True:
        found = rows_of(settings, run_id)
        if len(found) >= count:
            return found
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: {len(found)} of {count} rows in wirelens.requests for run {run_id} "
                        f"after {DEADLINE_S:.0f}s")
        time.sleep(0.2)  # polling interval under a deadline


HELLO_REPLY = bad_inputs.proto_string(1, b"Hello, wirelens")


def good_calls(settings, run_id: str) -> None:
    port = settings["WIRELENS_ENVOY_PORT"]
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/products/1", headers={"x-wirelens-run": run_id})
    with urllib.request.urlopen(request, timeout=DEADLINE_S) as response:
        assert response.status == 200
        assert json.loads(response.read())["id"] == 1
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        say_hello = channel.unary_unary(bad_inputs.HELLO)  # raw bytes both ways
        reply, call = say_hello.with_call(bad_inputs.HELLO_MESSAGE, timeout=DEADLINE_S,
                                          metadata=[("x-wirelens-run", run_id)])
        assert call.code() == grpc.StatusCode.OK
        assert reply == HELLO_REPLY


def with_run_id(case: BadInput, run_id: str):
    """The case's headers and raw bytes with its unique run id in place of the placeholder."""
    assert len(run_id) == len(RUN_PLACEHOLDER)
    old, new = RUN_PLACEHOLDER.encode(), run_id.encode()
    headers = [(n, new if v == old else v) for n, v in case.headers]
    return headers, case.raw.replace(old, new)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(local_stack, case: BadInput):
    settings = local_stack
    run_id = f"bad-{uuid.uuid4().hex}"[:len(RUN_PLACEHOLDER)].ljust(len(RUN_PLACEHOLDER), "0")
    good_run = f"{run_id}-good"
    headers, raw = with_run_id(case, run_id)
    stats_before = envoy_stats(settings)
    log_offset = envoy_log(settings).stat().st_size

    outcome = SENDERS[case.send](int(settings["WIRELENS_ENVOY_PORT"]), case, headers, case.body, raw)
    print(f"{case.id}: {outcome}")  # shown with -s, and with a failure

    # (a) Envoy answers good calls right after.
    good_calls(settings, good_run)
    # (b) No wasm failure: stats, log, and the good calls recorded (a trapped VM records nothing).
    stats_after = envoy_stats(settings)
    moved = {k: (stats_before.get(k), v) for k, v in stats_after.items() if stats_before.get(k) != v}
    assert not moved, f"wasm/bug stats moved after {case.id} ({outcome}): {moved}"
    with envoy_log(settings).open("rb") as log:
        log.seek(log_offset)
        failures = [line for line in log.read().decode(errors="replace").splitlines()
                    if WASM_FAILURE_LOG.search(line)]
    assert not failures, f"Envoy logged a wasm failure after {case.id}: {failures[:3]}"
    good = wait_rows(settings, good_run, 2, f"the good calls after {case.id}")
    assert sorted(r["protocol"] for r in good) == ["grpc", "rest"], good
    assert not any(r["malformed"] for r in good), good

    # (c) The bad call: its rows (the good calls' rows are in, so every earlier call is too).
    found = wait_rows(settings, run_id, case.rows, f"{case.id} ({outcome})") if case.rows else rows_of(settings,
                                                                                                         run_id)
    assert len(found) == case.rows, (
        f"{case.id} ({outcome}): expected {case.rows} rows"
        f"{' (' + case.why_no_row + ')' if case.why_no_row else ''}, got {len(found)}: {found[:2]}")
    for row in found:
        if case.malformed is not None:
            assert int(row["malformed"]) == case.malformed, f"{case.id} ({outcome}): malformed in {row}"
        for column, value in case.columns.items():
            assert str(row[column]) == str(value), f"{case.id} ({outcome}): {column} = {row[column]!r}, expected {value!r}"
