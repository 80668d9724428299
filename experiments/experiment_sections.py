"""One section per experiment (E1-E5): the published tables, the measured ones in the same shape, the ratios
between protocols in both, the client next to the proxy, what only the proxy saw, and a reading.

The published numbers and the prose about them come from the scenario (scenarios/e*.json, "published");
the code computes the measured side and the comparisons.
"""

from __future__ import annotations

import math
from typing import Any

from experiments.experiment_tables import fnum, fratio, ms, ratio, table


HEADERS = {
    "protocol": "protocol", "requests": "requests", "median_ms": "median ms", "p95_ms": "p95 ms", "p99_ms": "p99 ms",
    "avg_ms": "avg ms", "min_ms": "min ms", "max_ms": "max ms", "avg_response_b": "avg response B",
    "variant": "variant", "rest_ms": "REST ms", "grpc_ms": "gRPC ms", "message": "message", "rest_b": "REST B",
    "grpc_b": "gRPC B", "cpu_percent": "CPU %", "count": "count", "unary_ms": "unary ms",
    "client_stream_ms": "client stream ms", "encoding": "encoding", "bytes": "bytes", "of": "of",
    "payload": "payload", "finding": "finding", "total_s": "total s", "per_s": "calls/s",
}


def published_tables(scenario: dict) -> str:
    parts = []
    for t in scenario["published"]["tables"]:
        parts.append(f"*{t['name']}*\n\n" + table([HEADERS.get(c, c) for c in t["columns"]], t["rows"]))
    return "\n\n".join(parts)


def published_rows(scenario: dict, index: int = 0) -> dict:
    t = scenario["published"]["tables"][index]
    return {row[0]: dict(zip(t["columns"], row)) for row in t["rows"]}


def by_key(result: dict, **match: Any) -> dict | None:
    for s in result["steps"]:
        if all(s["key"].get(k) == v for k, v in match.items()):
            return s
    return None


def proxy_only(result: dict) -> str:
    rows = []
    for s in result["steps"]:
        p = s["proxy"]
        if not p:
            rows.append([s["name"]] + ["no rows"] + [""] * 9)
            continue
        rows.append([
            s["name"],
            f"{fnum(p['req_header_b'], 0)} / {fnum(p['req_header_wire_b'], 0)}",
            fnum(p["req_body_b"], 0),
            f"{fnum(p['resp_header_b'], 0)} / {fnum(p['resp_header_wire_b'], 0)}",
            fnum(p["resp_body_b"], 0),
            f"{fnum(p['wire_in_b'], 0)} / {fnum(p['wire_out_b'], 0)}",
            f"{fnum(p['req_messages'], 0)} / {fnum(p['resp_messages'], 0)}",
            ms(p["ttfb_p50_us"], 3),
            f"{fnum(p['upstream_p50_us'], 0)} / {fnum(p['upstream_avg_us'], 0)}",
            f"{fnum(p['in_envoy_p50_us'], 0)} / {fnum(p['in_envoy_avg_us'], 0)}",
            f"{p['connections']} ({p['http_version']})",
        ])
    return table(["step", "req headers B (filter / wire)", "req body B", "resp headers+trailers B (filter / wire)",
                  "resp body B", "wire B in / out", "messages req / resp", "TTFB p50 ms",
                  "upstream µs (median / avg)", "in Envoy µs (median / avg)", "connections"], rows) + (
        "\n\nPer call, averaged over the step unless a median is named. *filter* header bytes are what the "
        "wirelens filter counts (names + values as Envoy holds them); *wire* are Envoy's own downstream counters "
        "(HPACK-compressed on HTTP/2). Wire bytes are the whole request or response on the connection, framing "
        "included. Messages are gRPC messages (0 for REST). *Upstream* and *in Envoy* split each call's time at "
        "Envoy by Envoy's own clock, in µs (`%COMMON_DURATION%`), defined as in the protocol-versus-stack tables "
        "(`queries/protocol_vs_stack.sql`): *upstream* is the upstream exchange, from the first byte Envoy sent "
        "to the service to the last byte it received back (the service, its framework and the loopback wire); "
        "*in Envoy* is the call's time at Envoy (first byte from the client to the last byte to it) minus the "
        "upstream exchange: what Envoy spends before the first byte goes upstream and after the last one comes "
        "back (the filters' work on the end of the answer, and any wait for the client to take the last of "
        "it). A stream is one call: its upstream exchange spans all its messages (Envoy's handling of each "
        "message while the stream is open is inside it), and its time in Envoy is the stream's opening and "
        "closing. Calls no upstream served are left out of both.")


