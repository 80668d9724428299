// Package parity holds only tests: they run the REST and the gRPC servers
// in-process on free ports and check that every unary operation gives the
// same logical answer over REST JSON, REST protobuf and gRPC, and that the
// message sizes are those the experiments describe.
package parity
