package ops

import (
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoregistry"
)

func TestAll(t *testing.T) {
	type row struct {
		Name, GRPCPath, Streaming string
		HTTPRules                 []HTTPRule
	}
	var got []row
	for _, op := range All() {
		got = append(got, row{op.Name, op.GRPCPath, op.Streaming, op.HTTPRules})
	}
	want := []row{
		{"catalog.GetProduct", "/wirelens.v1.Catalog/GetProduct", "unary", []HTTPRule{{"GET", "/v1/products/{id}", "", ""}}},
		{"catalog.ListProducts", "/wirelens.v1.Catalog/ListProducts", "unary", []HTTPRule{{"GET", "/v1/products", "", ""}}},
		{"echo.BiStream", "/wirelens.v1.Echo/BiStream", "bidi", []HTTPRule{}},
		{"echo.ServerStream", "/wirelens.v1.Echo/ServerStream", "server", []HTTPRule{}},
		{"echo.Unary", "/wirelens.v1.Echo/Unary", "unary", []HTTPRule{{"GET", "/v1/echo", "", ""}}},
		{"hello.SayHello", "/wirelens.v1.Hello/SayHello", "unary", []HTTPRule{{"POST", "/v1/hello", "*", ""}}},
		{"hello.SayHelloBig", "/wirelens.v1.Hello/SayHelloBig", "unary", []HTTPRule{{"POST", "/v1/hello-big", "*", ""}}},
		{"math.CalculateFactorial", "/wirelens.v1.Math/CalculateFactorial", "unary", []HTTPRule{{"POST", "/v1/factorial", "*", ""}}},
		{"people.Register", "/wirelens.v1.People/Register", "unary", []HTTPRule{{"POST", "/v1/person", "*", ""}}},
		{"people.RegisterBatch", "/wirelens.v1.People/RegisterBatch", "client", []HTTPRule{}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("All() =\n%+v\nwant\n%+v", got, want)
	}
}

func TestLookup(t *testing.T) {
	op, err := Lookup("hello.SayHelloBig")
	if err != nil {
		t.Fatal(err)
	}
	if op.Method.Output().FullName() != "wirelens.v1.HelloBigReply" {
		t.Fatalf("output = %s", op.Method.Output().FullName())
	}
	if _, err := Lookup("hello.Nope"); err == nil {
		t.Fatal("Lookup(hello.Nope) succeeded")
	}
}

func TestLoadRejectsWhatItCannotServe(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{`{"operations": [{"operation": "hello.SayHello", "rpc_service": "wirelens.v1.Hello",
		   "rpc_method": "SayHello", "http_rules": [{"method": "POST", "pattern": "/v1/hello", "bdy": "*"}]}]}`,
			`unknown field "bdy"`},
		{`{"operations": [{"operation": "hello.Nope", "rpc_service": "wirelens.v1.Hello", "rpc_method": "Nope"}]}`,
			"hello.Nope: "},
		{`{"operations": [{"operation": "hello.Reply", "rpc_service": "wirelens.v1", "rpc_method": "HelloReply"}]}`,
			"hello.Reply: wirelens.v1.HelloReply is not a method"},
		{`{"operations": [{"operation": "hello.SayHello", "rpc_service": "wirelens.v1.Hello", "rpc_method": "SayHello",
		   "request_type": "wirelens.v1.HelloReply", "response_type": "wirelens.v1.HelloReply"}]}`,
			"hello.SayHello: request_type wirelens.v1.HelloReply, but the method's is wirelens.v1.HelloRequest"},
		{`{"operations": [{"operation": "hello.SayHello", "rpc_service": "wirelens.v1.Hello", "rpc_method": "SayHello",
		   "request_type": "wirelens.v1.HelloRequest", "response_type": "wirelens.v1.HelloBigReply"}]}`,
			"hello.SayHello: response_type wirelens.v1.HelloBigReply, but the method's is wirelens.v1.HelloReply"},
		{`{"operations": [], "descriptor": ""}`, `unknown field "descriptor"`},
	} {
		_, err := load([]byte(tc.doc), protoregistry.GlobalFiles)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("load(%s) error = %v, want it to contain %q", tc.doc, err, tc.want)
		}
	}
}