def client_vs_proxy(result: dict) -> str:
    rows = []
    for s in result["steps"]:
        c, p = s["client"], s["proxy"]
        if not c:
            continue
        rows.append([s["name"], c.get("calls"), p.get("calls", 0),
                     fnum(c.get("p50_ms")), ms(p.get("p50_us")), fnum(c.get("p99_ms")), ms(p.get("p99_us")),
                     fnum(c["p50_ms"] - float(p["p50_us"]) / 1000) if p else "–",
                     fnum(c.get("elapsed_s"), 3), ms(p.get("window_us", 0) / 1000 if p else None, 3)])
    return table(["step", "client calls", "proxy rows", "client p50 ms", "proxy p50 ms", "client p99 ms",
                  "proxy p99 ms", "gap p50 ms", "client wall s", "proxy window s"], rows)


def verdict(published: float | None, measured: float | None, tolerance: float = 0.25) -> str:
    """Same direction (both below or both above 1) and how close."""
    if published is None or measured is None:
        return "cannot compare"
    if abs(published - 1) <= 0.05:
        return "agree: no difference" if abs(measured - 1) <= 0.05 else "differ: no difference published"
    if abs(measured - 1) <= 0.05:
        return "differ: no clear difference measured"
    if (published - 1) * (measured - 1) < 0:
        return "differ in direction"
    if abs(math.log(measured / published)) <= math.log(1 + tolerance):
        return "agree"
    return "agree in direction, differ in size"


# ---------------------------------------------------------------- E1


def render_e1(result: dict) -> str:
    sc = result["scenario"]
    pub = published_rows(sc)
    rows, measured = [], {}
    for proto in ("rest", "grpc"):
        s = by_key(result, protocol=proto)
        p = s["proxy"] if s else {}
        measured[proto] = p
        if not p:
            rows.append([proto, "not run"] + [""] * 7)
            continue
        rows.append([proto, p["calls"], ms(p["p50_us"]), ms(p["p95_us"]), ms(p["p99_us"]), ms(p["avg_us"]),
                     ms(p["min_us"]), ms(p["max_us"]), fnum(p["resp_body_b"])])
    cols = ["protocol", "requests", "median ms", "p95 ms", "p99 ms", "avg ms", "min ms", "max ms", "avg response B"]
    r, g = measured.get("rest") or {}, measured.get("grpc") or {}
    ratio_rows = []
    verdicts = {}
    for label, pk, mk in (("median", "median_ms", "p50_us"), ("p95", "p95_ms", "p95_us"), ("p99", "p99_ms", "p99_us"),
                          ("avg", "avg_ms", "avg_us"), ("max", "max_ms", "max_us"),
                          ("requests", "requests", "calls"), ("avg response size", "avg_response_b", "resp_body_b")):
        pr = ratio(pub["grpc"][pk], pub["rest"][pk])
        mr = ratio(g.get(mk), r.get(mk))
        verdicts[label] = verdict(pr, mr)
        ratio_rows.append([label, fratio(pr), fratio(mr), verdicts[label]])
    published_s = sc["published"]["duration_s"]
    rps = [[proto, fnum(m["calls"] / (m["window_us"] / 1e6), 1) if m and m.get("window_us") else "–",
            fnum(pub[proto]["requests"] / published_s, 1)] for proto, m in measured.items()]
    text = [
        "### Published\n", published_tables(sc),
        "\n### Measured at the proxy (same shape)\n", table(cols, rows),
        "\n*avg response B* is the HTTP response body (for gRPC: the 5-byte frame header plus the message).",
        "\n### Ratios (gRPC ÷ REST)\n", table(["metric", "published", "measured", "verdict"], ratio_rows),
        "\n### Throughput\n", table(["protocol", "measured calls/s (proxy window)", f"published calls/s (requests ÷ {published_s} s)"], rps),
        "\n### Client (loadgen) and proxy side by side\n", client_vs_proxy(result),
        "\n### What only the proxy saw\n", proxy_only(result),
        "\n### Reading\n", explain_e1(result, pub, r, g, verdicts),
    ]
    return "\n".join(text)


