//! The plugin configuration (`Config::from_json`, what the adapter's
//! `on_configure` calls) and lookups in the operation map.
//!
//! Input: `config [NUL method [NUL path]]` (JSON text never contains a raw
//! NUL). Checks: never panics (errors format too); on `Ok`: the sample rate
//! is in [0, 1] and its published JSON text parses back to it; the lookups of
//! the given method/path never panic and return consistent indexes; every
//! configured `grpc_path` finds its own operation; every REST rule matches
//! its own template instantiated (`{v}`/`*` → `x`, `**` → `x/y`) with its
//! method. Paths containing `?` or `#` are left out of the self-match checks
//! (the lookups drop a query string / fragment first). The path's `url.path`
//! (published for calls the map does not know) is at most
//! `URL_PATH_MAX_BYTES` and a prefix of the path's text;
//! `grpc_message_max_bytes` stays in [0, `GRPC_MESSAGE_MAX_BYTES`].
#![no_main]

use libfuzzer_sys::fuzz_target;
use wirelens_core::config::{Config, GRPC_MESSAGE_MAX_BYTES};
use wirelens_core::opmap::strip_query;
use wirelens_core::record::{url_path, URL_PATH_MAX_BYTES};
use wirelens_core::OpMap;

/// A concrete path a template matches: `{v=sub}` → `sub`, `{v}` → `*`,
/// then `**` → `x/y` and `*` → `x`.
fn instantiate(pattern: &str) -> String {
    let mut s = String::new();
    let mut rest = pattern;
    while let Some(i) = rest.find('{') {
        s.push_str(&rest[..i]);
        let j = i + rest[i..]
            .find('}')
            .expect("accepted template has an unclosed '{'");
        let inner = &rest[i + 1..j];
        s.push_str(inner.split_once('=').map_or("*", |(_, sub)| sub));
        rest = &rest[j + 1..];
    }
    s.push_str(rest);
    s.replace("**", "x/y").replace('*', "x")
}

fn check_lookups(map: &OpMap, method: &[u8], path: &[u8]) {
    if let Some(i) = map.lookup_grpc(path) {
        let op = map.operation(i).expect("lookup_grpc: index out of range");
        assert!(op.grpc_path.is_some());
    }
    if let Some((o, r)) = map.match_rest(method, path) {
        let rule = map.rule(r).expect("match_rest: rule index out of range");
        assert_eq!(rule.op, o);
        assert_eq!(rule.method.as_bytes(), method);
        assert!(map.operation(o).is_some());
    }
}

fuzz_target!(|data: &[u8]| {
    let mut parts = data.splitn(3, |&b| b == 0);
    let config = parts.next().unwrap_or_default();
    let method = parts.next().unwrap_or(b"GET");
    let path = parts.next().unwrap_or(b"/");

    let published = url_path(path);
    assert!(
        published.len() <= URL_PATH_MAX_BYTES,
        "url.path {published:?}"
    );
    assert!(
        String::from_utf8_lossy(strip_query(path)).starts_with(&published),
        "url.path {published:?} is not a prefix of {path:?}"
    );

    let cfg = match Config::from_json(config) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.to_string();
            return;
        }
    };
    assert!(cfg.options.grpc_message_max_bytes <= GRPC_MESSAGE_MAX_BYTES);
    let rate = cfg.options.sample_rate();
    assert!((0.0..=1.0).contains(&rate), "sample rate {rate}");
    match cfg.options.sample_rate_json() {
        Some(text) => assert_eq!(text.parse::<f64>().ok(), Some(rate), "{text:?}"),
        None => assert_eq!(rate, 1.0),
    }
    let _ = format!("{:?}", cfg.options);
    let map = cfg.map;
    check_lookups(&map, method, path);
    for rule in map.rules() {
        assert!(rule.op < map.operations().len());
        check_lookups(&map, rule.method.as_bytes(), path);
        check_lookups(&map, rule.method.as_bytes(), rule.pattern.as_bytes());
        let concrete = instantiate(&rule.pattern);
        check_lookups(&map, rule.method.as_bytes(), concrete.as_bytes());
        if !concrete.contains(['?', '#']) {
            assert!(
                map.match_rest(rule.method.as_bytes(), concrete.as_bytes())
                    .is_some(),
                "rule {} {:?} does not match {concrete:?}",
                rule.method,
                rule.pattern
            );
        }
    }
    for (i, op) in map.operations().iter().enumerate() {
        if let Some(p) = &op.grpc_path {
            check_lookups(&map, method, p.as_bytes());
            if !p.contains(['?', '#']) {
                assert_eq!(map.lookup_grpc(p.as_bytes()), Some(i), "grpc_path {p:?}");
            }
        }
    }
});
