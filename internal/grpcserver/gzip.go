package grpcserver

// Registering grpc-go's gzip codec lets the gRPC servers take requests sent
// with grpc-encoding: gzip (compressed messages, flag byte 1) and answer them
// compressed the same way, as grpc-go does for a registered encoding the
// client used; without it such calls fail with UNIMPLEMENTED. A client that
// sends no grpc-encoding still gets uncompressed answers.
import _ "google.golang.org/grpc/encoding/gzip"