def explain_e1(result: dict, pub: dict, r: dict, g: dict, verdicts: dict) -> str:
    if not r or not g:
        return "Not enough data (a step did not run)."
    m_med = ratio(g["p50_us"], r["p50_us"])
    out = [f"- Median: published gRPC is {fratio(ratio(pub['grpc']['median_ms'], pub['rest']['median_ms']))} of REST; "
           f"measured at the proxy {fratio(m_med)} ({verdicts['median']})."]
    out.append(f"- Requests: both protocols ran the same closed model (same users, same think time), so the counts "
               f"are set by the think time, not by the protocol — published {pub['rest']['requests']:,} vs "
               f"{pub['grpc']['requests']:,}, measured {r['calls']:,} vs {g['calls']:,}.")
    out.append(f"- Response size: REST's JSON body averages {fnum(r['resp_body_b'], 1)} B against gRPC's "
               f"{fnum(g['resp_body_b'], 1)} B ({fnum(g['resp_message_b'], 1)} B of message plus the frame); the "
               f"published sizes were {pub['rest']['avg_response_b']} B and {pub['grpc']['avg_response_b']} B.")
    out.append(f"- Headers dominate both: REST sends {fnum(r['req_header_b'], 0)} B of request headers for "
               f"{fnum(r['req_body_b'], 0)} B of body; gRPC {fnum(g['req_header_b'], 0)} B (HPACK brings it to "
               f"{fnum(g['req_header_wire_b'], 0)} B on the wire) for {fnum(g['req_body_b'], 0)} B.")
    out.append("- " + where_time("REST", r, "gRPC", g) + ".")
    if (m_med or 1) > 0.8:
        out.append("- " + result["scenario"]["published"]["reading"]["same_code"])
    return "\n".join(out)


# ---------------------------------------------------------------- E2


