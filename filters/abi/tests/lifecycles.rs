//! HTTP lifecycles driven through the built filter module, one VM per test
//! (per row of the `lifecycles` table). Every callback must return
//! Continue and nothing may trap (the `Vm` methods fail otherwise); every
//! record is compared field by field with values computed here from what
//! was fed.

mod common;

use common::*;
use wirelens_abi::{base64, grpc_frame, header_bytes, percent_encode, Headers, Vm};

fn grpc_web_request(path: &str, content_type: &str) -> Headers {
    h(&[
        (":method", "POST"),
        (":scheme", "http"),
        (":path", path),
        (":authority", "localhost:10000"),
        ("content-type", content_type),
        ("accept", content_type),
        ("x-grpc-web", "1"),
        ("x-user-agent", "grpc-web-javascript/0.1"),
        ("origin", "http://localhost:8080"),
        ("x-forwarded-proto", "http"),
        ("x-request-id", "0b7e4f2a-3c1d-4e5f-8a9b-0c1d2e3f4a5b"),
    ])
}

/// Checks at the end of every test.
fn finish_clean(vm: &mut Vm, ctx: u32) {
    silent(vm, |vm| vm.finish(ctx).unwrap());
    assert_clean(vm);
}

/// A callback Envoy makes to the stream, or a clock change.
#[derive(Clone)]
enum Step {
    /// The host clock from now on (offset from `T0`, ns).
    At(u64),
    RequestHeaders(Headers, bool),
    RequestBody(Vec<u8>, bool),
    ResponseHeaders(Headers, bool),
    ResponseBody(Vec<u8>, bool),
    ResponseTrailers(Headers),
    Log,
}
use Step::*;

impl Step {
    fn run(&self, vm: &mut Vm, ctx: u32) {
        match self {
            At(t) => at(vm, *t),
            RequestHeaders(m, end) => vm.request_headers(ctx, m, *end).unwrap(),
            RequestBody(b, end) => vm.request_body(ctx, b, *end).unwrap(),
            ResponseHeaders(m, end) => vm.response_headers(ctx, m, *end).unwrap(),
            ResponseBody(b, end) => vm.response_body(ctx, b, *end).unwrap(),
            ResponseTrailers(m) => vm.response_trailers(ctx, m).unwrap(),
            Log => vm.log(ctx).unwrap(),
        }
    }
}

/// One stream through a fresh VM: its callbacks in order, of which the
/// last publishes and every other is silent, and the record expected. The
/// sizes of what was fed (header maps, trailers, bodies) are added to
/// `want` from the steps; everything else is the row's.
struct Lifecycle {
    name: &'static str,
    steps: Vec<Step>,
    want: Expect,
    /// Further checks on the VM, the stream and the published bytes.
    check: Option<fn(&Vm, u32, &[u8])>,
}

impl Lifecycle {
    fn new(name: &'static str, steps: Vec<Step>, want: Expect) -> Self {
        Lifecycle {
            name,
            steps,
            want,
            check: None,
        }
    }

    fn run(mut self) {
        let name = self.name;
        for step in &self.steps {
            match step {
                RequestHeaders(m, _) => self.want.req_headers = header_bytes(m),
                RequestBody(b, _) => self.want.req_body += b.len() as u64,
                ResponseHeaders(m, _) => self.want.resp_headers = header_bytes(m),
                ResponseBody(b, _) => self.want.resp_body += b.len() as u64,
                ResponseTrailers(m) => self.want.resp_trailers = header_bytes(m),
                At(_) | Log => {}
            }
        }
        let mut vm = Vm::with_config(CONFIG).unwrap();
        let ctx = vm.create_stream().unwrap();
        let (last, before) = self.steps.split_last().expect(name);
        silent(&mut vm, |vm| before.iter().for_each(|s| s.run(vm, ctx)));
        let props = publishes(&mut vm, |vm| last.run(vm, ctx));
        let record = check_publication(&props, ctx);
        println!("{name}");
        assert_record(&record, &self.want);
        if let Some(check) = self.check {
            check(&vm, ctx, &props[0].value);
        }
        if matches!(last, Log) {
            silent(&mut vm, |vm| {
                vm.done(ctx).unwrap();
                vm.delete(ctx).unwrap();
            });
            assert_clean(&vm);
        } else {
            finish_clean(&mut vm, ctx);
        }
    }
}

/// `hello.SayHello`, as the test configuration maps it.
fn say_hello(protocol: &'static str) -> Expect {
    Expect::new(protocol).op(
        "hello.SayHello",
        "wirelens.v1.Hello",
        "SayHello",
        Some("unary"),
    )
}

/// Frame statistics: (flags, payload length) of each complete data frame,
/// and the header-block length of a trailer frame.
fn dir(messages: &[(u8, usize)], trailer_frame: Option<usize>) -> Dir {
    let mut d = Dir::default();
    for &(flags, len) in messages {
        d.message(flags, len);
    }
    if let Some(len) = trailer_frame {
        d.trailer_frame(len);
    }
    d
}

/// Expected values a row sets beyond the fed sizes.
struct Want {
    grpc_status: Option<u64>,
    grpc_message: Option<&'static str>,
    frames: Option<(Dir, Dir)>,
    /// (time to first byte, duration, request duration), µs.
    times: (Option<u64>, Option<u64>, Option<u64>),
    malformed: bool,
}

impl Want {
    fn on(self, mut e: Expect) -> Expect {
        e.grpc_status = self.grpc_status;
        e.grpc_message = self.grpc_message.map(String::from);
        e.frames = self.frames;
        (e.ttfb_us, e.duration_us, e.req_duration_us) = self.times;
        e.malformed = self.malformed;
        e
    }
}

const OK: Want = Want {
    grpc_status: None,
    grpc_message: None,
    frames: None,
    times: (None, None, None),
    malformed: false,
};

