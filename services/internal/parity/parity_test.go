package parity

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/wirelens/wirelens/internal/domain"
	"github.com/wirelens/wirelens/internal/grpcserver"
	"github.com/wirelens/wirelens/internal/ops"
	"github.com/wirelens/wirelens/internal/people"
	"github.com/wirelens/wirelens/internal/restapi"
	"github.com/wirelens/wirelens/internal/restserver"
	wirelensv1 "github.com/wirelens/wirelens/services/gen/wirelens/v1"
)

// stack is a REST server and a gRPC server on free loopback ports, over one
// set of domain services.
type stack struct {
	restURL string
	conn    *grpc.ClientConn
	http    *http.Client
}

func start(t *testing.T) *stack {
	t.Helper()
	svc := domain.New()

	h, err := restserver.NewHandler(svc)
	if err != nil {
		t.Fatal(err)
	}
	restLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	restSrv := restserver.NewServer("", h)
	go func() { _ = restSrv.Serve(restLis) }()

	grpcLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	grpcSrv, _ := grpcserver.New(svc)
	go func() { _ = grpcSrv.Serve(grpcLis) }()

	conn, err := grpc.NewClient(grpcLis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	s := &stack{restURL: "http://" + restLis.Addr().String(), conn: conn, http: &http.Client{Timeout: 10 * time.Second}}
	t.Cleanup(func() {
		_ = conn.Close()
		grpcSrv.GracefulStop()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = restSrv.Shutdown(ctx)
		s.http.CloseIdleConnections()
	})
	return s
}

// answer is one transport's reply: the decoded message, the raw body and
// the error code.
type answer struct {
	reply  proto.Message
	body   []byte
	code   codes.Code
	status int // HTTP status (REST)
}

func (s *stack) grpc(t *testing.T, op ops.Operation, req proto.Message) answer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	reply := newMessage(op.Method.Output().FullName())
	if err := s.conn.Invoke(ctx, op.GRPCPath, req, reply); err != nil {
		return answer{code: status.Code(err)}
	}
	body, err := restapi.MarshalProto(reply)
	if err != nil {
		t.Fatal(err)
	}
	return answer{reply: reply, body: body}
}

// rest calls the operation's first HTTP rule, as JSON or as protobuf.
func (s *stack) rest(t *testing.T, op ops.Operation, req proto.Message, asProto bool) answer {
	t.Helper()
	rule := op.HTTPRules[0]
	tmpl, err := restapi.ParseTemplate(rule.Pattern)
	if err != nil {
		t.Fatal(err)
	}
	path, err := tmpl.Expand(req)
	if err != nil {
		t.Fatal(err)
	}
	var body []byte
	if rule.Body == "*" {
		if asProto {
			body, err = restapi.MarshalProto(req)
		} else {
			body, err = restapi.MarshalJSON(req)
		}
		if err != nil {
			t.Fatal(err)
		}
	} else if q, err := restapi.Query(req, tmpl.Vars); err != nil {
		t.Fatal(err)
	} else if len(q) > 0 {
		path += "?" + q.Encode()
	}
	hreq, err := http.NewRequest(rule.Method, s.restURL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	if asProto {
		hreq.Header.Set("Content-Type", restapi.ContentTypeProtobuf)
		hreq.Header.Set("Accept", restapi.ContentTypeProtobuf)
	}
	resp, err := s.http.Do(hreq)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		var e restserver.ErrorBody
		if err := json.Unmarshal(data, &e); err != nil {
			t.Fatalf("%s %s: HTTP %d, error body %q: %v", rule.Method, path, resp.StatusCode, data, err)
		}
		return answer{code: e.Code, status: resp.StatusCode, body: data}
	}
	reply := newMessage(op.Method.Output().FullName())
	ct := resp.Header.Get("Content-Type")
	if asProto {
		if ct != restapi.ContentTypeProtobuf {
			t.Fatalf("%s %s: content-type %q", rule.Method, path, ct)
		}
		err = proto.Unmarshal(data, reply)
	} else {
		if ct != restapi.ContentTypeJSON {
			t.Fatalf("%s %s: content-type %q", rule.Method, path, ct)
		}
		err = restapi.UnmarshalJSON(data, reply, false)
	}
	if err != nil {
		t.Fatalf("%s %s: decoding %q: %v", rule.Method, path, data, err)
	}
	if cl := resp.Header.Get("Content-Length"); cl != "" && resp.ContentLength != int64(len(data)) {
		t.Fatalf("%s %s: content-length %s, body %d bytes", rule.Method, path, cl, len(data))
	}
	return answer{reply: reply, body: data, status: resp.StatusCode}
}