def render_e2(result: dict) -> str:
    sc = result["scenario"]
    pub = published_rows(sc, 0)
    sizes = published_rows(sc, 1)
    cpu = published_rows(sc, 2)
    rows, client_rows, ratio_rows = [], [], []
    n_pub = sc["published"]["calls"]
    for variant in ("hello", "hello-big"):
        rs, gs = by_key(result, variant=variant, protocol="rest"), by_key(result, variant=variant, protocol="grpc")
        rp, gp = (rs or {}).get("proxy") or {}, (gs or {}).get("proxy") or {}
        rc, gc = (rs or {}).get("client") or {}, (gs or {}).get("client") or {}
        scale_r = n_pub / rp["calls"] if rp else None
        scale_g = n_pub / gp["calls"] if gp else None
        rest_ms = rp["sum_us"] / 1000 * scale_r if rp else None
        grpc_ms = gp["sum_us"] / 1000 * scale_g if gp else None
        rest_wall = rc["elapsed_s"] * 1000 * n_pub / rc["calls"] if rc.get("calls") else None
        grpc_wall = gc["elapsed_s"] * 1000 * n_pub / gc["calls"] if gc.get("calls") else None
        rows.append([variant, fnum(rest_ms, 0), fnum(grpc_ms, 0)])
        client_rows.append([variant, fnum(rest_wall, 0), fnum(grpc_wall, 0)])
        pr = ratio(pub[variant]["rest_ms"], pub[variant]["grpc_ms"])
        mr, cr = ratio(rest_ms, grpc_ms), ratio(rest_wall, grpc_wall)
        medr = ratio(rp.get("p50_us"), gp.get("p50_us"))
        ratio_rows.append([variant, fratio(pr), fratio(mr), fratio(medr), fratio(cr), verdict(pr, mr)])
    calls = {s["client"].get("calls") for s in result["steps"] if s["client"]}
    scaled = "" if calls == {n_pub} else f" (measured {', '.join(map(str, sorted(c for c in calls if c)))} calls, scaled to {n_pub})"
    hello_r = (by_key(result, variant="hello", protocol="rest") or {}).get("proxy") or {}
    hello_g = (by_key(result, variant="hello", protocol="grpc") or {}).get("proxy") or {}
    big_r = (by_key(result, variant="hello-big", protocol="rest") or {}).get("proxy") or {}
    big_g = (by_key(result, variant="hello-big", protocol="grpc") or {}).get("proxy") or {}
    size_rows = [
        ["request body", sizes["request"]["rest_b"], sizes["request"]["grpc_b"],
         fnum(hello_r.get("req_body_b"), 0), f"{fnum(hello_g.get('req_body_b'), 0)} ({fnum(hello_g.get('req_message_b'), 0)} message)"],
        ["response body (hello)", sizes["response"]["rest_b"], sizes["response"]["grpc_b"],
         fnum(hello_r.get("resp_body_b"), 0), f"{fnum(hello_g.get('resp_body_b'), 0)} ({fnum(hello_g.get('resp_message_b'), 0)} message)"],
        ["response body (hello-big)", "–", "–", fnum(big_r.get("resp_body_b"), 0),
         f"{fnum(big_g.get('resp_body_b'), 0)} ({fnum(big_g.get('resp_message_b'), 0)} message)"],
        ["CPU", f"{cpu['rest']['cpu_percent']} %", f"{cpu['grpc']['cpu_percent']} %", "not measured", "not measured"],
    ]
    text = [
        "### Published\n", published_tables(sc),
        f"\n### Measured at the proxy (same shape): Σ of per-call time, ms per {n_pub:,} calls{scaled}\n",
        table(["variant", "REST ms", "gRPC ms"], rows),
        f"\n*Client wall time* (loadgen, ms per {n_pub:,} calls, what the published authors timed):\n",
        table(["variant", "REST ms", "gRPC ms"], client_rows),
        "\n### Ratios (REST ÷ gRPC)\n",
        table(["variant", "published", "measured (proxy Σ)", "measured (proxy medians)", "measured (client wall)",
               "verdict (proxy Σ)"], ratio_rows),
        "\nThe sum carries every outlier; the ratio of medians is the robust one on a busy machine.",
        "\n### Sizes (bytes)\n",
        table(["", "published REST", "published gRPC", "measured REST", "measured gRPC"], size_rows),
        "\n### Client (loadgen) and proxy side by side\n", client_vs_proxy(result),
        "\n### What only the proxy saw\n", proxy_only(result),
        "\n### Reading\n", explain_e2(sc["published"]["reading"], ratio_rows, hello_r, hello_g, big_r, big_g),
    ]
    return "\n".join(text)


def explain_e2(reading: dict, ratio_rows: list, hr: dict, hg: dict, br: dict, bg: dict) -> str:
    out = []
    for variant, pr, mr, medr, cr, v in ratio_rows:
        out.append(f"- {variant}: published REST took {pr} gRPC's time; measured {mr} at the proxy ({medr} by medians), "
                   f"{cr} at the client ({v}).")
    if hr and hg:
        out.append("- " + where_time("hello over REST", hr, "over gRPC", hg) + ".")
        if hr["p50_us"] < hg["p50_us"]:
            out.append("- " + reading["small_calls"])
    if br and bg:
        out.append(f"- hello-big is where the encodings part: the 1000 strings are {fnum(br['resp_body_b'], 0)} B as JSON "
                   f"and {fnum(bg['resp_message_b'], 0)} B as protobuf; the small hello is dominated by headers "
                   f"({fnum(hr.get('req_header_b'), 0)} B of REST request headers for a {fnum(hr.get('req_body_b'), 0)} B body).")
    out += ["- " + note for note in reading["notes"]]
    return "\n".join(out)


