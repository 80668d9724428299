package grpcweb

import (
	"bytes"
	"errors"
	"net/http"
	"testing"

	"google.golang.org/grpc/codes"
)

func TestEncodeMessage(t *testing.T) {
	got := EncodeMessage([]byte{0x0a, 0x01, 'x'})
	want := []byte{0x00, 0, 0, 0, 3, 0x0a, 0x01, 'x'}
	if !bytes.Equal(got, want) {
		t.Fatalf("EncodeMessage = % x, want % x", got, want)
	}
	if got := EncodeMessage(nil); !bytes.Equal(got, []byte{0, 0, 0, 0, 0}) {
		t.Fatalf("empty message frame = % x", got)
	}
}

func TestEncodeTrailers(t *testing.T) {
	got := EncodeTrailers(http.Header{"Grpc-Status": {"0"}, "Grpc-Message": {"ok"}})
	payload := "grpc-message:ok\r\ngrpc-status:0\r\n"
	want := append([]byte{0x80, 0, 0, 0, byte(len(payload))}, payload...)
	if !bytes.Equal(got, want) {
		t.Fatalf("EncodeTrailers = %q, want %q", got, want)
	}
}

func TestDecodeResponseRoundTrip(t *testing.T) {
	body := EncodeMessage([]byte("one"))
	body = AppendFrame(body, FlagData, []byte("two"))
	body = append(body, EncodeTrailers(http.Header{"Grpc-Status": {"5"}, "Grpc-Message": {"not%20found"}})...)
	r, err := DecodeResponse(body)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Messages) != 2 || string(r.Messages[0]) != "one" || string(r.Messages[1]) != "two" {
		t.Fatalf("messages = %q", r.Messages)
	}
	code, msg, err := Status(r, http.Header{"Grpc-Status": {"0"}})
	if err != nil || code != codes.NotFound || msg != "not found" {
		t.Fatalf("Status = %v %q %v (the trailer frame must win over headers)", code, msg, err)
	}
}

func TestTrailersOnlyUsesHeaders(t *testing.T) {
	r, err := DecodeResponse(nil)
	if err != nil {
		t.Fatal(err)
	}
	code, _, err := Status(r, http.Header{"Grpc-Status": {"14"}})
	if err != nil || code != codes.Unavailable {
		t.Fatalf("Status = %v %v", code, err)
	}
	if _, _, err := Status(r, http.Header{}); err == nil {
		t.Fatal("missing grpc-status accepted")
	}
}

func TestDecodeErrors(t *testing.T) {
	for name, body := range map[string][]byte{
		"short header":     {0x00, 0, 0},
		"short payload":    {0x00, 0, 0, 0, 9, 'a'},
		"trailer not last": append(EncodeTrailers(http.Header{"Grpc-Status": {"0"}}), EncodeMessage(nil)...),
		"compressed":       AppendFrame(nil, FlagCompressed, []byte("z")),
		"bad trailer line": AppendFrame(nil, FlagTrailer, []byte("nocolon\r\n")),
	} {
		if _, err := DecodeResponse(body); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := ParseFrames([]byte{0, 0, 0, 0, 1}); !errors.Is(err, ErrTruncated) {
		t.Errorf("ParseFrames err = %v, want ErrTruncated", err)
	}
}

func TestTextRoundTripAndChunkedBase64(t *testing.T) {
	msg := EncodeMessage([]byte("hello"))
	tr := EncodeTrailers(http.Header{"Grpc-Status": {"0"}})
	// Two separately encoded chunks, each padded, as servers send them.
	text := append(EncodeText(msg), EncodeText(tr)...)
	got, err := DecodeText(text)
	if err != nil {
		t.Fatal(err)
	}
	if want := append(append([]byte{}, msg...), tr...); !bytes.Equal(got, want) {
		t.Fatalf("DecodeText = % x, want % x", got, want)
	}
	if _, err := DecodeText([]byte("abc")); err == nil {
		t.Fatal("bad length accepted")
	}
}
