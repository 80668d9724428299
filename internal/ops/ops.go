// Package ops lists the wirelens operations from the compiled proto
// descriptors, the same way proto/opmap.py does for the filter: the operation
// name is the short service name with its first letter lower-cased, a dot and
// the method name (wirelens.v1.Hello/SayHello -> hello.SayHello); the HTTP
// routes come from the google.api.http annotations.
package ops

import (
	"fmt"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"google.golang.org/genproto/googleapis/api/annotations"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	wirelensv1 "github.com/wirelens/wirelens/services/gen/wirelens/v1"
)

// HTTPRule is one REST binding of a method (google.api.http).
type HTTPRule struct {
	Method  string // GET, POST, PUT, DELETE, PATCH or a custom kind
	Pattern string // URL path template, e.g. /v1/hello
	Body    string // request body field ("*" for the whole message, "" for none)
}

// Operation is one RPC method of a wirelens service.
type Operation struct {
	Name      string // e.g. hello.SayHello
	GRPCPath  string // e.g. /wirelens.v1.Hello/SayHello
	Streaming string // unary, client, server or bidi
	Method    protoreflect.MethodDescriptor
	HTTPRules []HTTPRule
}

// Files are the proto files whose services wirelens serves.
var Files = []protoreflect.FileDescriptor{
	wirelensv1.File_wirelens_v1_catalog_proto,
	wirelensv1.File_wirelens_v1_echo_proto,
	wirelensv1.File_wirelens_v1_hello_proto,
	wirelensv1.File_wirelens_v1_math_proto,
	wirelensv1.File_wirelens_v1_people_proto,
}

// All returns the operations of every service in Files, sorted by GRPCPath.
func All() []Operation {
	var out []Operation
	for _, fd := range Files {
		out = append(out, FromFile(fd)...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GRPCPath < out[j].GRPCPath })
	return out
}

// Lookup finds an operation by name (e.g. hello.SayHello).
func Lookup(name string) (Operation, error) {
	var names []string
	for _, op := range All() {
		if op.Name == name {
			return op, nil
		}
		names = append(names, op.Name)
	}
	return Operation{}, fmt.Errorf("unknown operation %q (known: %s)", name, strings.Join(names, ", "))
}

// FromFile returns the operations of the services declared in fd.
func FromFile(fd protoreflect.FileDescriptor) []Operation {
	var out []Operation
	services := fd.Services()
	for i := 0; i < services.Len(); i++ {
		sd := services.Get(i)
		methods := sd.Methods()
		for j := 0; j < methods.Len(); j++ {
			md := methods.Get(j)
			out = append(out, Operation{
				Name:      OperationName(string(sd.Name()), string(md.Name())),
				GRPCPath:  "/" + string(sd.FullName()) + "/" + string(md.Name()),
				Streaming: streaming(md),
				Method:    md,
				HTTPRules: HTTPRules(md),
			})
		}
	}
	return out
}

// OperationName builds the logical operation name shared by every protocol.
func OperationName(service, method string) string {
	r, size := utf8.DecodeRuneInString(service)
	return string(unicode.ToLower(r)) + service[size:] + "." + method
}

func streaming(md protoreflect.MethodDescriptor) string {
	switch {
	case md.IsStreamingClient() && md.IsStreamingServer():
		return "bidi"
	case md.IsStreamingClient():
		return "client"
	case md.IsStreamingServer():
		return "server"
	default:
		return "unary"
	}
}

// HTTPRules returns the method's google.api.http rule and its
// additional_bindings, in declaration order.
func HTTPRules(md protoreflect.MethodDescriptor) []HTTPRule {
	opts := md.Options()
	if opts == nil || !proto.HasExtension(opts, annotations.E_Http) {
		return nil
	}
	rule, ok := proto.GetExtension(opts, annotations.E_Http).(*annotations.HttpRule)
	if !ok || rule == nil {
		return nil
	}
	return flatten(rule, nil)
}

func flatten(rule *annotations.HttpRule, out []HTTPRule) []HTTPRule {
	r := HTTPRule{Body: rule.GetBody()}
	switch p := rule.GetPattern().(type) {
	case *annotations.HttpRule_Get:
		r.Method, r.Pattern = "GET", p.Get
	case *annotations.HttpRule_Put:
		r.Method, r.Pattern = "PUT", p.Put
	case *annotations.HttpRule_Post:
		r.Method, r.Pattern = "POST", p.Post
	case *annotations.HttpRule_Delete:
		r.Method, r.Pattern = "DELETE", p.Delete
	case *annotations.HttpRule_Patch:
		r.Method, r.Pattern = "PATCH", p.Patch
	case *annotations.HttpRule_Custom:
		r.Method, r.Pattern = p.Custom.GetKind(), p.Custom.GetPath()
	}
	if r.Method != "" {
		out = append(out, r)
	}
	for _, extra := range rule.GetAdditionalBindings() {
		out = flatten(extra, out)
	}
	return out
}