# ---------------------------------------------------------------- E3


def e3_count(step: dict) -> int:
    return int(step["params"]["messages"] if step["key"]["variant"] == "client-stream" else step["params"]["n"])


def render_e3(result: dict) -> str:
    sc = result["scenario"]
    pub = published_rows(sc, 0)
    counts = sorted({e3_count(s) for s in result["steps"]} | set(pub))
    variants = ("rest", "unary", "client-stream")
    cell: dict[tuple, dict] = {}
    for s in result["steps"]:
        cell[(s["key"]["variant"], e3_count(s))] = s
    rows, client_rows, ratio_rows = [], [], []
    for n in counts:
        def proxy_ms(v: str) -> float | None:
            s = cell.get((v, n))
            return s["proxy"]["sum_us"] / 1000 if s and s["proxy"] else None

        def wall_ms(v: str) -> float | None:
            s = cell.get((v, n))
            return s["client"]["elapsed_s"] * 1000 if s and s["client"] else None
        m = [proxy_ms(v) for v in variants]
        w = [wall_ms(v) for v in variants]
        if any(x is not None for x in m):
            rows.append([n] + [fnum(x, 1) if x is not None else "not run" for x in m])
            client_rows.append([n] + [fnum(x, 1) if x is not None else "not run" for x in w])
        p = pub.get(n)
        pr1 = ratio(p["rest_ms"], p["unary_ms"]) if p else None
        pr2 = ratio(p["unary_ms"], p["client_stream_ms"]) if p else None
        rs_, us_ = cell.get(("rest", n)), cell.get(("unary", n))
        medr = ratio((rs_ or {}).get("proxy", {}).get("p50_us"), (us_ or {}).get("proxy", {}).get("p50_us"))
        ratio_rows.append([n, fratio(pr1), fratio(ratio(m[0], m[1])), fratio(medr), fratio(pr2), fratio(ratio(m[1], m[2]))])
    st = [s for s in result["steps"] if s["key"]["variant"] == "client-stream" and s["proxy"]]
    un = [s for s in result["steps"] if s["key"]["variant"] == "unary" and s["proxy"]]
    rs = [s for s in result["steps"] if s["key"]["variant"] == "rest" and s["proxy"]]
    payload_rows = []
    if rs:
        payload_rows.append(["REST JSON body (a person)", fnum(rs[-1]["proxy"]["req_body_b"], 1), ""])
    if un:
        p = un[-1]["proxy"]
        payload_rows.append(["gRPC unary body", fnum(p["req_body_b"], 1), f"{fnum(p['req_message_b'], 1)} B message + 5 B frame"])
    if st:
        p = st[-1]["proxy"]
        per = p["req_message_b"] / p["req_messages"] if p["req_messages"] else None
        payload_rows.append([f"client stream, per message ({int(p['req_messages']):,} messages)", fnum(per, 1),
                             "message only; 5 B frame each"])
    text = [
        "### Published\n", published_tables(sc),
        "\n### Measured at the proxy (same shape): Σ of per-call time, ms (a client stream is one call)\n",
        table(["count", "REST ms", "unary ms", "client stream ms"], rows),
        "\n*Client wall time* (loadgen, ms; warm-up excluded):\n",
        table(["count", "REST ms", "unary ms", "client stream ms"], client_rows),
        "\n### Ratios\n",
        table(["count", "REST ÷ unary, published", "measured (Σ)", "measured (medians)", "unary ÷ stream, published",
               "measured (Σ)"], ratio_rows),
        "\n### The person on the wire (measured, bytes)\n", table(["", "bytes", "note"], payload_rows),
        "\n### Client (loadgen) and proxy side by side\n", client_vs_proxy(result),
        "\n### What only the proxy saw\n", proxy_only(result),
        "\n### Reading\n", explain_e3(sc["published"]["reading"], ratio_rows, counts, cell),
    ]
    return "\n".join(text)


