package restapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	wirelensv1 "github.com/wirelens/wirelens/services/gen/wirelens/v1"
)

func TestMarshalJSONIsCompactAndProto3(t *testing.T) {
	for _, tc := range []struct {
		m    proto.Message
		want string
	}{
		{&wirelensv1.FactorialReply{Result: 12345678901, TimeTaken: 0.5}, `{"result":"12345678901","timeTaken":0.5}`},
		{&wirelensv1.Person{Name: "polar penguin", Age: 20}, `{"name":"polar penguin","age":20}`},
		{&wirelensv1.Person{Name: "kevin", Hobbies: []string{"a b", "c"}, Address: &wirelensv1.Address{City: "seoul", ZipCode: "1"}},
			`{"name":"kevin","hobbies":["a b","c"],"address":{"city":"seoul","zipCode":"1"}}`},
		{&wirelensv1.EchoReply{Content: "<&>"}, `{"content":"<&>"}`},
		{&wirelensv1.EchoReply{}, `{}`},
	} {
		got, err := MarshalJSON(tc.m)
		if err != nil || string(got) != tc.want {
			t.Errorf("MarshalJSON(%v) = %s, %v; want %s", tc.m, got, err, tc.want)
		}
		back := tc.m.ProtoReflect().Type().New().Interface()
		if err := UnmarshalJSON(got, back, false); err != nil || !proto.Equal(back, tc.m) {
			t.Errorf("round trip of %s: %v, %v", got, back, err)
		}
	}
	var p wirelensv1.Person
	if err := UnmarshalJSON([]byte(`{"name":"x","zip":1}`), &p, false); err == nil {
		t.Error("unknown field accepted")
	}
	if err := UnmarshalJSON([]byte(`{"name":"x","zip":1}`), &p, true); err != nil || p.GetName() != "x" {
		t.Errorf("discardUnknown: %v %v", &p, err)
	}
	// E3's payload study: the protobuf of this Person is 0A 0D "polar penguin" 10 14.
	b, _ := MarshalProto(&wirelensv1.Person{Name: "polar penguin", Age: 20})
	if want := "\x0a\x0dpolar penguin\x10\x14"; string(b) != want {
		t.Errorf("protobuf = %q, want %q", b, want)
	}
}

func TestMediaTypes(t *testing.T) {
	for ct, want := range map[string]bool{
		"application/protobuf": true, "application/x-protobuf": true, "Application/Protobuf; proto=x": true,
		"application/json": false, "": false, "application/protobuffer": false, "application/grpc": false,
	} {
		if got := IsProtobuf(ct); got != want {
			t.Errorf("IsProtobuf(%q) = %v", ct, got)
		}
	}
	for accept, want := range map[string]string{
		"application/protobuf":                  "application/protobuf",
		"text/html, application/x-protobuf;q=1": "application/x-protobuf",
		"application/json":                      "",
		"*/*":                                   "",
		"":                                      "",
	} {
		got, ok := AcceptsProtobuf(accept)
		if got != want || ok != (want != "") {
			t.Errorf("AcceptsProtobuf(%q) = %q, %v", accept, got, ok)
		}
	}
}

func TestTemplate(t *testing.T) {
	tm, err := ParseTemplate("/v1/products/{id}")
	if err != nil {
		t.Fatal(err)
	}
	if tm.Mux != "/v1/products/{p0}" || !reflect.DeepEqual(tm.Vars, []string{"id"}) {
		t.Fatalf("template = %+v", tm)
	}
	path, err := tm.Expand(&wirelensv1.GetProductRequest{Id: 42})
	if err != nil || path != "/v1/products/42" {
		t.Fatalf("Expand = %q, %v", path, err)
	}
	tm, err = ParseTemplate("/v1/{address.city=*}/x/{name=**}")
	if err != nil || tm.Mux != "/v1/{p0}/x/{p1...}" {
		t.Fatalf("template = %+v, %v", tm, err)
	}
	path, err = tm.Expand(&wirelensv1.Person{Name: "a b/c", Address: &wirelensv1.Address{City: "sé/oul"}})
	if err != nil || path != "/v1/s%C3%A9%2Foul/x/a%20b/c" {
		t.Fatalf("Expand = %q, %v", path, err)
	}
	for _, bad := range []string{"v1/x", "/v1/{id", "/v1/{id=a/*}", "/v1/{x=**}/y", "/v1/x:verb", "/v1/{1x}", "/v1/{a..b}"} {
		if _, err := ParseTemplate(bad); err == nil {
			t.Errorf("ParseTemplate(%q) succeeded", bad)
		}
	}
}

