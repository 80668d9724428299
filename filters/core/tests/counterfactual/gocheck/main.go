// Command gocheck checks vectors.json against Go's protobuf runtime
// (google.golang.org/protobuf, the version go.mod pins): for every case,
// proto.Unmarshal of "binary" and protojson.Marshal print "json" (after
// json.Compact: protojson adds random spaces on purpose), protojson.Unmarshal
// of "json" gives a message of proto_size bytes that prints the same JSON
// again, and the sizes are as recorded; every mismatch case fails to decode.
// (The bytes themselves may differ from "binary": Go writes a oneof after the
// other fields and orders map entries its own way, and NaN payloads differ;
// the sizes do not.)
//
// Usage, from the repository root:
//
//	go run ./filters/core/tests/counterfactual/gocheck [VECTORS]
package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

type vectorCase struct {
	Name          string  `json:"name"`
	Type          string  `json:"type"`
	Binary        *string `json:"binary"`
	JSON          *string `json:"json"`
	ProtoSize     int     `json:"proto_size"`
	JSONSize      int     `json:"json_size"`
	JSONInvalid   *string `json:"json_invalid"`
	BinaryInvalid *string `json:"binary_invalid"`
}

type vectors struct {
	DescriptorSet string       `json:"descriptor_set"`
	Cases         []vectorCase `json:"cases"`
}

func main() {
	path := "filters/core/tests/counterfactual/vectors.json"
	if len(os.Args) > 1 {
		path = os.Args[1]
	}
	failures, err := check(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gocheck:", err)
		os.Exit(1)
	}
	for _, f := range failures {
		fmt.Fprintln(os.Stderr, "gocheck:", f)
	}
	if len(failures) > 0 {
		fmt.Fprintf(os.Stderr, "gocheck: %d case(s) differ from Go's protojson\n", len(failures))
		os.Exit(1)
	}
}

func check(path string) ([]string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var v vectors
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	setBytes, err := base64.StdEncoding.DecodeString(v.DescriptorSet)
	if err != nil {
		return nil, fmt.Errorf("descriptor_set: %w", err)
	}
	var set descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(setBytes, &set); err != nil {
		return nil, fmt.Errorf("descriptor_set: %w", err)
	}
	files, err := protodesc.NewFiles(&set)
	if err != nil {
		return nil, fmt.Errorf("descriptor_set: %w", err)
	}
	var failures []string
	valid, invalid := 0, 0
	for _, c := range v.Cases {
		d, err := files.FindDescriptorByName(protoreflect.FullName(c.Type))
		if err != nil {
			failures = append(failures, fmt.Sprintf("%s: type %s: %v", c.Name, c.Type, err))
			continue
		}
		md, ok := d.(protoreflect.MessageDescriptor)
		if !ok {
			failures = append(failures, fmt.Sprintf("%s: %s is not a message", c.Name, c.Type))
			continue
		}
		switch {
		case c.Binary != nil && c.JSON != nil:
			valid++
			for _, problem := range checkValid(md, c) {
				failures = append(failures, c.Name+": "+problem)
			}
		case c.JSONInvalid != nil:
			invalid++
			if err := protojson.Unmarshal([]byte(*c.JSONInvalid), dynamicpb.NewMessage(md)); err == nil {
				failures = append(failures, c.Name+": protojson accepts the invalid JSON")
			}
		case c.BinaryInvalid != nil:
			invalid++
			b, err := base64.StdEncoding.DecodeString(*c.BinaryInvalid)
			if err != nil {
				failures = append(failures, c.Name+": binary_invalid: "+err.Error())
			} else if err := proto.Unmarshal(b, dynamicpb.NewMessage(md)); err == nil {
				failures = append(failures, c.Name+": proto.Unmarshal accepts the invalid bytes")
			}
		default:
			failures = append(failures, c.Name+": neither a valid nor a mismatch case")
		}
	}
	fmt.Printf("gocheck: %d cases and %d mismatches checked against google.golang.org/protobuf\n", valid, invalid)
	return failures, nil
}

func checkValid(md protoreflect.MessageDescriptor, c vectorCase) []string {
	var problems []string
	bin, err := base64.StdEncoding.DecodeString(*c.Binary)
	if err != nil {
		return []string{"binary: " + err.Error()}
	}
	if len(bin) != c.ProtoSize {
		problems = append(problems, fmt.Sprintf("proto_size %d, binary has %d bytes", c.ProtoSize, len(bin)))
	}
	if n := len(*c.JSON); n != c.JSONSize {
		problems = append(problems, fmt.Sprintf("json_size %d, json has %d bytes", c.JSONSize, n))
	}
	// binary -> protojson
	m := dynamicpb.NewMessage(md)
	if err := proto.Unmarshal(bin, m); err != nil {
		return append(problems, "proto.Unmarshal: "+err.Error())
	}
	if n := proto.Size(m); n != c.ProtoSize {
		problems = append(problems, fmt.Sprintf("proto.Size %d, want %d", n, c.ProtoSize))
	}
	printed, err := protojson.Marshal(m)
	if err != nil {
		problems = append(problems, "protojson.Marshal: "+err.Error())
	} else {
		if compact, err := compactJSON(printed); err != nil {
			problems = append(problems, "json.Compact: "+err.Error())
		} else if compact != *c.JSON {
			problems = append(problems, fmt.Sprintf("protojson prints\n    %s\n  the vector holds\n    %s", compact, *c.JSON))
		}
	}

	// protojson -> binary
	back := dynamicpb.NewMessage(md)
	if err := protojson.Unmarshal([]byte(*c.JSON), back); err != nil {
		return append(problems, "protojson.Unmarshal: "+err.Error())
	}
	if n := proto.Size(back); n != c.ProtoSize {
		problems = append(problems, fmt.Sprintf("protojson.Unmarshal then proto.Size: %d, want %d", n, c.ProtoSize))
	}
	if again, err := protojson.Marshal(back); err != nil {
		problems = append(problems, "protojson.Marshal after protojson.Unmarshal: "+err.Error())
	} else if compact, err := compactJSON(again); err != nil || compact != *c.JSON {
		problems = append(problems, fmt.Sprintf("protojson round trip prints %s", compact))
	}
	return problems
}

// compactJSON drops the spaces protojson adds at random (internal/detrand).
func compactJSON(b []byte) (string, error) {
	var out bytes.Buffer
	err := json.Compact(&out, b)
	return out.String(), err
}