def explain_e3(reading: dict, ratio_rows: list, counts: list[int], cell: dict) -> str:
    out = []
    measured = [r for r in ratio_rows if r[2] != "–"]
    if measured:
        lo, hi = measured[0], measured[-1]
        out.append(f"- REST ÷ unary: published {lo[1]} at {lo[0]:,} calls to {hi[1]} at {hi[0]:,}; "
                   f"measured {lo[2]} to {hi[2]} ({lo[3]} to {hi[3]} by medians).")
        out.append(f"- Unary ÷ client stream: published {lo[4]} at {lo[0]:,} to {hi[4]} at {hi[0]:,}; "
                   f"measured {lo[5]} to {hi[5]}. " + reading["stream"])
    big = max((n for n in counts if cell.get(("client-stream", n)) and cell[("client-stream", n)]["proxy"]), default=None)
    if big:
        p = cell[("client-stream", big)]["proxy"]
        out.append(f"- The proxy counted the {big:,}-person stream exactly: {int(p['req_messages']):,} request messages, "
                   f"{int(p['resp_messages'])} reply, one row.")
    return "\n".join(out)


# ---------------------------------------------------------------- E4


PAYLOADS = {"product": "GetProduct (~0.8 KB)", "list100": "ListProducts(100)", "list500": "ListProducts(500)"}


def render_e4(result: dict) -> str:
    sc = result["scenario"]
    rows, trend = [], {}
    for payload, label in PAYLOADS.items():
        users = sorted({s["key"]["users"] for s in result["steps"] if s["key"]["payload"] == payload})
        for u in users:
            r = (by_key(result, payload=payload, users=u, protocol="rest") or {}).get("proxy") or {}
            g = (by_key(result, payload=payload, users=u, protocol="grpc") or {}).get("proxy") or {}

            def rps(p: dict) -> float | None:
                return p["calls"] / (p["window_us"] / 1e6) if p and p.get("window_us") else None
            pr, ptr = ratio(g.get("p90_us"), r.get("p90_us")), ratio(rps(g), rps(r))
            trend.setdefault(payload, []).append((u, pr, ptr, r, g))
            rows.append([label, u, ms(r.get("p90_us")), ms(g.get("p90_us")), fratio(pr),
                         fnum(rps(r), 0), fnum(rps(g), 0), fratio(ptr),
                         f"{fnum(r.get('resp_body_b'), 0)} / {fnum(g.get('resp_body_b'), 0)}"])
    text = [
        "### Published\n", published_tables(sc),
        "\n### Measured at the proxy\n",
        table(["payload", "users", "REST p90 ms", "gRPC p90 ms", "gRPC ÷ REST p90", "REST calls/s", "gRPC calls/s",
               "gRPC ÷ REST calls/s", "response body B REST / gRPC"], rows),
        "\nCalls/s is the step's calls over its window at the proxy (first call in to last call out).",
        "\n### Client (loadgen) and proxy side by side\n", client_vs_proxy(result),
        "\n### What only the proxy saw\n", proxy_only(result),
        "\n### Reading\n", explain_e4(sc["published"]["reading"], trend),
    ]
    return "\n".join(text)


