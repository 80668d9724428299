//! The payload of one direction of a sampled call, held only as long as
//! its estimate needs it: a whole REST body, or one gRPC message at a
//! time (a stream never holds more than one message), each bounded.

use super::Reason;

/// gRPC frame flags: compressed payload, and (gRPC-Web) the trailer frame.
const FLAG_COMPRESSED: u8 = 0x01;
const FLAG_TRAILER: u8 = 0x80;

/// One direction's payload, fed as it arrives.
#[derive(Clone, Debug)]
pub struct Capture {
    max: usize,
    frames: bool,
    buf: Vec<u8>,
    header: [u8; 5],
    header_len: u8,
    /// Payload bytes of the current frame still to come.
    remaining: usize,
    /// The current frame is a trailer frame: its payload is not a message.
    skipping: bool,
    /// The first failure; nothing more is kept after it.
    failed: Option<Reason>,
    total: u64,
    messages: u64,
}

impl Capture {
    /// A whole body (REST), at most `max` bytes.
    pub fn whole(max: usize) -> Self {
        Self::new(max, false)
    }

    /// Length-prefixed gRPC messages (decoded gRPC-Web-text included), each
    /// at most `max` bytes.
    pub fn frames(max: usize) -> Self {
        Self::new(max, true)
    }

    fn new(max: usize, frames: bool) -> Self {
        Capture {
            max,
            frames,
            buf: Vec::new(),
            header: [0; 5],
            header_len: 0,
            remaining: 0,
            skipping: false,
            failed: None,
            total: 0,
            messages: 0,
        }
    }

    /// Still reading (no failure yet).
    pub fn wants_bytes(&self) -> bool {
        self.failed.is_none()
    }

    /// Marks the capture failed (its bytes are dropped).
    pub fn fail(&mut self, reason: Reason) {
        if self.failed.is_none() {
            self.failed = Some(reason);
        }
        self.buf = Vec::new();
    }

    /// Feeds the next bytes. For frames, `each` sizes every complete
    /// message as it completes.
    pub fn feed(&mut self, mut bytes: &[u8], each: &mut dyn FnMut(&[u8]) -> Result<u64, Reason>) {
        if !self.wants_bytes() {
            return;
        }
        if !self.frames {
            if self.buf.len() + bytes.len() > self.max {
                self.fail(Reason::TooLarge);
            } else {
                self.buf.extend_from_slice(bytes);
            }
            return;
        }
        while !bytes.is_empty() && self.failed.is_none() {
            if self.header_len < 5 {
                let n = (5 - self.header_len as usize).min(bytes.len());
                let at = self.header_len as usize;
                self.header[at..at + n].copy_from_slice(&bytes[..n]);
                self.header_len += n as u8;
                bytes = &bytes[n..];
                if self.header_len < 5 {
                    return;
                }
                let flags = self.header[0];
                let len = u32::from_be_bytes([
                    self.header[1],
                    self.header[2],
                    self.header[3],
                    self.header[4],
                ]) as usize;
                self.skipping = flags & FLAG_TRAILER != 0;
                if !self.skipping {
                    if flags & FLAG_COMPRESSED != 0 {
                        return self.fail(Reason::Compressed);
                    }
                    if len > self.max {
                        return self.fail(Reason::TooLarge);
                    }
                    self.buf.clear();
                    self.buf.reserve(len);
                }
                self.remaining = len;
            }
            let n = self.remaining.min(bytes.len());
            if !self.skipping {
                self.buf.extend_from_slice(&bytes[..n]);
            }
            self.remaining -= n;
            bytes = &bytes[n..];
            if self.remaining == 0 {
                self.header_len = 0;
                if !self.skipping {
                    self.message_done(each);
                }
            }
        }
    }

    fn message_done(&mut self, each: &mut dyn FnMut(&[u8]) -> Result<u64, Reason>) {
        match each(&self.buf) {
            Ok(n) => {
                self.total += n;
                self.messages += 1;
            }
            Err(r) => self.fail(r),
        }
        self.buf.clear();
    }

    /// The direction ended: a whole body is sized by `each` (once); frames
    /// must have ended on a frame boundary. The total size, or why none.
    pub fn finish(
        &mut self,
        each: &mut dyn FnMut(&[u8]) -> Result<u64, Reason>,
    ) -> Result<u64, Reason> {
        if let Some(r) = self.failed {
            return Err(r);
        }
        if self.frames {
            if self.header_len != 0 {
                self.fail(Reason::Mismatch);
                return Err(Reason::Mismatch);
            }
        } else {
            let body = std::mem::take(&mut self.buf);
            match each(&body) {
                Ok(n) => {
                    self.total = n;
                    self.messages = 1;
                }
                Err(r) => {
                    self.fail(r);
                    return Err(r);
                }
            }
        }
        Ok(self.total)
    }

    /// Messages sized so far.
    pub fn messages(&self) -> u64 {
        self.messages
    }

    /// Bytes held right now (at most the bound).
    pub fn held(&self) -> usize {
        self.buf.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(flags: u8, payload: &[u8]) -> Vec<u8> {
        let mut f = vec![flags];
        f.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn frames_any_chunking() {
        let mut body = frame(0, b"abc");
        body.extend(frame(0, b""));
        body.extend(frame(0, b"hello"));
        body.extend(frame(0x80, b"grpc-status:0\r\n"));
        for chunk in 1..body.len() {
            let mut c = Capture::frames(16);
            let mut sizes = Vec::new();
            let mut each = |m: &[u8]| {
                sizes.push(m.to_vec());
                Ok(m.len() as u64 * 10)
            };
            for part in body.chunks(chunk) {
                c.feed(part, &mut each);
            }
            assert_eq!(c.finish(&mut each), Ok(80));
            assert_eq!(c.messages(), 3);
            assert_eq!(sizes, vec![b"abc".to_vec(), vec![], b"hello".to_vec()]);
        }
    }

    #[test]
    fn failures_stick_and_free() {
        let ok = &mut |m: &[u8]| Ok(m.len() as u64);
        let mut c = Capture::frames(4);
        c.feed(&frame(0, b"toolong"), ok);
        assert_eq!(c.finish(ok), Err(Reason::TooLarge));
        assert_eq!(c.held(), 0);
        let mut c = Capture::frames(64);
        c.feed(&frame(1, b"gz"), ok);
        assert_eq!(c.finish(ok), Err(Reason::Compressed));
        let mut c = Capture::frames(64);
        c.feed(&frame(0, b"ab")[..4], ok);
        assert_eq!(c.finish(ok), Err(Reason::Mismatch));
        let mut c = Capture::whole(3);
        c.feed(b"ab", ok);
        c.feed(b"cd", ok);
        assert_eq!(c.finish(ok), Err(Reason::TooLarge));
        let mut c = Capture::whole(3);
        c.feed(b"ab", ok);
        assert_eq!(c.finish(ok), Ok(2));
        let bad = &mut |_: &[u8]| Err(Reason::Mismatch);
        let mut c = Capture::frames(64);
        c.feed(&frame(0, b"x"), bad);
        assert_eq!(c.finish(ok), Err(Reason::Mismatch));
    }
}