#[test]
fn lifecycles() {
    let rest_req = h(&[
        (":authority", "localhost:10000"),
        (":path", "/v1/hello?lang=en"),
        (":method", "POST"),
        (":scheme", "http"),
        ("user-agent", "curl/8.5.0"),
        ("accept", "*/*"),
        ("content-type", "application/json"),
        ("content-length", "37"),
        ("x-forwarded-proto", "http"),
        ("x-request-id", "8d1f0c6e-6a43-4b0c-9d7e-3f2b1a0c9e8d"),
    ]);
    let rest_body = br#"{"name":"world","greeting":"hello!"}"#;
    let rest_resp = h(&[
        (":status", "200"),
        ("content-type", "application/json"),
        ("content-length", "28"),
        ("date", "Sat, 22 Nov 2025 02:51:00 GMT"),
        ("x-envoy-upstream-service-time", "3"),
        ("server", "envoy"),
    ]);
    let (t_req, t_req_end, t_resp, t_end) = (0, 1_000_500, 2_500_999, 8_000_001);
    let mut rest = Lifecycle::new(
        "REST JSON POST, unary",
        vec![
            At(t_req),
            RequestHeaders(rest_req, false),
            RequestBody(rest_body[..10].to_vec(), false),
            At(t_req_end),
            RequestBody(rest_body[10..].to_vec(), true),
            At(t_resp),
            ResponseHeaders(rest_resp, false),
            At(t_end),
            ResponseBody(br#"{"message":"hello, world!"}"#.to_vec(), true),
        ],
        Want {
            times: (
                Some(us(t_req, t_resp)),
                Some(us(t_req, t_end)),
                Some(us(t_req, t_req_end)),
            ),
            ..OK
        }
        .on(say_hello("rest")),
    );
    rest.want.route = Some("/v1/hello".into());
    // REST bodies are only counted, never read.
    rest.check = Some(|vm, ctx, _| {
        let stream_calls: Vec<_> = vm
            .host()
            .calls
            .iter()
            .filter(|c| c.context_id == ctx)
            .collect();
        assert!(
            !stream_calls
                .iter()
                .any(|c| c.name == "env.proxy_get_buffer_bytes"),
            "{stream_calls:?}"
        );
    });

    let req_msg = b"\x0a\x05world";
    let resp_msg = b"\x0a\x0dhello, world!";
    let (t0, t1, t2, t3, t4) = (0, 700_000, 2_100_000, 2_900_000, 4_000_000);
    let grpc_unary = Lifecycle::new(
        "gRPC unary with response trailers",
        vec![
            At(t0),
            RequestHeaders(
                grpc_request("/wirelens.v1.Hello/SayHello", "application/grpc"),
                false,
            ),
            At(t1),
            RequestBody(grpc_frame(0, req_msg), true),
            At(t2),
            ResponseHeaders(
                h(&[
                    (":status", "200"),
                    ("content-type", "application/grpc"),
                    ("grpc-accept-encoding", "gzip"),
                ]),
                false,
            ),
            At(t3),
            ResponseBody(grpc_frame(0, resp_msg), false),
            At(t4),
            ResponseTrailers(h(&[("grpc-status", "0"), ("grpc-message", "all good")])),
        ],
        Want {
            grpc_status: Some(0),
            grpc_message: Some("all good"),
            frames: Some((
                dir(&[(0, req_msg.len())], None),
                dir(&[(0, resp_msg.len())], None),
            )),
            times: (Some(us(t0, t2)), Some(us(t0, t4)), Some(us(t0, t1))),
            ..OK
        }
        .on(say_hello("grpc")),
    );

    let message = "id must be > 0 — got 0 (100%)\tsee «docs»";
    let encoded = percent_encode(message);
    assert!(
        encoded.contains("%25") && encoded.contains("%E2%80%94") && encoded.contains("%09"),
        "{encoded}"
    );
    let mut trailers_only = Lifecycle::new(
        "trailers-only gRPC error, percent-encoded message",
        vec![
            At(0),
            RequestHeaders(
                grpc_request("/wirelens.v1.Catalog/GetProduct", "application/grpc"),
                false,
            ),
            At(300_000),
            RequestBody(grpc_frame(0, b"\x08\x00"), true),
            At(1_234_567),
            ResponseHeaders(
                h(&[
                    (":status", "200"),
                    ("content-type", "application/grpc"),
                    ("grpc-status", "3"),
                    ("grpc-message", &encoded),
                ]),
                true,
            ),
        ],
        Want {
            grpc_status: Some(3),
            grpc_message: Some("id must be > 0 — got 0 (100%)\tsee «docs»"),
            frames: Some((dir(&[(0, 2)], None), Dir::default())),
            times: (
                Some(us(0, 1_234_567)),
                Some(us(0, 1_234_567)),
                Some(us(0, 300_000)),
            ),
            ..OK
        }
        .on(Expect::new("grpc").op(
            "catalog.GetProduct",
            "wirelens.v1.Catalog",
            "GetProduct",
            Some("unary"),
        )),
    );
    // The tab is a control character: the record carries it as it is (the
    // access log's JSON escapes it; format 2 escapes only `%` and `,`).
    trailers_only.check = Some(|_, _, value| {
        assert!(std::str::from_utf8(value).unwrap().contains("\tsee"));
    });

    // One whole message, then half of the next one: the client resets.
    let mut reset_req = grpc_frame(0, &bytes(1, 100));
    reset_req.extend(&grpc_frame(0, &bytes(2, 50))[..20]);
    let mut reset_resp = grpc_frame(1, &bytes(3, 64));
    reset_resp.extend(&grpc_frame(0, &bytes(4, 64))[..3]);
    let reset = Lifecycle::new(
        "reset stream, published from on_log",
        vec![
            At(0),
            RequestHeaders(
                grpc_request("/wirelens.v1.Upload/Collect", "application/grpc"),
                false,
            ),
            RequestBody(reset_req, false),
            At(2_000_000),
            ResponseHeaders(
                h(&[(":status", "200"), ("content-type", "application/grpc")]),
                false,
            ),
            ResponseBody(reset_resp, false),
            At(7_654_321),
            Log,
        ],
        Want {
            frames: Some((dir(&[(0, 100)], None), dir(&[(1, 64)], None))),
            // on_log time − start; the request never ended; a reset
            // mid-frame is not malformed.
            times: (Some(us(0, 2_000_000)), Some(us(0, 7_654_321)), None),
            ..OK
        }
        .on(Expect::new("grpc").op(
            "upload.Collect",
            "wirelens.v1.Upload",
            "Collect",
            Some("client"),
        )),
    );

    let mut reset_early = Lifecycle::new(
        "reset before response headers",
        vec![
            At(10_000),
            RequestHeaders(
                h(&[
                    (":method", "GET"),
                    (":path", "/v1/products/42"),
                    (":authority", "x"),
                    (":scheme", "http"),
                ]),
                true,
            ),
            At(30_010_000),
            Log,
        ],
        Want {
            // Headers with end of stream: the request took 0.
            times: (None, Some(us(10_000, 30_010_000)), Some(0)),
            ..OK
        }
        .on(Expect::new("rest").op(
            "catalog.GetProduct",
            "wirelens.v1.Catalog",
            "GetProduct",
            Some("unary"),
        )),
    );
    reset_early.want.route = Some("/v1/products/{id}".into());

    let mut cut_req = grpc_frame(0, b"\x0a\x02hi");
    cut_req.extend(&grpc_frame(0, &bytes(9, 30))[..12]); // declares 30 bytes, 7 arrive
    let malformed_request = Lifecycle::new(
        "request body ends mid-frame",
        vec![
            At(0),
            RequestHeaders(
                grpc_request("/wirelens.v1.Hello/SayHello", "application/grpc"),
                false,
            ),
            RequestBody(cut_req[..6].to_vec(), false),
            At(1_000),
            RequestBody(cut_req[6..].to_vec(), true),
            At(2_000),
            ResponseHeaders(
                h(&[(":status", "200"), ("content-type", "application/grpc")]),
                false,
            ),
            ResponseBody(grpc_frame(0, b""), false),
            At(3_000),
            ResponseTrailers(h(&[
                ("grpc-status", "13"),
                ("grpc-message", "truncated%20request"),
            ])),
        ],
        Want {
            grpc_status: Some(13),
            grpc_message: Some("truncated request"),
            // Only the complete frame counts.
            frames: Some((dir(&[(0, 4)], None), dir(&[(0, 0)], None))),
            times: (Some(2), Some(3), Some(1)),
            malformed: true,
        }
        .on(say_hello("grpc")),
    );

    // grpc-web binary: the response ends inside a frame prefix.
    let mut cut_resp = grpc_frame(0, b"ok");
    cut_resp.extend([0x80, 0, 0]); // 3 of 5 prefix bytes
    let malformed_response = Lifecycle::new(
        "grpc-web response ends inside a frame prefix",
        vec![
            At(0),
            RequestHeaders(
                grpc_web_request("/wirelens.v1.Hello/SayHello", "application/grpc-web"),
                true,
            ),
            ResponseHeaders(
                h(&[(":status", "200"), ("content-type", "application/grpc-web")]),
                false,
            ),
            ResponseBody(cut_resp, true),
        ],
        Want {
            frames: Some((Dir::default(), dir(&[(0, 2)], None))),
            times: (Some(0), Some(0), Some(0)),
            malformed: true,
            ..OK
        }
        .on(say_hello("grpc-web")),
    );

    // grpc-web-text: an invalid base64 character in the request body.
    let bad_text = format!("{}*AAA", base64(&grpc_frame(0, b"abc")));
    let bad_base64 = Lifecycle::new(
        "grpc-web-text request with bad base64",
        vec![
            At(0),
            RequestHeaders(
                grpc_web_request("/wirelens.v1.Hello/SayHello", "application/grpc-web-text"),
                false,
            ),
            RequestBody(bad_text.into_bytes(), true),
            ResponseHeaders(
                h(&[
                    (":status", "200"),
                    ("content-type", "application/grpc-web-text"),
                ]),
                false,
            ),
            ResponseBody(
                base64(&grpc_frame(0x80, b"grpc-status:0\r\n")).into_bytes(),
                true,
            ),
        ],
        Want {
            grpc_status: Some(0),
            frames: Some((
                dir(&[(0, 3)], None),
                dir(&[], Some(b"grpc-status:0\r\n".len())),
            )),
            times: (Some(0), Some(0), Some(0)),
            malformed: true,
            ..OK
        }
        .on(say_hello("grpc-web-text")),
    );

    // Envoy's grpc_web filter (after wirelens in the chain, so before it on
    // the response path) turns upstream trailers into a 0x80 frame passed
    // as body data (end_of_stream false), then the emptied trailer map
    // reaches wirelens: proxy_on_response_trailers with 0 trailers.
    let block = b"grpc-status:0\r\ngrpc-message:\r\nx-trace:abc\r\n";
    let grpc_web_envoy = Lifecycle::new(
        "grpc-web as Envoy delivers it: empty trailers after the trailer frame",
        vec![
            At(0),
            RequestHeaders(
                grpc_web_request("/wirelens.v1.Hello/SayHello", "application/grpc-web+proto"),
                false,
            ),
            RequestBody(grpc_frame(0, b"\x0a\x01x"), true),
            At(1_000_000),
            ResponseHeaders(
                h(&[
                    (":status", "200"),
                    ("content-type", "application/grpc-web+proto"),
                ]),
                false,
            ),
            ResponseBody(grpc_frame(0, b"\x0a\x07hello x"), false),
            ResponseBody(grpc_frame(0x80, block), false),
            At(2_000_000),
            ResponseTrailers(Vec::new()),
        ],
        Want {
            grpc_status: Some(0), // empty grpc-message: omitted
            frames: Some((dir(&[(0, 3)], None), dir(&[(0, 9)], Some(block.len())))),
            times: (Some(1000), Some(2000), Some(0)),
            ..OK
        }
        .on(say_hello("grpc-web")),
    );

    for lifecycle in [
        rest,
        grpc_unary,
        trailers_only,
        reset,
        reset_early,
        malformed_request,
        malformed_response,
        bad_base64,
        grpc_web_envoy,
    ] {
        lifecycle.run();
    }
}

#[test]
fn grpc_client_streaming_frames_split_across_chunks() {
    let mut vm = Vm::with_config(CONFIG).unwrap();
    let ctx = vm.create_stream().unwrap();
    let req = grpc_request("/wirelens.v1.Upload/Collect", "application/grpc+proto");
    // 60 messages: empty ones, compressed ones, and two larger than the
    // filter's 16 KiB read window.
    let mut rq = Dir::default();
    let mut body = Vec::new();
    for i in 0..60usize {
        let len = match i {
            7 | 31 => 0,
            20 => 40_000,
            45 => 16 * 1024 + 3,
            _ => (i * 37) % 300 + 1,
        };
        let flags = if i % 9 == 4 { 1 } else { 0 };
        body.extend(grpc_frame(flags, &bytes(i as u64, len)));
        rq.message(flags, len);
    }
    // Chunks of 1..13 bytes around the start (prefixes split in every
    // position), then larger odd sizes.
    let mut sizes: Vec<usize> = (1..=13).collect();
    sizes.extend([4093, 2, 777, 3, 1500, 5, 9000, 4]);
    let pieces = chunks(&body, &sizes);
    assert!(pieces.len() > 50, "{} chunks", pieces.len());
    let resp = h(&[
        (":status", "200"),
        ("content-type", "application/grpc+proto"),
    ]);
    let resp_msg = b"\x08\x3c";
    let resp_body = grpc_frame(0, resp_msg);
    let trailers = h(&[("grpc-status", "0")]);

    silent(&mut vm, |vm| {
        at(vm, 0);
        vm.request_headers(ctx, &req, false).unwrap();
        for (i, p) in pieces.iter().enumerate() {
            at(vm, 1_000 * (i as u64 + 1));
            vm.request_body(ctx, p, i + 1 == pieces.len()).unwrap();
        }
        at(vm, 90_000_000);
        vm.response_headers(ctx, &resp, false).unwrap();
        vm.response_body(ctx, &resp_body, false).unwrap();
    });
    at(&mut vm, 91_000_000);
    let props = publishes(&mut vm, |vm| vm.response_trailers(ctx, &trailers).unwrap());
    let record = check_publication(&props, ctx);

    let mut want = Expect::new("grpc").op(
        "upload.Collect",
        "wirelens.v1.Upload",
        "Collect",
        Some("client"),
    );
    // `grpc-status: 0` alone is only sized: Envoy's %GRPC_STATUS% carries it.
    want.grpc_status = None;
    want.req_headers = header_bytes(&req);
    want.resp_headers = header_bytes(&resp);
    want.resp_trailers = header_bytes(&trailers);
    want.req_body = body.len() as u64;
    want.resp_body = resp_body.len() as u64;
    let mut rs = Dir::default();
    rs.message(0, resp_msg.len());
    want.frames = Some((rq, rs));
    want.ttfb_us = Some(us(0, 90_000_000));
    want.duration_us = Some(us(0, 91_000_000));
    want.req_duration_us = Some(us(0, 1_000 * pieces.len() as u64));
    assert_record(&record, &want);
    assert_eq!(rq.bytes + rq.framing, body.len() as u64);
    // Message payloads are skipped, not copied: well under the body size.
    let copied = vm.host().body_bytes_copied;
    println!(
        "client streaming: request body {} bytes in {} chunks, {} bytes copied to the module",
        body.len(),
        pieces.len(),
        copied
    );
    assert!(
        copied < body.len() as u64,
        "copied {copied} of {}",
        body.len()
    );
    finish_clean(&mut vm, ctx);
}

#[test]
fn grpc_web_binary_trailer_frame_in_body() {
    let mut vm = Vm::with_config(CONFIG).unwrap();
    let ctx = vm.create_stream().unwrap();
    let req = grpc_web_request(
        "/wirelens.v1.Catalog/GetProduct",
        "application/grpc-web+proto",
    );
    let req_msg = b"\x08\x2a";
    let req_body = grpc_frame(0, req_msg);
    let resp = h(&[
        (":status", "200"),
        ("content-type", "application/grpc-web+proto"),
        ("access-control-allow-origin", "http://localhost:8080"),
        ("access-control-expose-headers", "grpc-status,grpc-message"),
    ]);
    let resp_msg = b"\x0a\x03abc";
    let trailer_block = b"grpc-status:5\r\ngrpc-message:product%2042%20not%20found\r\n";
    let mut resp_body = grpc_frame(0, resp_msg);
    resp_body.extend(grpc_frame(0x80, trailer_block));
    // Split inside the trailer frame's prefix and inside its block.
    let cut1 = resp_msg.len() + 5 + 2;
    let cut2 = cut1 + 20;
    let (t0, t1, t2, t3) = (0, 500_000, 1_500_000, 2_250_000);

    silent(&mut vm, |vm| {
        at(vm, t0);
        vm.request_headers(ctx, &req, false).unwrap();
        at(vm, t1);
        vm.request_body(ctx, &req_body, true).unwrap();
        at(vm, t2);
        vm.response_headers(ctx, &resp, false).unwrap();
        vm.response_body(ctx, &resp_body[..cut1], false).unwrap();
        vm.response_body(ctx, &resp_body[cut1..cut2], false)
            .unwrap();
    });
    at(&mut vm, t3);
    let props = publishes(&mut vm, |vm| {
        vm.response_body(ctx, &resp_body[cut2..], true).unwrap()
    });
    let record = check_publication(&props, ctx);

    let mut want = Expect::new("grpc-web").op(
        "catalog.GetProduct",
        "wirelens.v1.Catalog",
        "GetProduct",
        Some("unary"),
    );
    want.grpc_status = Some(5);
    want.grpc_message = Some("product 42 not found".into());
    want.req_headers = header_bytes(&req);
    want.resp_headers = header_bytes(&resp);
    want.req_body = req_body.len() as u64;
    want.resp_body = resp_body.len() as u64;
    let (mut rq, mut rs) = (Dir::default(), Dir::default());
    rq.message(0, req_msg.len());
    rs.message(0, resp_msg.len());
    rs.trailer_frame(trailer_block.len());
    want.frames = Some((rq, rs));
    want.ttfb_us = Some(us(t0, t2));
    want.duration_us = Some(us(t0, t3));
    want.req_duration_us = Some(us(t0, t1));
    assert_record(&record, &want);
    finish_clean(&mut vm, ctx);
}

#[test]
fn grpc_web_text_request_and_response() {
    let mut vm = Vm::with_config(CONFIG).unwrap();
    let ctx = vm.create_stream().unwrap();
    let req = grpc_web_request("/wirelens.v1.Hello/SayHello", "application/grpc-web-text");
    let req_msg = b"\x0a\x05world";
    let req_text = base64(&grpc_frame(0, req_msg));
    let resp = h(&[
        (":status", "200"),
        ("content-type", "application/grpc-web-text+proto"),
    ]);
    // Three messages (one compressed, one empty), then the trailer frame;
    // each frame base64-encoded (and padded) separately, as servers do.
    let msgs: [(u8, &[u8]); 3] = [
        (0, b"\x0a\x0dhello, world!"),
        (1, b"\x1f\x8b\x08\x00"),
        (0, b""),
    ];
    let trailer_block = format!(
        "grpc-status:0\r\ngrpc-message:{}\r\n",
        percent_encode("café")
    );
    let mut rs = Dir::default();
    let mut resp_text = String::new();
    for (flags, m) in msgs {
        resp_text.push_str(&base64(&grpc_frame(flags, m)));
        rs.message(flags, m.len());
    }
    resp_text.push_str(&base64(&grpc_frame(0x80, trailer_block.as_bytes())));
    rs.trailer_frame(trailer_block.len());
    assert!(
        resp_text.contains('='),
        "frames padded separately: {resp_text}"
    );
    let req_pieces = chunks(req_text.as_bytes(), &[3, 5, 1]);
    let resp_pieces = chunks(resp_text.as_bytes(), &[7, 1, 10, 2, 13]);

    silent(&mut vm, |vm| {
        at(vm, 0);
        vm.request_headers(ctx, &req, false).unwrap();
        for (i, p) in req_pieces.iter().enumerate() {
            at(vm, 100_000 * (i as u64 + 1));
            vm.request_body(ctx, p, i + 1 == req_pieces.len()).unwrap();
        }
        at(vm, 5_000_000);
        vm.response_headers(ctx, &resp, false).unwrap();
        for p in &resp_pieces[..resp_pieces.len() - 1] {
            vm.response_body(ctx, p, false).unwrap();
        }
    });
    at(&mut vm, 6_000_000);
    let props = publishes(&mut vm, |vm| {
        vm.response_body(ctx, resp_pieces.last().unwrap(), true)
            .unwrap()
    });
    let record = check_publication(&props, ctx);

    let mut want = Expect::new("grpc-web-text").op(
        "hello.SayHello",
        "wirelens.v1.Hello",
        "SayHello",
        Some("unary"),
    );
    want.grpc_status = Some(0);
    want.grpc_message = Some("café".into());
    want.req_headers = header_bytes(&req);
    want.resp_headers = header_bytes(&resp);
    want.req_body = req_text.len() as u64;
    want.resp_body = resp_text.len() as u64;
    let mut rq = Dir::default();
    rq.message(0, req_msg.len());
    want.frames = Some((rq, rs));
    want.ttfb_us = Some(us(0, 5_000_000));
    want.duration_us = Some(us(0, 6_000_000));
    want.req_duration_us = Some(us(0, 100_000 * req_pieces.len() as u64));
    assert_record(&record, &want);
    finish_clean(&mut vm, ctx);
}

#[test]
fn sample_rate_zero_touches_nothing() {
    let config = CONFIG.replacen('{', r#"{"sample_rate": 0, "#, 1);
    let mut vm = Vm::with_config(&config).unwrap();
    for _ in 0..100 {
        let ctx = vm.create_stream().unwrap();
        let req = grpc_request("/wirelens.v1.Hello/SayHello", "application/grpc");
        let body = grpc_frame(0, b"\x0a\x05world");
        let resp = h(&[(":status", "200"), ("content-type", "application/grpc")]);
        let calls = calls_during(&mut vm, |vm| {
            vm.request_headers(ctx, &req, false).unwrap();
            vm.request_body(ctx, &body, true).unwrap();
            vm.response_headers(ctx, &resp, false).unwrap();
            vm.response_body(ctx, &body, false).unwrap();
            vm.response_trailers(ctx, &h(&[("grpc-status", "0")]))
                .unwrap();
            vm.finish(ctx).unwrap();
        });
        assert!(
            calls.is_empty(),
            "an unsampled call makes no host call: {calls:?}"
        );
    }
    assert!(vm.host().properties.is_empty());
    assert_eq!(vm.host().body_bytes_copied, 0);
    assert_clean(&vm);
}

#[test]
fn sample_rate_fraction_is_published_with_the_record() {
    let config = CONFIG.replacen('{', r#"{"sample_rate": 0.25, "#, 1);
    let mut vm = Vm::with_config(&config).unwrap();
    let n = 2000;
    let mut published = 0;
    for _ in 0..n {
        let ctx = vm.create_stream().unwrap();
        let req = h(&[
            (":method", "GET"),
            (":path", "/v1/products/7"),
            (":authority", "a"),
            (":scheme", "http"),
        ]);
        let resp = h(&[(":status", "200"), ("content-length", "0")]);
        at(&mut vm, 0);
        vm.request_headers(ctx, &req, true).unwrap();
        let before = vm.host().properties.len();
        vm.response_headers(ctx, &resp, true).unwrap();
        let props = vm.host().properties[before..].to_vec();
        vm.finish(ctx).unwrap();
        if props.is_empty() {
            continue;
        }
        published += 1;
        let record = check_publication(&props, ctx);
        let mut want = Expect::new("rest").op(
            "catalog.GetProduct",
            "wirelens.v1.Catalog",
            "GetProduct",
            Some("unary"),
        );
        want.route = Some("/v1/products/{id}".into());
        want.req_headers = header_bytes(&req);
        want.resp_headers = header_bytes(&resp);
        want.ttfb_us = Some(0);
        want.duration_us = Some(0);
        want.req_duration_us = Some(0);
        want.sample_rate = Some(0.25);
        assert_record(&record, &want);
    }
    println!("sample_rate 0.25: {published} of {n} published");
    assert!((400..600).contains(&published), "{published} of {n}");
    assert_clean(&vm);
}

#[test]
fn invalid_configuration_is_refused_naming_the_field() {
    let cases: [(&str, &str); 8] = [
        (r#"{"sample_rate": 1.5}"#, "sample_rate"),
        (r#"{"sample_rate": "all"}"#, "sample_rate"),
        (
            r#"{"optional_fields": ["message_sizes", "sizes"]}"#,
            "optional_fields[1]",
        ),
        (r#"{"rest_transcoded": "yes"}"#, "rest_transcoded"),
        (
            r#"{"operations": [{"grpc_path": "/a.B/C", "streaming": "uni"}]}"#,
            "operations[0].streaming",
        ),
        (
            r#"{"operations": [{"grpc_path": "/a.B/C"}, {"grpc_path": "/a.B/C"}]}"#,
            "operations[1]",
        ),
        (
            r#"{"operations": [{"operation": "x", "http_rules": [{"method": "GET"}]}]}"#,
            "operations[0].http_rules[0]",
        ),
        (r#"{"operatoins": []}"#, "operatoins"),
    ];
    for (config, field) in cases {
        let (vm, ok) = Vm::configured(config.as_bytes()).unwrap();
        assert!(!ok, "accepted {config}");
        let logs = &vm.host().logs;
        assert_eq!(logs.len(), 1, "one log line for {config}: {logs:?}");
        let line = &logs[0];
        assert_eq!(line.level, 4, "error level: {line:?}");
        assert!(
            line.message
                .starts_with(&format!("wirelens: invalid plugin configuration: {field}")),
            "{config}: {:?} should name {field}",
            line.message
        );
        assert!(vm.host().properties.is_empty());
        assert_clean(&vm);
    }
    // Not JSON at all.
    let (vm, ok) = Vm::configured(b"operations: []").unwrap();
    assert!(!ok);
    assert_eq!(vm.host().logs.len(), 1, "{:?}", vm.host().logs);
    // Empty, null, {} are accepted without a log line.
    for config in ["", "  ", "null", "{}"] {
        let (vm, ok) = Vm::configured(config.as_bytes()).unwrap();
        assert!(ok, "{config:?} refused: {:?}", vm.host().logs);
        assert!(vm.host().logs.is_empty());
    }
}

#[test]
fn optional_fields_empty_and_rest_transcoded() {
    let config = CONFIG.replacen(
        '{',
        r#"{"optional_fields": [], "rest_transcoded": true, "#,
        1,
    );
    let mut vm = Vm::with_config(&config).unwrap();
    // gRPC: no optional group key.
    let ctx = vm.create_stream().unwrap();
    let req = grpc_request("/other.pkg.v2.Inventory/ListItems", "application/grpc");
    let body = grpc_frame(1, b"zz");
    let resp = h(&[(":status", "200"), ("content-type", "application/grpc")]);
    let trailers = h(&[("grpc-status", "0"), ("grpc-message", "fine")]);
    at(&mut vm, 0);
    vm.request_headers(ctx, &req, false).unwrap();
    vm.request_body(ctx, &body, true).unwrap();
    vm.response_headers(ctx, &resp, false).unwrap();
    vm.response_body(ctx, &body, false).unwrap();
    let props = publishes(&mut vm, |vm| vm.response_trailers(ctx, &trailers).unwrap());
    let record = check_publication(&props, ctx);
    // Unknown path: the one fixed operation, never a name taken from the path.
    let mut want = Expect::new("grpc").unknown("/other.pkg.v2.Inventory/ListItems");
    want.groups = vec![];
    // No grpc-message published: the trailers are only sized, the status is Envoy's.
    want.grpc_status = None;
    want.grpc_message = Some("fine".into());
    want.req_headers = header_bytes(&req);
    want.resp_headers = header_bytes(&resp);
    want.resp_trailers = header_bytes(&trailers);
    want.req_body = body.len() as u64;
    want.resp_body = body.len() as u64;
    let (mut rq, mut rs) = (Dir::default(), Dir::default());
    rq.message(1, 2);
    rs.message(1, 2);
    want.frames = Some((rq, rs));
    want.ttfb_us = Some(0);
    want.duration_us = Some(0);
    want.req_duration_us = Some(0);
    assert_record(&record, &want);
    finish_clean(&mut vm, ctx);

    // REST on a transcoding listener.
    let ctx = vm.create_stream().unwrap();
    let req = h(&[
        (":method", "POST"),
        (":path", "/v1/hello"),
        (":authority", "a"),
        ("content-type", "application/json"),
    ]);
    let resp = h(&[(":status", "200"), ("content-type", "application/json")]);
    at(&mut vm, 0);
    vm.request_headers(ctx, &req, false).unwrap();
    vm.request_body(ctx, b"{}", true).unwrap();
    vm.response_headers(ctx, &resp, false).unwrap();
    let props = publishes(&mut vm, |vm| {
        vm.response_body(ctx, b"{\"message\":\"hi\"}", true)
            .unwrap()
    });
    let record = check_publication(&props, ctx);
    let mut want = Expect::new("rest-transcoded").op(
        "hello.SayHello",
        "wirelens.v1.Hello",
        "SayHello",
        Some("unary"),
    );
    want.groups = vec![];
    want.route = Some("/v1/hello".into());
    want.req_headers = header_bytes(&req);
    want.resp_headers = header_bytes(&resp);
    want.req_body = 2;
    want.resp_body = 16;
    want.ttfb_us = Some(0);
    want.duration_us = Some(0);
    assert_record(&record, &want);
    finish_clean(&mut vm, ctx);
}

#[test]
fn host_refusals_are_survived() {
    // Clock refused from the start: durations omitted.
    let mut vm = Vm::with_config(CONFIG).unwrap();
    vm.host_mut().clock_ns = None;
    let ctx = vm.create_stream().unwrap();
    let req = grpc_request("/wirelens.v1.Hello/SayHello", "application/grpc");
    let body = grpc_frame(0, b"x");
    let resp = h(&[(":status", "200"), ("content-type", "application/grpc")]);
    let trailers = h(&[("grpc-status", "0")]);
    vm.request_headers(ctx, &req, false).unwrap();
    vm.request_body(ctx, &body, true).unwrap();
    vm.response_headers(ctx, &resp, false).unwrap();
    vm.response_body(ctx, &body, false).unwrap();
    let props = publishes(&mut vm, |vm| vm.response_trailers(ctx, &trailers).unwrap());
    let record = check_publication(&props, ctx);
    for k in [
        "wirelens.time_to_first_byte_us",
        "wirelens.duration_us",
        "wirelens.request.duration_us",
    ] {
        assert!(!record.contains_key(k), "{k} without a clock: {record:?}");
    }
    finish_clean(&mut vm, ctx);

    // set_property refused: ignored, still exactly one attempt, Continue.
    vm.host_mut().clock_ns = Some(T0);
    vm.host_mut().set_property_status = wirelens_abi::status::NOT_FOUND;
    let ctx = vm.create_stream().unwrap();
    vm.request_headers(ctx, &req, false).unwrap();
    vm.request_body(ctx, &body, true).unwrap();
    vm.response_headers(ctx, &resp, false).unwrap();
    vm.response_body(ctx, &body, false).unwrap();
    let props = publishes(&mut vm, |vm| vm.response_trailers(ctx, &trailers).unwrap());
    check_publication(&props, ctx);
    finish_clean(&mut vm, ctx);
    vm.host_mut().set_property_status = wirelens_abi::status::OK;

    // Body reads refused: malformed, still Continue.
    vm.host_mut().body_read_status = wirelens_abi::status::NOT_FOUND;
    let ctx = vm.create_stream().unwrap();
    vm.request_headers(ctx, &req, false).unwrap();
    vm.request_body(ctx, &body, true).unwrap();
    vm.response_headers(ctx, &resp, false).unwrap();
    vm.response_body(ctx, &body, false).unwrap();
    let props = publishes(&mut vm, |vm| vm.response_trailers(ctx, &trailers).unwrap());
    let record = check_publication(&props, ctx);
    assert_eq!(record["wirelens.malformed"], 1);
    assert_eq!(record["http.request.body.size"], body.len() as u64);
    finish_clean(&mut vm, ctx);
}

#[test]
fn grpc_request_answered_with_a_non_grpc_error_page() {
    let mut vm = Vm::with_config(CONFIG).unwrap();
    let ctx = vm.create_stream().unwrap();
    let req = grpc_request("/wirelens.v1.Hello/SayHello", "application/grpc");
    let req_body = grpc_frame(0, b"\x0a\x01x");
    let resp = h(&[
        (":status", "503"),
        ("content-type", "text/plain"),
        ("content-length", "57"),
    ]);
    let page = b"upstream connect error or disconnect/reset before headers";
    at(&mut vm, 0);
    vm.request_headers(ctx, &req, false).unwrap();
    vm.request_body(ctx, &req_body, true).unwrap();
    // gRPC response headers are only sized: trailers are expected to follow.
    let calls = calls_during(&mut vm, |vm| {
        vm.response_headers(ctx, &resp, false).unwrap()
    });
    assert!(
        !calls
            .iter()
            .any(|c| c.name == "env.proxy_get_header_map_pairs"),
        "{calls:?}"
    );
    // The response ends without trailers: the record waits for the log
    // phase, where Envoy shows the response headers again.
    silent(&mut vm, |vm| vm.response_body(ctx, page, true).unwrap());
    let calls = calls_during(&mut vm, |vm| {
        let props = publishes(vm, |vm| vm.log(ctx).unwrap());
        let record = check_publication(&props, ctx);
        let mut want = Expect::new("grpc").op(
            "hello.SayHello",
            "wirelens.v1.Hello",
            "SayHello",
            Some("unary"),
        );
        want.req_headers = header_bytes(&req);
        want.resp_headers = header_bytes(&resp);
        want.req_body = req_body.len() as u64;
        want.resp_body = page.len() as u64;
        let mut rq = Dir::default();
        rq.message(0, 3);
        // text/plain: the page was not gRPC, so no frames and not malformed.
        want.frames = Some((rq, Dir::default()));
        want.ttfb_us = Some(0);
        want.duration_us = Some(0);
        want.req_duration_us = Some(0);
        assert_record(&record, &want);
    });
    assert!(
        calls
            .iter()
            .any(|c| c.name == "env.proxy_get_header_map_pairs"),
        "{calls:?}"
    );
    vm.done(ctx).unwrap();
    vm.delete(ctx).unwrap();
    assert_clean(&vm);
}

#[test]
fn stream_without_request_headers_publishes_nothing() {
    // Envoy may create the context and log it without any header callback
    // (a local reply before the filter ran).
    let mut vm = Vm::with_config(CONFIG).unwrap();
    let ctx = vm.create_stream().unwrap();
    let calls = calls_during(&mut vm, |vm| vm.finish(ctx).unwrap());
    assert!(calls.is_empty(), "{calls:?}");
    assert!(vm.host().properties.is_empty());
    assert_clean(&vm);
}

#[test]
fn record_escapes_configured_names() {
    let config = r#"{"operations": [{"operation": "we\"ird\\op\u0001é,100%",
        "rpc_service": "svc", "rpc_method": "m\ttab",
        "http_rules": [{"method": "PUT", "pattern": "/v1/x/{id=items/*}:update"}]}]}"#;
    let mut vm = Vm::with_config(config).unwrap();
    let ctx = vm.create_stream().unwrap();
    let req = h(&[
        (":method", "PUT"),
        (":path", "/v1/x/items/9:update#frag"),
        (":authority", "a"),
        ("content-type", "application/x-protobuf"),
    ]);
    let resp = h(&[(":status", "204")]);
    at(&mut vm, 0);
    vm.request_headers(ctx, &req, true).unwrap();
    let props = publishes(&mut vm, |vm| vm.response_headers(ctx, &resp, true).unwrap());
    let record = check_publication(&props, ctx);
    let mut want = Expect::new("rest-proto").op("we\"ird\\op\u{1}é,100%", "svc", "m\ttab", None);
    want.route = Some("/v1/x/{id=items/*}:update".into());
    want.req_headers = header_bytes(&req);
    want.resp_headers = header_bytes(&resp);
    want.ttfb_us = Some(0);
    want.duration_us = Some(0);
    want.req_duration_us = Some(0);
    assert_record(&record, &want);
    let raw = std::str::from_utf8(&props[0].value).unwrap();
    // Format 2: the name as configured, only `,` and `%` escaped.
    assert!(
        raw.starts_with("rest-proto,we\"ird\\op\u{1}é%2C100%25,"),
        "{raw}"
    );
    finish_clean(&mut vm, ctx);
}

#[test]
fn two_plugins_share_one_vm() {
    // Envoy shares one VM between plugins with the same vm_config: each has
    // its own root context and configuration.
    let mut vm = Vm::with_config(CONFIG).unwrap();
    let transcoded = CONFIG.replacen('{', r#"{"rest_transcoded": true, "sample_rate": 0.5, "#, 1);
    let (root2, ok) = vm.add_root(transcoded.as_bytes()).unwrap();
    assert!(ok);
    let req = h(&[
        (":method", "POST"),
        (":path", "/v1/hello"),
        (":authority", "a"),
    ]);
    let resp = h(&[(":status", "200")]);
    let mut seen = [0usize; 2];
    for i in 0..200 {
        let root = if i % 2 == 0 { vm.root_id } else { root2 };
        let ctx = vm.create_stream_in(root).unwrap();
        at(&mut vm, 0);
        vm.request_headers(ctx, &req, true).unwrap();
        let before = vm.host().properties.len();
        vm.response_headers(ctx, &resp, true).unwrap();
        let props = vm.host().properties[before..].to_vec();
        vm.finish(ctx).unwrap();
        if i % 2 == 0 {
            let record = check_publication(&props, ctx);
            assert_eq!(record["wirelens.protocol"], "rest");
            assert!(!record.contains_key("wirelens.sample_rate"));
            seen[0] += 1;
        } else if !props.is_empty() {
            let record = check_publication(&props, ctx);
            assert_eq!(record["wirelens.protocol"], "rest-transcoded");
            assert_eq!(record["wirelens.sample_rate"], 0.5);
            seen[1] += 1;
        }
    }
    assert_eq!(seen[0], 100);
    assert!((25..75).contains(&seen[1]), "{seen:?}");
    assert_clean(&vm);
}

#[test]
fn bidi_stream_interleaved() {
    let mut vm = Vm::with_config(
        r#"{"operations": [{"grpc_path": "/chat.v1.Chat/Talk", "streaming": "bidi"}]}"#,
    )
    .unwrap();
    let ctx = vm.create_stream().unwrap();
    let req = grpc_request("/chat.v1.Chat/Talk", "application/grpc");
    let resp = h(&[(":status", "200"), ("content-type", "application/grpc")]);
    let trailers = h(&[("grpc-status", "0")]);
    let (mut rq, mut rs) = (Dir::default(), Dir::default());
    let (mut req_total, mut resp_total) = (0u64, 0u64);
    at(&mut vm, 0);
    vm.request_headers(ctx, &req, false).unwrap();
    at(&mut vm, 500_000);
    vm.response_headers(ctx, &resp, false).unwrap();
    for i in 0..40u64 {
        at(&mut vm, 1_000_000 + i * 1000);
        let m = bytes(i, (i * 13 % 50) as usize);
        let f = grpc_frame(0, &m);
        rq.message(0, m.len());
        req_total += f.len() as u64;
        let last = i == 39;
        // Each request message in two chunks, each answer in one.
        vm.request_body(ctx, &f[..3], false).unwrap();
        vm.request_body(ctx, &f[3..], last).unwrap();
        let a = grpc_frame(0, &m[..m.len() / 2]);
        rs.message(0, m.len() / 2);
        resp_total += a.len() as u64;
        vm.response_body(ctx, &a, false).unwrap();
    }
    at(&mut vm, 9_000_000);
    let props = publishes(&mut vm, |vm| vm.response_trailers(ctx, &trailers).unwrap());
    let record = check_publication(&props, ctx);
    // The operation is derived from the path when the entry names none.
    let mut want = Expect::new("grpc").op("chat.Talk", "chat.v1.Chat", "Talk", Some("bidi"));
    // `grpc-status: 0` alone is only sized: Envoy's %GRPC_STATUS% carries it.
    want.grpc_status = None;
    want.req_headers = header_bytes(&req);
    want.resp_headers = header_bytes(&resp);
    want.resp_trailers = header_bytes(&trailers);
    want.req_body = req_total;
    want.resp_body = resp_total;
    want.frames = Some((rq, rs));
    want.ttfb_us = Some(500);
    want.duration_us = Some(9000);
    want.req_duration_us = Some(us(0, 1_000_000 + 39 * 1000));
    assert_record(&record, &want);
    finish_clean(&mut vm, ctx);
}

#[test]
fn grpc_message_edge_cases() {
    let mut vm = Vm::with_config(CONFIG).unwrap();
    let run = |vm: &mut Vm, trailers: &Headers| {
        let ctx = vm.create_stream().unwrap();
        at(vm, 0);
        vm.request_headers(
            ctx,
            &grpc_request("/wirelens.v1.Hello/SayHello", "application/grpc"),
            true,
        )
        .unwrap();
        vm.response_headers(
            ctx,
            &h(&[(":status", "200"), ("content-type", "application/grpc")]),
            false,
        )
        .unwrap();
        let props = publishes(vm, |vm| vm.response_trailers(ctx, trailers).unwrap());
        let record = check_publication(&props, ctx);
        finish_clean(vm, ctx);
        record
    };
    // Invalid UTF-8 after decoding → U+FFFD; invalid escapes kept.
    let r = run(
        &mut vm,
        &h(&[
            ("grpc-status", "2"),
            ("grpc-message", "bad %FF byte, 100%, %zz"),
        ]),
    );
    assert_eq!(r["wirelens.grpc.message"], "bad \u{FFFD} byte, 100%, %zz");
    // Longer than the default 128 bytes (grpc_message_max_bytes): cut to at
    // most 128, on a character boundary.
    let long = format!("a{}", "é".repeat(1500));
    let r = run(
        &mut vm,
        &h(&[
            ("grpc-status", "13"),
            ("grpc-message", &percent_encode(&long)),
        ]),
    );
    let m = r["wirelens.grpc.message"].as_str().unwrap();
    assert!(
        m.len() <= 128 && m.len() >= 126 && long.starts_with(m),
        "{} bytes",
        m.len()
    );
    // Non-numeric grpc-status: malformed, no status.
    let r = run(&mut vm, &h(&[("grpc-status", "not a number at all")]));
    assert_eq!(r["wirelens.malformed"], 1);
    assert!(!r.contains_key("rpc.grpc.status_code"));
    // Trailers of at most 24 bytes are only sized (an OK call's): a short
    // non-numeric status is left to Envoy's %GRPC_STATUS%.
    let r = run(&mut vm, &h(&[("grpc-status", "OK")]));
    assert_eq!(r["wirelens.malformed"], 0);
    assert!(!r.contains_key("rpc.grpc.status_code"));
}

#[test]
fn grpc_web_text_large_message_with_line_breaks() {
    // One 60,000-byte message in a single chunk (several 16 KiB read
    // windows), base64 wrapped at 76 columns with CRLF (ignored).
    let mut vm = Vm::with_config(CONFIG).unwrap();
    let ctx = vm.create_stream().unwrap();
    let req = grpc_web_request("/wirelens.v1.Hello/SayHello", "application/grpc-web-text");
    let resp = h(&[
        (":status", "200"),
        ("content-type", "application/grpc-web-text"),
    ]);
    let mut text = String::new();
    for (i, c) in base64(&grpc_frame(0, &bytes(1, 60_000)))
        .chars()
        .enumerate()
    {
        if i > 0 && i % 76 == 0 {
            text.push_str("\r\n");
        }
        text.push(c);
    }
    let block = b"grpc-status:0\r\n";
    text.push_str(&base64(&grpc_frame(0, b"")));
    text.push_str(&base64(&grpc_frame(0x80, block)));
    at(&mut vm, 0);
    vm.request_headers(ctx, &req, true).unwrap();
    vm.response_headers(ctx, &resp, false).unwrap();
    let props = publishes(&mut vm, |vm| {
        vm.response_body(ctx, text.as_bytes(), true).unwrap()
    });
    let record = check_publication(&props, ctx);
    let mut want = Expect::new("grpc-web-text").op(
        "hello.SayHello",
        "wirelens.v1.Hello",
        "SayHello",
        Some("unary"),
    );
    want.grpc_status = Some(0);
    want.req_headers = header_bytes(&req);
    want.resp_headers = header_bytes(&resp);
    want.resp_body = text.len() as u64;
    let mut rs = Dir::default();
    rs.message(0, 60_000);
    rs.message(0, 0);
    rs.trailer_frame(block.len());
    want.frames = Some((Dir::default(), rs));
    want.ttfb_us = Some(0);
    want.duration_us = Some(0);
    want.req_duration_us = Some(0);
    assert_record(&record, &want);
    finish_clean(&mut vm, ctx);
}

/// A gRPC-Web response whose trailer frame is `block`; returns the record.
fn grpc_web_trailer_frame_record(
    vm: &mut Vm,
    block: &[u8],
) -> serde_json::Map<String, serde_json::Value> {
    let ctx = vm.create_stream().unwrap();
    at(vm, 0);
    vm.request_headers(
        ctx,
        &grpc_web_request("/wirelens.v1.Hello/SayHello", "application/grpc-web"),
        true,
    )
    .unwrap();
    vm.response_headers(
        ctx,
        &h(&[(":status", "200"), ("content-type", "application/grpc-web")]),
        false,
    )
    .unwrap();
    vm.response_body(ctx, &grpc_frame(0x80, block), false)
        .unwrap();
    let props = publishes(vm, |vm| vm.response_trailers(ctx, &Vec::new()).unwrap());
    let record = check_publication(&props, ctx);
    finish_clean(vm, ctx);
    record
}

/// A `grpc-status` line after more than 1 KiB of trailer block is still
/// found (grpc-java sends it after the application's trailing metadata,
/// e.g. a large `grpc-status-details-bin`). Found by this harness: the
/// filter used to keep only the block's first 1 KiB.
#[test]
fn trailer_frame_status_after_1kib_is_found() {
    let mut vm = Vm::with_config(CONFIG).unwrap();
    let details = "A".repeat(1500); // base64 of a google.rpc.Status with details
    let block = format!(
        "grpc-message:not%20found\r\ngrpc-status-details-bin:{details}\r\ngrpc-status:5\r\n"
    );
    let record = grpc_web_trailer_frame_record(&mut vm, block.as_bytes());
    assert_eq!(
        record.get("rpc.grpc.status_code"),
        Some(&5.into()),
        "{record:?}"
    );
}

/// A `grpc-message` longer than the line limit is cut, as in HTTP/2
/// trailers, not dropped (found by this harness).
#[test]
fn trailer_frame_long_message_is_cut() {
    let mut vm = Vm::with_config(CONFIG).unwrap();
    let long = "x".repeat(2000);
    let record = grpc_web_trailer_frame_record(
        &mut vm,
        format!("grpc-status:13\r\ngrpc-message:{long}\r\n").as_bytes(),
    );
    assert_eq!(record.get("rpc.grpc.status_code"), Some(&13.into()));
    let m = record
        .get("wirelens.grpc.message")
        .and_then(|v| v.as_str())
        .unwrap_or("");
    assert!(
        m.len() == 128 && long.starts_with(m),
        "message: {} bytes",
        m.len()
    );
}
