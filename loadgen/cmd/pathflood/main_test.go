package main

import (
	"strings"
	"testing"
)

func TestPlanMakesDistinctPathsOfBothKinds(t *testing.T) {
	cfg, err := parseFlags([]string{"-target", "127.0.0.1:1", "-calls", "1000", "-grpc-share", "0.3", "-long-path-bytes", "8192", "-seed", "7"})
	if err != nil {
		t.Fatal(err)
	}
	rest, grpc := plan(cfg)
	if len(rest) != 700 || len(grpc) != 300 {
		t.Fatalf("%d REST and %d gRPC calls, want 700 and 300", len(rest), len(grpc))
	}
	seen := map[string]bool{}
	long := 0
	for _, c := range append(rest, grpc...) {
		if seen[c.path] {
			t.Fatalf("path %q planned twice", c.path)
		}
		seen[c.path] = true
		if len(c.path) == 8192 {
			long++
		}
		if c.grpc != strings.HasPrefix(c.path, "/x.Y/") {
			t.Errorf("gRPC %v with path %.40q", c.grpc, c.path)
		}
	}
	if long != 2 {
		t.Errorf("%d paths of 8192 bytes, want one of each kind", long)
	}
}

func TestBadFlagsAreNamed(t *testing.T) {
	for args, want := range map[string]string{
		"-calls 5":                        "-target: required",
		"-target h:1 -calls 0":            "-calls: must be at least 1",
		"-target h:1 -grpc-share 2":       "-grpc-share: must be in [0, 1]",
		"-target h:1 -long-path-bytes -1": "-long-path-bytes: must be in",
	} {
		_, err := parseFlags(strings.Fields(args))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", args, err, want)
		}
	}
}
