package loadgen

import (
	"encoding/json"
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"

	wirelensv1 "github.com/wirelens/wirelens/services/gen/wirelens/v1"
	"github.com/wirelens/wirelens/services/internal/hello"
	"github.com/wirelens/wirelens/services/internal/ops"
)

// workload is one operation's request, in every encoding, and the check of
// its answer.
type workload struct {
	op          ops.Operation
	request     proto.Message
	requestJSON []byte // exactly json.Marshal of the HelloRequest-like struct
	newReply    func() proto.Message
	check       func(proto.Message) error
}

// helloRequestJSON is the REST form of wirelens.v1.HelloRequest.
type helloRequestJSON struct {
	Name string `json:"name"`
}

// Operations lists the operations loadgen can drive.
func Operations() []string {
	return []string{"hello.SayHello", "hello.SayHelloBig"}
}

func newWorkload(operation, name string) (*workload, error) {
	op, err := ops.Lookup(operation)
	if err != nil {
		return nil, err
	}
	reqJSON, err := json.Marshal(helloRequestJSON{Name: name})
	if err != nil {
		return nil, fmt.Errorf("encoding request JSON: %w", err)
	}
	w := &workload{op: op, request: &wirelensv1.HelloRequest{Name: name}, requestJSON: reqJSON}
	want := hello.Greeting(name)
	switch op.Method.FullName() {
	case "wirelens.v1.Hello.SayHello":
		w.newReply = func() proto.Message { return new(wirelensv1.HelloReply) }
		w.check = func(m proto.Message) error {
			if got := m.(*wirelensv1.HelloReply).GetMessage(); got != want {
				return fmt.Errorf("reply message %q, want %q", got, want)
			}
			return nil
		}
	case "wirelens.v1.Hello.SayHelloBig":
		w.newReply = func() proto.Message { return new(wirelensv1.HelloBigReply) }
		w.check = func(m proto.Message) error {
			rep := m.(*wirelensv1.HelloBigReply)
			if got := rep.GetMessage(); got != want {
				return fmt.Errorf("reply message %q, want %q", got, want)
			}
			if !slices.Equal(rep.GetDataList(), hello.DataList()) {
				return fmt.Errorf("reply data list has %d items, not Item 0..Item %d", len(rep.GetDataList()), hello.BigItems-1)
			}
			return nil
		}
	default:
		return nil, fmt.Errorf("operation %s is not supported by loadgen (supported: %v)", operation, Operations())
	}
	return w, nil
}

// restRoute is the first google.api.http rule of the operation.
func (w *workload) restRoute() (method, path string, err error) {
	if len(w.op.HTTPRules) == 0 {
		return "", "", fmt.Errorf("operation %s has no google.api.http rule", w.op.Name)
	}
	r := w.op.HTTPRules[0]
	for _, c := range r.Pattern {
		if c == '{' || c == '*' {
			return "", "", fmt.Errorf("operation %s: path template %q has variables (unsupported)", w.op.Name, r.Pattern)
		}
	}
	return r.Method, r.Pattern, nil
}
