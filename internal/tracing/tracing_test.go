package tracing

import (
	"context"
	"net/http"
	"testing"
)

func TestWanted(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want bool
		err  bool
	}{
		{map[string]string{}, false, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317"}, true, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4317"}, true, false},
		{map[string]string{SwitchEnv: "off", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317"}, false, false},
		{map[string]string{SwitchEnv: "on"}, true, false},
		{map[string]string{SwitchEnv: "yes"}, false, true},
	} {
		got, err := Wanted(func(k string) string { return c.env[k] })
		if got != c.want || (err != nil) != c.err {
			t.Errorf("Wanted(%v) = %v, %v; want %v, error %v", c.env, got, err, c.want, c.err)
		}
	}
}

func TestOffInstallsNothing(t *testing.T) {
	t.Setenv(SwitchEnv, "off")
	tr, err := Setup(context.Background(), "x")
	if err != nil || tr.Enabled || tr.Provider != nil {
		t.Fatalf("Setup with %s=off: %+v, %v", SwitchEnv, tr, err)
	}
	h := http.NotFoundHandler()
	if got := tr.HTTPHandler(h, "x"); got == nil || len(tr.GRPCServerOptions()) != 0 {
		t.Fatalf("off: handler %v, options %d", got, len(tr.GRPCServerOptions()))
	}
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestOnNamesTheService(t *testing.T) {
	t.Setenv(SwitchEnv, "on")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1") // never reached: no span is ended
	t.Setenv("OTEL_SERVICE_NAME", "from-env")
	tr, err := Setup(context.Background(), "default-name")
	if err != nil || !tr.Enabled || tr.Service != "from-env" || len(tr.GRPCServerOptions()) != 1 {
		t.Fatalf("Setup: %+v, %v", tr, err)
	}
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	if _, err := Setup(context.Background(), "x"); err == nil {
		t.Fatal("http/protobuf accepted; only grpc is built in")
	}
}
