// Package grpcweb encodes and decodes the gRPC-Web wire format
// (https://github.com/grpc/grpc/blob/master/doc/PROTOCOL-WEB.md): a body is a
// sequence of frames, each a flags byte and a 4-byte big-endian length
// followed by that many bytes. Flags 0x00 is a message, 0x80 the trailers
// (HTTP/1-style "name:value\r\n" lines); 0x01 marks a compressed frame.
// The text variant (application/grpc-web-text) base64-encodes the frames.
package grpcweb

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
)

// Frame flags.
const (
	FlagData       byte = 0x00
	FlagCompressed byte = 0x01
	FlagTrailer    byte = 0x80
)

// HeaderLen is the size of a frame header.
const HeaderLen = 5

// Content types.
const (
	ContentTypeProto = "application/grpc-web+proto"
	ContentTypeText  = "application/grpc-web-text"
)

// Frame is one gRPC-Web frame.
type Frame struct {
	Flags   byte
	Payload []byte
}

// IsTrailer reports whether f carries the trailers.
func (f Frame) IsTrailer() bool { return f.Flags&FlagTrailer != 0 }

// AppendFrame appends a frame holding payload to dst.
func AppendFrame(dst []byte, flags byte, payload []byte) []byte {
	dst = append(dst, flags)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(payload)))
	return append(dst, payload...)
}

// EncodeMessage returns one uncompressed message frame.
func EncodeMessage(msg []byte) []byte {
	return AppendFrame(make([]byte, 0, HeaderLen+len(msg)), FlagData, msg)
}

// EncodeTrailers returns a trailer frame for the given trailers, with
// lower-cased names in sorted order.
func EncodeTrailers(trailers http.Header) []byte {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(trailers)) {
		for _, v := range trailers[k] {
			b.WriteString(strings.ToLower(k))
			b.WriteByte(':')
			b.WriteString(v)
			b.WriteString("\r\n")
		}
	}
	return AppendFrame(nil, FlagTrailer, []byte(b.String()))
}

// ErrTruncated is returned for a body that ends inside a frame.
var ErrTruncated = errors.New("grpc-web: truncated frame")

// ParseFrames splits a binary gRPC-Web body into frames. Payloads alias body.
func ParseFrames(body []byte) ([]Frame, error) {
	var frames []Frame
	for off := 0; off < len(body); {
		if len(body)-off < HeaderLen {
			return frames, fmt.Errorf("%w: %d header bytes at offset %d", ErrTruncated, len(body)-off, off)
		}
		flags := body[off]
		n := binary.BigEndian.Uint32(body[off+1 : off+HeaderLen])
		off += HeaderLen
		if uint64(n) > uint64(len(body)-off) {
			return frames, fmt.Errorf("%w: frame of %d bytes, %d left", ErrTruncated, n, len(body)-off)
		}
		frames = append(frames, Frame{Flags: flags, Payload: body[off : off+int(n)]})
		off += int(n)
	}
	return frames, nil
}

// ParseTrailers parses a trailer frame's payload. Names are canonicalized as
// in net/http (use Get with any case).
func ParseTrailers(payload []byte) (http.Header, error) {
	h := http.Header{}
	for _, line := range strings.Split(string(payload), "\r\n") {
		if line == "" {
			continue
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok || name == "" {
			return nil, fmt.Errorf("grpc-web: malformed trailer line %q", line)
		}
		h.Add(strings.TrimSpace(name), strings.TrimSpace(value))
	}
	return h, nil
}

// Response is a decoded gRPC-Web response body.
type Response struct {
	Messages   [][]byte    // message payloads, in order
	Trailers   http.Header // from the trailer frame; nil if there was none
	HasTrailer bool
}

// DecodeResponse decodes a binary gRPC-Web response body: message frames
// followed by at most one trailer frame, which must be last.
func DecodeResponse(body []byte) (*Response, error) {
	frames, err := ParseFrames(body)
	if err != nil {
		return nil, err
	}
	r := &Response{}
	for i, f := range frames {
		switch {
		case f.IsTrailer():
			if i != len(frames)-1 {
				return nil, fmt.Errorf("grpc-web: trailer frame %d of %d is not last", i+1, len(frames))
			}
			if r.Trailers, err = ParseTrailers(f.Payload); err != nil {
				return nil, err
			}
			r.HasTrailer = true
		case f.Flags&FlagCompressed != 0:
			return nil, fmt.Errorf("grpc-web: compressed frame %d not supported", i+1)
		default:
			r.Messages = append(r.Messages, f.Payload)
		}
	}
	return r, nil
}

// Status returns the gRPC status of a response: from the trailer frame, or
// else (a trailers-only response) from the HTTP response headers.
func Status(r *Response, headers http.Header) (codes.Code, string, error) {
	src := headers
	if r != nil && r.HasTrailer {
		src = r.Trailers
	}
	raw := src.Get("grpc-status")
	if raw == "" {
		return codes.Unknown, "", errors.New("grpc-web: response has no grpc-status")
	}
	n, err := strconv.ParseUint(raw, 10, 32)
	if err != nil {
		return codes.Unknown, "", fmt.Errorf("grpc-web: bad grpc-status %q", raw)
	}
	msg := src.Get("grpc-message")
	if dec, err := url.PathUnescape(msg); err == nil {
		msg = dec
	}
	return codes.Code(n), msg, nil
}

// EncodeText base64-encodes a binary body for application/grpc-web-text.
func EncodeText(body []byte) []byte {
	out := make([]byte, base64.StdEncoding.EncodedLen(len(body)))
	base64.StdEncoding.Encode(out, body)
	return out
}

// DecodeText decodes an application/grpc-web-text body. Servers may encode
// each chunk separately, so the text can be several padded base64 runs
// back to back; each 4-character group is decoded on its own.
func DecodeText(text []byte) ([]byte, error) {
	text = bytes.Join(bytes.Fields(text), nil) // drop any whitespace
	if len(text)%4 != 0 {
		return nil, fmt.Errorf("grpc-web-text: length %d is not a multiple of 4", len(text))
	}
	out := make([]byte, 0, len(text)/4*3)
	var buf [3]byte
	for i := 0; i < len(text); i += 4 {
		n, err := base64.StdEncoding.Decode(buf[:], text[i:i+4])
		if err != nil {
			return nil, fmt.Errorf("grpc-web-text: %w", err)
		}
		out = append(out, buf[:n]...)
	}
	return out, nil
}
