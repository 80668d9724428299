// Command grpcgzip is test_compression.py's grpc-go client: each argument
// KIND=TRACEPARENT makes one call, on a connection of its own, with grpc-go's
// gzip compressor (google.golang.org/grpc/encoding/gzip; grpc-encoding: gzip,
// every request message compressed), and prints one JSON line per call:
// {"kind":..., "code":..., "replies":...}. KIND is "hello" (Hello.SayHello,
// unary) or "stream" (Echo.ServerStream, -replies messages back).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	wirelensv1 "github.com/wirelens/wirelens/services/gen/wirelens/v1"
)

func main() {
	target := flag.String("target", "", "host:port of Envoy")
	run := flag.String("run", "", "x-wirelens-run")
	name := flag.String("name", "gzip", "the name (hello) or the content (stream) sent")
	replies := flag.Int("replies", 3, "messages Echo.ServerStream answers")
	flag.Parse()
	out := json.NewEncoder(os.Stdout)
	for _, arg := range flag.Args() {
		kind, tp, ok := strings.Cut(arg, "=")
		if !ok {
			fmt.Fprintf(os.Stderr, "grpcgzip: argument %q is not KIND=TRACEPARENT\n", arg)
			os.Exit(2)
		}
		n, err := call(*target, kind, *name, int32(*replies), metadata.Pairs("x-wirelens-run", *run, "traceparent", tp))
		_ = out.Encode(map[string]any{"kind": kind, "code": status.Code(err).String(), "replies": n,
			"error": fmt.Sprint(err)})
	}
}

func call(target, kind, name string, replies int32, md metadata.MD) (int, error) {
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.UseCompressor(gzip.Name)))
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(metadata.NewOutgoingContext(context.Background(), md), 20*time.Second)
	defer cancel()
	switch kind {
	case "hello":
		if _, err := wirelensv1.NewHelloClient(conn).SayHello(ctx, &wirelensv1.HelloRequest{Name: name}); err != nil {
			return 0, err
		}
		return 1, nil
	case "stream":
		s, err := wirelensv1.NewEchoClient(conn).ServerStream(ctx,
			&wirelensv1.EchoStreamRequest{Content: name, Count: replies})
		if err != nil {
			return 0, err
		}
		n := 0
		for {
			if _, err := s.Recv(); err == io.EOF {
				return n, nil
			} else if err != nil {
				return n, err
			}
			n++
		}
	}
	return 0, fmt.Errorf("unknown kind %q", kind)
}
