//! How one direction of a body is read: counted always, and for the gRPC
//! family fetched from the host in windows and fed to the frame parser
//! (binary frames) or the base64 decoder (grpc-web-text). Payload bytes a
//! frame prefix already sized are skipped without being fetched.

use crate::base64::Base64Decoder;
use crate::classify::Protocol;
use crate::frame::FrameParser;
use crate::host::{Body, Host};

/// Most bytes fetched from the host per body read. Bounds the memory one
/// read costs regardless of chunk size; message payloads beyond a window
/// are skipped without being read.
pub const DEFAULT_READ_WINDOW: usize = 16 * 1024;

/// The first read of binary frames fetches this much: a whole small unary
/// message, or the prefix of a large one without copying 16 KiB of payload
/// the parser would only skip.
const FIRST_BINARY_READ: usize = 256;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BodyMode {
    /// Not parsed (REST, or a non-gRPC response).
    Ignore,
    /// Length-prefixed frames.
    Binary,
    /// Base64 text of length-prefixed frames.
    Text,
}

pub(crate) fn mode_for(protocol: Protocol) -> BodyMode {
    match protocol {
        Protocol::Grpc | Protocol::GrpcWeb => BodyMode::Binary,
        Protocol::GrpcWebText => BodyMode::Text,
        Protocol::Rest | Protocol::RestProto | Protocol::RestTranscoded => BodyMode::Ignore,
    }
}

/// Where a counterfactual-sampled call's body bytes also go.
pub(crate) type Tap<'t> = Option<&'t mut dyn FnMut(&[u8])>;

/// One direction of the body stream.
#[derive(Clone, Debug)]
pub(crate) struct Direction {
    pub(crate) mode: BodyMode,
    pub(crate) body_bytes: u64,
    pub(crate) frames: FrameParser,
    pub(crate) b64: Base64Decoder,
    pub(crate) ended: bool,
    pub(crate) read_failed: bool,
    /// Size of the next binary read: small after a read that ended in a
    /// payload larger than itself (only the next prefix is needed), else
    /// doubled (fewer host calls for streams of small messages).
    binary_read: usize,
}

impl Direction {
    pub(crate) fn new() -> Self {
        Self {
            mode: BodyMode::Ignore,
            body_bytes: 0,
            frames: FrameParser::new(),
            b64: Base64Decoder::new(),
            ended: false,
            read_failed: false,
            binary_read: FIRST_BINARY_READ,
        }
    }

    fn wants_bytes(&self) -> bool {
        self.mode != BodyMode::Ignore && !self.read_failed && !self.ended
    }

    /// Counts a chunk of `size` bytes and feeds its bytes, read from the
    /// host's `body` buffer, to the parser (the caller ends the direction on
    /// end of stream). With a `tap` (a call sampled for the counterfactual)
    /// every byte is read, none skipped, whatever the mode, and the tap gets
    /// them as the parser does (decoded, for grpc-web-text).
    pub(crate) fn on_body<H: Host>(
        &mut self,
        size: usize,
        host: &mut H,
        body: Body,
        window: usize,
        mut tap: Tap<'_>,
    ) {
        self.body_bytes += size as u64;
        let tapping = tap.is_some() && !self.read_failed && !self.ended;
        if self.wants_bytes() || tapping {
            let mut off = 0usize;
            while off < size {
                if self.mode == BodyMode::Binary && !tapping {
                    let skip = self.frames.skippable().min((size - off) as u64);
                    if skip > 0 {
                        self.frames.skip(skip);
                        off += skip as usize;
                        continue;
                    }
                }
                if self.mode == BodyMode::Text && self.b64.is_malformed() {
                    break;
                }
                let want = match self.mode {
                    BodyMode::Binary if !tapping => self.binary_read.min(window),
                    _ => window,
                }
                .min(size - off);
                let Some(buf) = host.body_bytes(body, off, want) else {
                    self.read_failed = true;
                    break;
                };
                let bytes = buf.as_ref();
                let bytes = &bytes[..bytes.len().min(want)];
                if bytes.is_empty() {
                    break;
                }
                match self.mode {
                    BodyMode::Binary => {
                        self.frames.feed(bytes);
                        self.binary_read = if self.frames.skippable() > self.binary_read as u64 {
                            FIRST_BINARY_READ
                        } else {
                            self.binary_read.saturating_mul(2)
                        };
                        if let Some(t) = tap.as_mut() {
                            t(bytes);
                        }
                    }
                    BodyMode::Text => {
                        let frames = &mut self.frames;
                        self.b64.decode(bytes, |d| {
                            frames.feed(d);
                            if let Some(t) = tap.as_mut() {
                                t(d);
                            }
                        });
                    }
                    BodyMode::Ignore => {
                        if let Some(t) = tap.as_mut() {
                            t(bytes);
                        }
                    }
                }
                off += bytes.len();
            }
        }
    }

    /// This direction as if it had never been read: its byte count kept,
    /// its frame statistics dropped, ended. A refused read stays on record:
    /// a host refusal always marks the record malformed.
    pub(crate) fn unread(&self) -> Self {
        Direction {
            body_bytes: self.body_bytes,
            ended: true,
            read_failed: self.read_failed,
            ..Direction::new()
        }
    }

    pub(crate) fn end(&mut self) {
        self.end_tapped(None);
    }

    /// Ends the direction; a tap gets grpc-web-text's last decoded bytes.
    pub(crate) fn end_tapped(&mut self, mut tap: Tap<'_>) {
        if self.ended {
            return;
        }
        if self.mode != BodyMode::Ignore && !self.read_failed {
            if self.mode == BodyMode::Text {
                let frames = &mut self.frames;
                self.b64.finish(|d| {
                    frames.feed(d);
                    if let Some(t) = tap.as_mut() {
                        t(d);
                    }
                });
            }
            self.frames.finish();
        }
        self.ended = true;
    }

    pub(crate) fn malformed(&self) -> bool {
        self.frames.is_malformed() || self.b64.is_malformed() || self.read_failed
    }
}
