// Package restapi is the REST side of the proto methods, shared by the REST
// server and the load generator: the JSON and protobuf body encodings and
// their media types, and the google.api.http path templates and query
// parameters that carry request fields.
//
// JSON is the proto3 JSON mapping (protojson: lowerCamel json_name keys,
// int64 as strings, default values omitted), i.e. what Envoy's
// grpc_json_transcoder produces, written without insignificant whitespace so
// that bodies are the same in every build (protojson deliberately varies its
// spacing from one binary to another).
package restapi

import (
	"fmt"
	"mime"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Media types.
const (
	ContentTypeJSON      = "application/json"
	ContentTypeProtobuf  = "application/protobuf"
	ContentTypeXProtobuf = "application/x-protobuf"
)

// MarshalJSON returns the proto3 JSON form of m, compact and deterministic.
func MarshalJSON(m proto.Message) ([]byte, error) {
	raw, err := protojson.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encoding %s as JSON: %w", m.ProtoReflect().Descriptor().FullName(), err)
	}
	return compact(raw), nil
}

// compact removes, in place, the whitespace outside strings of valid JSON.
// protojson adds a space after every comma or none, depending on a hash of
// the binary; removing it costs the same in every build (about 15 % of the
// protojson encoding, less than half of json.Compact, which also validates).
func compact(b []byte) []byte {
	w, inString := 0, false
	for r := 0; r < len(b); r++ {
		c := b[r]
		switch {
		case inString:
			if c == '\\' && r+1 < len(b) {
				b[w] = c
				w++
				r++
				c = b[r]
			} else if c == '"' {
				inString = false
			}
		case c == '"':
			inString = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			continue
		}
		b[w] = c
		w++
	}
	return b[:w]
}

// UnmarshalJSON decodes proto3 JSON into m. Unknown fields are an error, as
// with Envoy's transcoder, unless discardUnknown.
func UnmarshalJSON(b []byte, m proto.Message, discardUnknown bool) error {
	return protojson.UnmarshalOptions{DiscardUnknown: discardUnknown}.Unmarshal(b, m)
}

// MarshalProto returns the deterministic protobuf encoding of m.
func MarshalProto(m proto.Message) ([]byte, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encoding %s as protobuf: %w", m.ProtoReflect().Descriptor().FullName(), err)
	}
	return b, nil
}

// IsProtobuf reports whether a Content-Type value names the protobuf
// encoding (application/protobuf or application/x-protobuf, any parameters).
func IsProtobuf(contentType string) bool {
	media, _, _ := strings.Cut(contentType, ";")
	media = strings.ToLower(strings.TrimSpace(media))
	return media == ContentTypeProtobuf || media == ContentTypeXProtobuf
}

// AcceptsProtobuf returns the protobuf media type an Accept header asks
// for, if any: the first listed of application/protobuf and
// application/x-protobuf (q-values are not weighed).
func AcceptsProtobuf(accept string) (string, bool) {
	for _, part := range strings.Split(accept, ",") {
		media, _, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		if media == ContentTypeProtobuf || media == ContentTypeXProtobuf {
			return media, true
		}
	}
	return "", false
}
