package ops

import (
	"reflect"
	"testing"
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
		{"hello.SayHello", "/wirelens.v1.Hello/SayHello", "unary", []HTTPRule{{"POST", "/v1/hello", "*"}}},
		{"hello.SayHelloBig", "/wirelens.v1.Hello/SayHelloBig", "unary", []HTTPRule{{"POST", "/v1/hello-big", "*"}}},
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

func TestOperationName(t *testing.T) {
	for in, want := range map[[2]string]string{
		{"Hello", "SayHello"}:            "hello.SayHello",
		{"CatalogService", "GetProduct"}: "catalogService.GetProduct",
		{"X", "Y"}:                       "x.Y",
	} {
		if got := OperationName(in[0], in[1]); got != want {
			t.Errorf("OperationName(%q, %q) = %q, want %q", in[0], in[1], got, want)
		}
	}
}