def explain_e4(reading: dict, trend: dict) -> str:
    out = []
    for payload, points in trend.items():
        pts = [(u, pr, ptr) for u, pr, ptr, _, _ in points if pr is not None]
        if not pts:
            continue
        (u0, pr0, t0), (u1, pr1, t1) = pts[0], pts[-1]
        lead0 = "gRPC" if pr0 < 1 else "REST"
        lead1 = "gRPC" if pr1 < 1 else "REST"
        line = (f"- {PAYLOADS[payload]}: at {u0} user{'s' if u0 != 1 else ''} {lead0} has the lower p90 "
                f"(gRPC ÷ REST {fratio(pr0)}); at {u1} users {lead1} (gRPC ÷ REST {fratio(pr1)}, throughput {fratio(t1)}).")
        if payload == "list500":
            line += (f" {reading['list500']} — "
                     + ("measured agrees in direction." if pr1 < 1 and (t1 or 0) > 1 else "measured differs."))
        else:
            line += (f" {reading['smaller']} — measured "
                     + ("agrees." if pr0 >= 1 and pr1 < pr0 else
                        "shows gRPC ahead from the start." if pr0 < 1 else "differs."))
        out.append(line)
    # The large list at its lowest level (no queueing): where each protocol's call spends its time. The
    # encodings paragraph only where it holds: REST's upstream exchange is its largest part and above gRPC's.
    if trend.get("list500"):
        users, _, _, r, g = min(trend["list500"], key=lambda point: point[0])
        if r and g:
            out.append(f"- {PAYLOADS['list500']} at {users} user{'s' if users != 1 else ''}, "
                       + where_time("over REST", r, "over gRPC", g) + ".")
            if (r["upstream_p50_us"] or 0) > max(g["upstream_p50_us"] or 0, r["in_envoy_p50_us"] or 0):
                out.append("- " + reading["large_bodies"])
    out += ["- " + note for note in reading["notes"]]
    return "\n".join(out)


# ---------------------------------------------------------------- E5


def render_e5(result: dict) -> str:
    sc = result["scenario"]
    pub = published_rows(sc)
    n_pub = sc["published"]["calls"]
    rows, client_rows, ratio_rows = [], [], []
    measured: dict[str, float | None] = {}
    ns = set()
    for variant in ("unary", "bidi-stream", "rest-proto", "rest-json", "bidi-stream-pipelined"):
        s = by_key(result, variant=variant)
        if s is None and variant not in pub:
            continue
        p, c = (s or {}).get("proxy") or {}, (s or {}).get("client") or {}
        n = (int(s["params"].get("messages", 1)) if variant.startswith("bidi") else int(s["params"]["n"])) if s else None
        if n:
            ns.add(n)
        failed = bool(s and s.get("rc"))  # loadgen failed (the section's Problems line): its numbers are no result
        total = p["sum_us"] / 1e6 * n_pub / n if p and n and not failed else None
        wall = c["elapsed_s"] * n_pub / n if c and n and not failed else None
        measured[variant] = total
        label = variant if variant in pub else f"{variant} (not published)"
        label += ", failed" if failed else ""
        rows.append([label, fnum(total, 3), fnum(n_pub / total if total else None, 0)])
        client_rows.append([label, fnum(wall, 3), fnum(n_pub / wall if wall else None, 0)])
    unary_p50 = ((by_key(result, variant="unary") or {}).get("proxy") or {}).get("p50_us")
    for variant in ("bidi-stream", "rest-proto", "rest-json"):
        pr = ratio(pub[variant]["total_s"], pub["unary"]["total_s"])
        mr = ratio(measured.get(variant), measured.get("unary"))
        medr = None
        if not variant.startswith("bidi"):
            medr = ratio(((by_key(result, variant=variant) or {}).get("proxy") or {}).get("p50_us"), unary_p50)
        ratio_rows.append([f"{variant} ÷ unary", fratio(pr), fratio(mr), fratio(medr), verdict(pr, mr)])
    if measured.get("bidi-stream-pipelined"):
        ratio_rows.append(["bidi-stream-pipelined ÷ unary", "–",
                           fratio(ratio(measured["bidi-stream-pipelined"], measured.get("unary"))), "–", "not published"])
    scaled = "" if ns == {n_pub} else f" (measured {', '.join(f'{n:,}' for n in sorted(ns))}, scaled to {n_pub:,})"
    text = [
        "### Published\n", published_tables(sc),
        f"\n### Measured at the proxy (same shape): Σ of per-call time for {n_pub:,} calls or messages{scaled}\n",
        table(["variant", "total s", "calls/s"], rows),
        "\n*Client wall time* (loadgen):\n", table(["variant", "total s", "calls/s"], client_rows),
        "\n### Ratios (total time ÷ unary's)\n",
        table(["", "published", "measured (proxy Σ)", "measured (proxy medians)", "verdict (proxy Σ)"], ratio_rows),
        "\nThe sum carries every outlier; the ratio of medians (per call) is the robust one on a busy machine.",
        "\n### Client (loadgen) and proxy side by side\n", client_vs_proxy(result),
        "\n### What only the proxy saw\n", proxy_only(result),
        "\n### Reading\n", explain_e5(result, ratio_rows),
    ]
    return "\n".join(text)