func newMessage(name protoreflect.FullName) proto.Message {
	mt, err := protoregistry.GlobalTypes.FindMessageByName(name)
	if err != nil {
		panic(err) // the generated package registers every message
	}
	return mt.New().Interface()
}

// normalize clears what legitimately differs between two calls: the time a
// factorial took.
func normalize(m proto.Message) proto.Message {
	if r, ok := m.(*wirelensv1.FactorialReply); ok {
		r = proto.Clone(r).(*wirelensv1.FactorialReply)
		r.TimeTaken = 0
		return r
	}
	return m
}

type golden struct {
	op   string
	req  proto.Message
	code codes.Code // expected error code; OK for a reply
	http int        // expected HTTP status of an error
}

var goldens = []golden{
	{"hello.SayHello", &wirelensv1.HelloRequest{Name: "wirelens"}, codes.OK, 0},
	{"hello.SayHello", &wirelensv1.HelloRequest{}, codes.OK, 0},
	{"hello.SayHelloBig", &wirelensv1.HelloRequest{Name: "wirelens"}, codes.OK, 0},
	{"math.CalculateFactorial", &wirelensv1.FactorialRequest{Number: 10000}, codes.OK, 0},
	{"math.CalculateFactorial", &wirelensv1.FactorialRequest{Number: 0}, codes.OK, 0},
	{"math.CalculateFactorial", &wirelensv1.FactorialRequest{Number: -1}, codes.InvalidArgument, 400},
	{"people.Register", people.Example(20), codes.OK, 0},
	{"people.Register", &wirelensv1.Person{Name: "polar penguin", Age: 20}, codes.OK, 0},
	{"catalog.GetProduct", &wirelensv1.GetProductRequest{Id: 1}, codes.OK, 0},
	{"catalog.GetProduct", &wirelensv1.GetProductRequest{Id: 10000}, codes.OK, 0},
	{"catalog.GetProduct", &wirelensv1.GetProductRequest{Id: 10001}, codes.NotFound, 404},
	{"catalog.ListProducts", &wirelensv1.ListProductsRequest{Count: 100}, codes.OK, 0},
	{"catalog.ListProducts", &wirelensv1.ListProductsRequest{Count: 500}, codes.OK, 0},
	{"catalog.ListProducts", &wirelensv1.ListProductsRequest{}, codes.OK, 0},
	{"catalog.ListProducts", &wirelensv1.ListProductsRequest{Count: -3}, codes.InvalidArgument, 400},
	{"echo.Unary", &wirelensv1.EchoRequest{Content: "TestContent0"}, codes.OK, 0},
	{"echo.Unary", &wirelensv1.EchoRequest{Content: "ünïcødé <&> \"q\" a+b=c?d#e/f"}, codes.OK, 0},
	{"echo.Unary", &wirelensv1.EchoRequest{}, codes.OK, 0},
}

