package cli

import "testing"

func TestEnvOr(t *testing.T) {
	t.Setenv("WIRELENS_TEST_ENVOR", "")
	if got := EnvOr("WIRELENS_TEST_ENVOR", "def"); got != "def" {
		t.Fatalf("unset: %q", got)
	}
	t.Setenv("WIRELENS_TEST_ENVOR", "set")
	if got := EnvOr("WIRELENS_TEST_ENVOR", "def"); got != "set" {
		t.Fatalf("set: %q", got)
	}
}
