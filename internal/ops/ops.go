// Package ops lists the wirelens operations as proto/opmap.py maps them:
// names, gRPC paths, streaming kinds and REST routes come from the operation
// map proto/gen.sh embeds in services/gen/wirelens/opmap, so the rules that
// derive them live in opmap.py alone; this package adds each method's
// descriptor from the generated Go code.
package ops

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/wirelens/wirelens/services/gen/wirelens/opmap"
	// Registers the wirelens.v1 files in protoregistry.GlobalFiles, where the
	// map's methods are resolved; a new wirelens.* Go package is imported here too.
	_ "github.com/wirelens/wirelens/services/gen/wirelens/v1"
)

// HTTPRule is one REST binding of a method (google.api.http).
type HTTPRule struct {
	Method       string `json:"method"`        // GET, POST, PUT, DELETE, PATCH or a custom kind
	Pattern      string `json:"pattern"`       // URL path template, e.g. /v1/hello
	Body         string `json:"body"`          // request body field ("*" for the whole message, "" for none)
	ResponseBody string `json:"response_body"` // response field sent as the body ("" for the whole message)
}

// Operation is one RPC method of a wirelens service.
type Operation struct {
	Name      string // e.g. hello.SayHello
	GRPCPath  string // e.g. /wirelens.v1.Hello/SayHello
	Streaming string // unary, client, server or bidi
	Method    protoreflect.MethodDescriptor
	HTTPRules []HTTPRule
}

// The embedded map is generated together with the Go code it names, so a map
// that does not load is a broken checkout: fail at start-up, not per call.
var operations = mustLoad(opmap.JSON)

// All returns every operation, sorted by GRPCPath (the map's order).
func All() []Operation {
	return slices.Clone(operations)
}

// Lookup finds an operation by name (e.g. hello.SayHello).
func Lookup(name string) (Operation, error) {
	var names []string
	for _, op := range operations {
		if op.Name == name {
			return op, nil
		}
		names = append(names, op.Name)
	}
	return Operation{}, fmt.Errorf("unknown operation %q (known: %s)", name, strings.Join(names, ", "))
}

func mustLoad(data []byte) []Operation {
	ops, err := load(data, protoregistry.GlobalFiles)
	if err != nil {
		panic(fmt.Sprintf("ops: services/gen/wirelens/opmap/opmap.json (proto/gen.sh): %v", err))
	}
	return ops
}

// load parses an operation map strictly (an unknown key means opmap.py and
// this reader disagree) and resolves each method's descriptor in files; the
// map's request and response types, when it has them, must be the method's.
// The map's "descriptors" (the filter's copy of the schema) is not read: the
// Go code has the descriptors compiled in.
func load(data []byte, files *protoregistry.Files) ([]Operation, error) {
	var doc struct {
		Operations []struct {
			GRPCPath     string     `json:"grpc_path"`
			Operation    string     `json:"operation"`
			RPCService   string     `json:"rpc_service"`
			RPCMethod    string     `json:"rpc_method"`
			Streaming    string     `json:"streaming"`
			RequestType  string     `json:"request_type"`
			ResponseType string     `json:"response_type"`
			HTTPRules    []HTTPRule `json:"http_rules"`
		} `json:"operations"`
		Descriptors string `json:"descriptors"`
	}
	decoder := json.NewDecoder(bytes.NewReader(data))
	decoder.DisallowUnknownFields()
	if err := decoder.Decode(&doc); err != nil {
		return nil, err
	}
	out := make([]Operation, 0, len(doc.Operations))
	for _, op := range doc.Operations {
		fullName := protoreflect.FullName(op.RPCService + "." + op.RPCMethod)
		descriptor, err := files.FindDescriptorByName(fullName)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op.Operation, err)
		}
		method, ok := descriptor.(protoreflect.MethodDescriptor)
		if !ok {
			return nil, fmt.Errorf("%s: %s is not a method", op.Operation, fullName)
		}
		for _, t := range []struct {
			key, got string
			want     protoreflect.FullName
		}{
			{"request_type", op.RequestType, method.Input().FullName()},
			{"response_type", op.ResponseType, method.Output().FullName()},
		} {
			if t.got != "" && protoreflect.FullName(t.got) != t.want {
				return nil, fmt.Errorf("%s: %s %s, but the method's is %s", op.Operation, t.key, t.got, t.want)
			}
		}
		out = append(out, Operation{
			Name:      op.Operation,
			GRPCPath:  op.GRPCPath,
			Streaming: op.Streaming,
			Method:    method,
			HTTPRules: op.HTTPRules,
		})
	}
	return out, nil
}
