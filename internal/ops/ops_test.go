package ops

import (
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
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
		{"catalog.GetProduct", "/wirelens.v1.Catalog/GetProduct", "unary", []HTTPRule{{"GET", "/v1/products/{id}", ""}}},
		{"catalog.ListProducts", "/wirelens.v1.Catalog/ListProducts", "unary", []HTTPRule{{"GET", "/v1/products", ""}}},
		{"echo.BiStream", "/wirelens.v1.Echo/BiStream", "bidi", nil},
		{"echo.ServerStream", "/wirelens.v1.Echo/ServerStream", "server", nil},
		{"echo.Unary", "/wirelens.v1.Echo/Unary", "unary", []HTTPRule{{"GET", "/v1/echo", ""}}},
		{"hello.SayHello", "/wirelens.v1.Hello/SayHello", "unary", []HTTPRule{{"POST", "/v1/hello", "*"}}},
		{"hello.SayHelloBig", "/wirelens.v1.Hello/SayHelloBig", "unary", []HTTPRule{{"POST", "/v1/hello-big", "*"}}},
		{"math.CalculateFactorial", "/wirelens.v1.Math/CalculateFactorial", "unary", []HTTPRule{{"POST", "/v1/factorial", "*"}}},
		{"people.Register", "/wirelens.v1.People/Register", "unary", []HTTPRule{{"POST", "/v1/person", "*"}}},
		{"people.RegisterBatch", "/wirelens.v1.People/RegisterBatch", "client", nil},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("All() =\n%+v\nwant\n%+v", got, want)
	}
}

// TestFilesCoverEveryProto fails when a proto file of package wirelens.* is
// compiled in but missing from Files.
func TestFilesCoverEveryProto(t *testing.T) {
	listed := map[string]bool{}
	for _, fd := range Files {
		listed[fd.Path()] = true
	}
	protoregistry.GlobalFiles.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		pkg := string(fd.Package())
		if (pkg == "wirelens" || strings.HasPrefix(pkg, "wirelens.")) && !listed[fd.Path()] {
			t.Errorf("ops.Files lacks %s", fd.Path())
		}
		return true
	})
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
