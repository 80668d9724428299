//! Protocol classification from the request `content-type`.

/// The wire protocol of a call, as seen by the filter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// Anything that is not one of the others (JSON, forms, no body, ...).
    Rest,
    /// `application/protobuf` or `application/x-protobuf`.
    RestProto,
    /// `application/grpc*` (HTTP/2 gRPC, any codec suffix).
    Grpc,
    /// `application/grpc-web*` except the text variant.
    GrpcWeb,
    /// `application/grpc-web-text*` (base64-encoded gRPC-Web).
    GrpcWebText,
    /// A `rest` call on a listener configured with `rest_transcoded: true`
    /// (Envoy's `grpc_json_transcoder` turns it into gRPC upstream). Never
    /// returned by [`classify`]: the per-call state assigns it from the
    /// configuration.
    RestTranscoded,
}

impl Protocol {
    /// The value published as `wirelens.protocol`.
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Rest => "rest",
            Protocol::RestProto => "rest-proto",
            Protocol::Grpc => "grpc",
            Protocol::GrpcWeb => "grpc-web",
            Protocol::GrpcWebText => "grpc-web-text",
            Protocol::RestTranscoded => "rest-transcoded",
        }
    }

    /// gRPC, gRPC-Web or gRPC-Web-text: bodies are length-prefixed frames.
    pub fn is_grpc_family(self) -> bool {
        matches!(
            self,
            Protocol::Grpc | Protocol::GrpcWeb | Protocol::GrpcWebText
        )
    }
}

fn trim(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

fn starts_with_ignore_case(s: &[u8], prefix: &[u8]) -> bool {
    s.len() >= prefix.len() && s[..prefix.len()].eq_ignore_ascii_case(prefix)
}

/// Classifies a request by its `content-type` value (`None` when absent).
///
/// Prefix rules (case-insensitive, surrounding blanks ignored):
/// `application/grpc-web-text*` → grpc-web-text, `application/grpc-web*` →
/// grpc-web, `application/grpc*` → grpc. The media type (before any `;`)
/// `application/protobuf` or `application/x-protobuf` → rest-proto.
/// Anything else → rest.
pub fn classify(content_type: Option<&[u8]>) -> Protocol {
    let Some(ct) = content_type else {
        return Protocol::Rest;
    };
    let ct = trim(ct);
    if starts_with_ignore_case(ct, b"application/grpc-web-text") {
        Protocol::GrpcWebText
    } else if starts_with_ignore_case(ct, b"application/grpc-web") {
        Protocol::GrpcWeb
    } else if starts_with_ignore_case(ct, b"application/grpc") {
        Protocol::Grpc
    } else {
        let media = match ct.iter().position(|&b| b == b';') {
            Some(i) => trim(&ct[..i]),
            None => ct,
        };
        if is_protobuf_media(media) {
            Protocol::RestProto
        } else {
            Protocol::Rest
        }
    }
}

fn is_protobuf_media(media: &[u8]) -> bool {
    media.eq_ignore_ascii_case(b"application/protobuf")
        || media.eq_ignore_ascii_case(b"application/x-protobuf")
}

/// REST calls without a protobuf body (e.g. a GET) still ask for protobuf
/// through `accept` (E5's REST-protobuf shape): any listed protobuf media
/// type counts, whatever its q-value.
pub fn accepts_protobuf(accept: &[u8]) -> bool {
    accept.split(|&b| b == b',').any(|item| {
        let media = match item.iter().position(|&b| b == b';') {
            Some(i) => &item[..i],
            None => item,
        };
        is_protobuf_media(trim(media))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_lists_are_searched_for_protobuf() {
        assert!(accepts_protobuf(b"application/protobuf"));
        assert!(accepts_protobuf(
            b"application/json;q=0.5, application/x-protobuf"
        ));
        assert!(accepts_protobuf(b" APPLICATION/PROTOBUF ; q=1"));
        assert!(!accepts_protobuf(b"application/json"));
        assert!(!accepts_protobuf(b"*/*"));
        assert!(!accepts_protobuf(b""));
        assert!(!accepts_protobuf(b"application/protobufx"));
    }

    fn c(s: &str) -> Protocol {
        classify(Some(s.as_bytes()))
    }

    #[test]
    fn grpc_family() {
        assert_eq!(c("application/grpc"), Protocol::Grpc);
        assert_eq!(c("application/grpc+proto"), Protocol::Grpc);
        assert_eq!(c("application/grpc+json; charset=utf-8"), Protocol::Grpc);
        assert_eq!(c("Application/GRPC"), Protocol::Grpc);
        assert_eq!(c("application/grpc-web"), Protocol::GrpcWeb);
        assert_eq!(c("application/grpc-web+proto"), Protocol::GrpcWeb);
        assert_eq!(c("application/grpc-web-text"), Protocol::GrpcWebText);
        assert_eq!(c("application/grpc-web-text+proto"), Protocol::GrpcWebText);
        assert_eq!(
            c("  application/grpc-web-text+proto "),
            Protocol::GrpcWebText
        );
    }

    #[test]
    fn rest_family() {
        assert_eq!(c("application/protobuf"), Protocol::RestProto);
        assert_eq!(c("application/x-protobuf"), Protocol::RestProto);
        assert_eq!(
            c("application/x-protobuf; messageType=wirelens.v1.HelloRequest"),
            Protocol::RestProto
        );
        assert_eq!(c("APPLICATION/PROTOBUF"), Protocol::RestProto);
        assert_eq!(c("application/protobuffer"), Protocol::Rest);
        assert_eq!(c("application/json"), Protocol::Rest);
        assert_eq!(c("text/plain"), Protocol::Rest);
        assert_eq!(c(""), Protocol::Rest);
        assert_eq!(c("application/gr"), Protocol::Rest);
        assert_eq!(classify(None), Protocol::Rest);
    }

    #[test]
    fn names() {
        assert_eq!(Protocol::Rest.as_str(), "rest");
        assert_eq!(Protocol::RestProto.as_str(), "rest-proto");
        assert_eq!(Protocol::Grpc.as_str(), "grpc");
        assert_eq!(Protocol::GrpcWeb.as_str(), "grpc-web");
        assert_eq!(Protocol::GrpcWebText.as_str(), "grpc-web-text");
        assert_eq!(Protocol::RestTranscoded.as_str(), "rest-transcoded");
        assert!(Protocol::GrpcWebText.is_grpc_family());
        assert!(!Protocol::RestProto.is_grpc_family());
        assert!(!Protocol::RestTranscoded.is_grpc_family());
    }
}