func TestQueryAndBindRoundTrip(t *testing.T) {
	in := &wirelensv1.Person{Name: "kevin", Age: 7, Hobbies: []string{"foot ball", "basket ball"},
		Address: &wirelensv1.Address{City: "seoul", ZipCode: "123456"}}
	tm, _ := ParseTemplate("/v1/people/{name}")
	q, err := Query(in, tm.Vars)
	if err != nil {
		t.Fatal(err)
	}
	if got := q.Encode(); got != "address.city=seoul&address.zip_code=123456&age=7&hobbies=foot+ball&hobbies=basket+ball" {
		t.Fatalf("query = %s", got)
	}
	out := &wirelensv1.Person{}
	path := map[string]string{MuxName(0): "kevin"}
	if err := Bind(out, tm, func(n string) string { return path[n] }, q); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(in, out) {
		t.Fatalf("round trip = %v, want %v", out, in)
	}
	// JSON names are accepted too.
	out = &wirelensv1.Person{}
	if err := Bind(out, tm, func(string) string { return "x" }, url.Values{"address.zipCode": {"9"}}); err != nil || out.GetAddress().GetZipCode() != "9" {
		t.Fatalf("zipCode: %v %v", out, err)
	}
	for _, bad := range []url.Values{
		{"nope": {"1"}}, {"age": {"x"}}, {"age": {"1", "2"}}, {"address": {"x"}}, {"name.x": {"1"}},
	} {
		err := Bind(&wirelensv1.Person{}, Template{}, nil, bad)
		if err == nil {
			t.Errorf("Bind(%v) succeeded", bad)
		}
		if _, unknown := bad["nope"]; unknown && !errors.Is(err, ErrUnknownField) {
			t.Errorf("Bind(%v) = %v, want ErrUnknownField", bad, err)
		}
	}
	if _, err := Query(&wirelensv1.ListProductsReply{Products: []*wirelensv1.Product{{}}}, nil); err == nil ||
		!strings.Contains(err.Error(), "lists of messages") {
		t.Errorf("Query(list of messages) = %v", err)
	}
}

// TestCompactMatchesJSONCompact compares compact with encoding/json's
// Compact on protojson output full of strings that look like JSON.
func TestCompactMatchesJSONCompact(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []rune(`", \:{}[]ab` + "\t\n\r\u2028é😀\x00\x1f")
	randString := func() string {
		var b strings.Builder
		for range r.IntN(12) {
			b.WriteRune(alphabet[r.IntN(len(alphabet))])
		}
		return b.String()
	}
	for range 2000 {
		m := &wirelensv1.Person{Name: randString(), Age: r.Int32N(100), Address: &wirelensv1.Address{City: randString()}}
		for range r.IntN(4) {
			m.Hobbies = append(m.Hobbies, randString())
		}
		raw, err := protojson.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		if err := json.Compact(&want, raw); err != nil {
			t.Fatal(err)
		}
		got, err := MarshalJSON(m)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("MarshalJSON = %q, want %q", got, want.Bytes())
		}
	}
	// Multi-line protojson, compacted, is the compact form too.
	m := &wirelensv1.Person{Name: "a, b", Hobbies: []string{"x", "y"}}
	multi, _ := protojson.MarshalOptions{Multiline: true}.Marshal(m)
	single, _ := MarshalJSON(m)
	if got := compact(multi); !bytes.Equal(got, single) {
		t.Fatalf("compact(multiline) = %q, want %q", got, single)
	}
}
