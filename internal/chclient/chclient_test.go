package chclient

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/wirelens/wirelens/internal/cli"
)

func TestQueryParamsAuthAndErrors(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		user, pw, _ := r.BasicAuth()
		switch {
		case strings.HasPrefix(string(body), "INSERT INTO t FORMAT JSONEachRow\n"):
			if r.URL.Query().Get("date_time_input_format") != "best_effort" || string(body) != "INSERT INTO t FORMAT JSONEachRow\n{\"a\":1}\n{\"a\":2}\n" {
				http.Error(w, "bad insert "+string(body), 400)
			}
		case string(body) == "SELECT {x:String}" && r.URL.Query().Get("param_x") == "it's" && user == "u" && pw == "p w":
			_, _ = io.WriteString(w, "ok\n")
		default:
			http.Error(w, "Code: 62. DB::Exception: Syntax error", 400)
		}
	}))
	defer ts.Close()
	c, err := New(strings.Replace(ts.URL, "http://", "http://u:p%20w@", 1), 0)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(c.String(), "p%20w") {
		t.Fatalf("String() leaks the password: %s", c)
	}
	ctx := context.Background()
	if out, err := c.Query(ctx, "SELECT {x:String}", map[string]string{"x": "it's"}); err != nil || string(out) != "ok\n" {
		t.Fatalf("query: %q %v", out, err)
	}
	if err := c.InsertJSON(ctx, "t", map[string]int{"a": 1}, map[string]int{"a": 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Query(ctx, "SELEC", nil); !IsRefused(err) || !strings.Contains(err.Error(), "Syntax error") {
		t.Fatalf("refused: %v", err)
	}
	ts.Close()
	_, err = c.Query(ctx, "SELECT 1", nil)
	var unreachable *cli.UnreachableError
	if !errors.As(err, &unreachable) || IsRefused(err) {
		t.Fatalf("unreachable: %v", err)
	}
	if want := "ClickHouse is not reachable at " + ts.URL; !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "p w") {
		t.Errorf("unreachable: %q, want it to start %q without the password", err, want)
	}
	for _, bad := range []string{"ftp://x", "http://"} {
		if _, err := New(bad, 0); err == nil {
			t.Errorf("New(%q) accepted", bad)
		}
	}
}

func TestWithLogin(t *testing.T) {
	for _, tc := range []struct{ endpoint, user, password, want string }{
		{"http://127.0.0.1:8123", "", "", "http://127.0.0.1:8123"},
		{"http://a:b@127.0.0.1:8123", "", "", "http://a:b@127.0.0.1:8123"},
		{"127.0.0.1:8123", "wirelens_reader", "p w/:@", "http://wirelens_reader:p%20w%2F%3A%40@127.0.0.1:8123"},
		{"http://a:b@127.0.0.1:8123", "r", "s", "http://r:s@127.0.0.1:8123"},
	} {
		got, err := WithLogin(tc.endpoint, tc.user, tc.password)
		if err != nil || got != tc.want {
			t.Errorf("WithLogin(%q, %q, %q) = %q, %v; want %q", tc.endpoint, tc.user, tc.password, got, err, tc.want)
		}
		if tc.user == "" {
			continue
		}
		c, err := New(got, 0)
		if err != nil {
			t.Fatal(err)
		}
		if pw, _ := c.base.User.Password(); c.base.User.Username() != tc.user || pw != tc.password {
			t.Errorf("New(%q) logs in as %q/%q, want %q/%q", got, c.base.User.Username(), pw, tc.user, tc.password)
		}
	}
	if _, err := WithLogin("http://[::1", "u", "p"); err == nil {
		t.Error("WithLogin accepted a broken URL")
	}
}