// TestGoldenParity calls every unary operation over gRPC, REST JSON and REST
// protobuf and compares the logical answers, and the exact bytes: the REST
// JSON body is restapi.MarshalJSON of the gRPC reply, the REST protobuf body
// its protobuf encoding.
func TestGoldenParity(t *testing.T) {
	s := start(t)
	covered := map[string]bool{}
	for _, g := range goldens {
		op, err := ops.Lookup(g.op)
		if err != nil {
			t.Fatal(err)
		}
		covered[g.op] = true
		t.Run(g.op, func(t *testing.T) {
			viaGRPC := s.grpc(t, op, g.req)
			viaJSON := s.rest(t, op, g.req, false)
			viaProto := s.rest(t, op, g.req, true)
			for name, a := range map[string]answer{"grpc": viaGRPC, "rest": viaJSON, "rest-proto": viaProto} {
				if a.code != g.code {
					t.Fatalf("%s %v over %s: code %v, want %v (%s)", g.op, g.req, name, a.code, g.code, a.body)
				}
				if name != "grpc" && g.code != codes.OK && a.status != g.http {
					t.Fatalf("%s %v over %s: HTTP %d, want %d", g.op, g.req, name, a.status, g.http)
				}
			}
			if g.code != codes.OK {
				return
			}
			want := normalize(viaGRPC.reply)
			for name, a := range map[string]answer{"rest": viaJSON, "rest-proto": viaProto} {
				if !proto.Equal(normalize(a.reply), want) {
					t.Fatalf("%s %v: %s answer differs from gRPC's", g.op, g.req, name)
				}
			}
			if _, ok := want.(*wirelensv1.FactorialReply); ok {
				return // time_taken differs between calls: no byte comparison
			}
			wantJSON, err := restapi.MarshalJSON(viaGRPC.reply)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(viaJSON.body, wantJSON) {
				t.Fatalf("%s %v: REST JSON body\n%.300s\nwant\n%.300s", g.op, g.req, viaJSON.body, wantJSON)
			}
			if !bytes.Equal(viaProto.body, viaGRPC.body) {
				t.Fatalf("%s %v: REST protobuf body (%d bytes) differs from gRPC's (%d bytes)", g.op, g.req, len(viaProto.body), len(viaGRPC.body))
			}
		})
	}
	for _, op := range ops.All() {
		if op.Streaming == "unary" && !covered[op.Name] {
			t.Errorf("no golden case for %s", op.Name)
		}
	}
}

// TestSizes checks the experiments' sizes on the wire (bodies as the REST
// server sends them) and logs them.
func TestSizes(t *testing.T) {
	s := start(t)
	for _, tc := range []struct {
		op               string
		req              proto.Message
		minJSON, maxJSON int
	}{
		{"catalog.GetProduct", &wirelensv1.GetProductRequest{Id: 1}, 700, 1100},
		{"catalog.ListProducts", &wirelensv1.ListProductsRequest{Count: 100}, 55_000, 90_000},
		{"catalog.ListProducts", &wirelensv1.ListProductsRequest{Count: 500}, 100_001, 700_000},
		{"hello.SayHello", &wirelensv1.HelloRequest{Name: "wirelens"}, 0, 1 << 30},
		{"hello.SayHelloBig", &wirelensv1.HelloRequest{Name: "wirelens"}, 0, 1 << 30},
		{"math.CalculateFactorial", &wirelensv1.FactorialRequest{Number: 10000}, 0, 1 << 30},
		{"people.Register", people.Example(20), 0, 1 << 30},
		{"echo.Unary", &wirelensv1.EchoRequest{Content: "TestContent0"}, 0, 1 << 30},
	} {
		op, _ := ops.Lookup(tc.op)
		j, p := s.rest(t, op, tc.req, false), s.rest(t, op, tc.req, true)
		reqJSON, _ := restapi.MarshalJSON(tc.req)
		t.Logf("%-24s %-44s request %3d B JSON %3d B protobuf; reply %6d B JSON %6d B protobuf",
			tc.op, abbreviate(reqJSON), len(reqJSON), proto.Size(tc.req), len(j.body), len(p.body))
		if len(j.body) < tc.minJSON || len(j.body) > tc.maxJSON {
			t.Errorf("%s %v: JSON reply %d bytes, want %d..%d", tc.op, tc.req, len(j.body), tc.minJSON, tc.maxJSON)
		}
		if len(p.body) >= len(j.body) && len(j.body) > 2 {
			t.Errorf("%s %v: protobuf (%d B) not smaller than JSON (%d B)", tc.op, tc.req, len(p.body), len(j.body))
		}
	}
	// E2: SayHelloBig carries 1000 items, whatever the transport.
	op, _ := ops.Lookup("hello.SayHelloBig")
	for name, a := range map[string]answer{
		"grpc": s.grpc(t, op, &wirelensv1.HelloRequest{Name: "x"}), "rest": s.rest(t, op, &wirelensv1.HelloRequest{Name: "x"}, false),
		"rest-proto": s.rest(t, op, &wirelensv1.HelloRequest{Name: "x"}, true),
	} {
		if n := len(a.reply.(*wirelensv1.HelloBigReply).GetDataList()); n != 1000 {
			t.Errorf("SayHelloBig over %s: %d items", name, n)
		}
	}
}

func abbreviate(b []byte) string {
	if len(b) > 44 {
		return string(b[:41]) + "..."
	}
	return string(b)
}