def where_time(label_a: str, a: dict, label_b: str, b: dict) -> str:
    """Where two steps' calls spent their time, medians: at the proxy (the filter), and Envoy's split of its
    own duration into the upstream exchange and the time in Envoy (µs, per_run.sql), then which part the
    second step's calls spend more or less of."""
    def split(p: dict) -> str:
        return f"{fnum(p['upstream_p50_us'], 0)} µs upstream, {fnum(p['in_envoy_p50_us'], 0)} µs in Envoy"

    text = (f"{label_a}: median {ms(a['p50_us'])} ms at the proxy ({split(a)}); "
            f"{label_b}: median {ms(b['p50_us'])} ms ({split(b)}), medians")
    parts = [(name, b[key] - a[key]) for name, key in (("upstream", "upstream_p50_us"), ("in Envoy", "in_envoy_p50_us"))
             if a.get(key) is not None and b.get(key) is not None]
    if parts:
        text += f": {label_b.removeprefix('over ')}'s calls spend " + " and ".join(
            f"{fnum(abs(d), 0)} µs {'more' if d > 0 else 'less'} {name}" if d else f"the same time {name}"
            for name, d in parts)
    return text


def explain_e5(result: dict, ratio_rows: list) -> str:
    out = [f"- {name}: published {pr}, measured {mr}" + (f" ({medr} by medians)" if medr != "–" else "") + f" ({v})."
           for name, pr, mr, medr, v in ratio_rows]
    un = (by_key(result, variant="unary") or {}).get("proxy") or {}
    rp = (by_key(result, variant="rest-proto") or {}).get("proxy") or {}
    rj = (by_key(result, variant="rest-json") or {}).get("proxy") or {}
    bs = (by_key(result, variant="bidi-stream") or {}).get("proxy") or {}
    if un and rj:
        out.append("- " + where_time("unary gRPC", un, "REST JSON", rj) + ".")
        if rj["p50_us"] < un["p50_us"]:
            out.append("- " + result["scenario"]["published"]["reading"]["small_calls"])
    if rp and rj:
        out.append(f"- REST protobuf vs JSON: bodies of {fnum(rp['resp_body_b'], 1)} B and {fnum(rj['resp_body_b'], 1)} B; "
                   f"the request is a GET either way ({fnum(rp['req_header_b'], 0)} B of headers). At this size the "
                   f"encoding is a rounding error next to the per-request cost, so the two stay close.")
    if bs:
        out.append(f"- The stream pays the per-call cost once: the proxy saw one call carrying "
                   f"{int(bs['req_messages']):,} messages each way ({fnum(bs['req_body_b'] / max(1, bs['req_messages']), 1)} B "
                   f"per message with its frame), and {fnum(bs['wire_in_b'] / max(1, bs['req_messages']), 1)} B per message on the wire.")
    return "\n".join(out)


RENDER = {"e1": render_e1, "e2": render_e2, "e3": render_e3, "e4": render_e4, "e5": render_e5}
