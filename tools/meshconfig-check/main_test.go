package main

import (
	"os"
	"strings"
	"testing"
)

// The mesh config the project ships passes.
func TestShippedMeshConfig(t *testing.T) {
	data, err := os.ReadFile("../../deploy/istio/mesh-config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	mesh, err := Check(data, "meshConfig")
	if err != nil {
		t.Fatalf("deploy/istio/mesh-config.yaml: %v", err)
	}
	if n := len(mesh.GetExtensionProviders()); n != 2 {
		t.Fatalf("want 2 extension providers, got %d", n)
	}
	if labels := mesh.GetExtensionProviders()[0].GetEnvoyOtelAls().GetLogFormat().GetLabels().GetFields(); labels["wirelens.record"].GetStringValue() == "" {
		t.Fatalf("envoyOtelAls carries no wirelens.record label: %v", labels)
	}
}

const good = `
meshConfig:
  extensionProviders:
  - name: als
    envoyOtelAls:
      service: otel-collector.wirelens.svc.cluster.local
      port: 4317
      logFormat:
        labels:
          a: "%RESPONSE_CODE%"
  - name: tracing
    opentelemetry:
      service: otel-collector.wirelens.svc.cluster.local
      port: 4317
`

// Each broken variant fails, and the error names what is wrong.
func TestRejects(t *testing.T) {
	if _, err := Check([]byte(good), "meshConfig"); err != nil {
		t.Fatalf("the good document fails: %v", err)
	}
	cases := []struct{ name, old, new, want string }{
		{"unknown field", "logFormat:", "logFormats:", "logFormats"},
		{"misspelt provider type", "envoyOtelAls:", "envoyOtelAlss:", "envoyOtelAlss"},
		{"wrong type", "port: 4317\n      logFormat", "port: four\n      logFormat", "port"},
		{"number label", `a: "%RESPONSE_CODE%"`, "a: 200", `labels["a"]`},
		{"no service", "      service: otel-collector.wirelens.svc.cluster.local\n      port: 4317\n      logFormat", "      port: 4317\n      logFormat", "needs service and port"},
		{"duplicate name", "name: tracing", "name: als", "name used twice"},
		{"duplicate key", "      port: 4317\n      logFormat", "      port: 4317\n      port: 4318\n      logFormat", "port"},
	}
	for _, c := range cases {
		doc := strings.Replace(good, c.old, c.new, 1)
		if doc == good {
			t.Fatalf("%s: the replacement did not apply", c.name)
		}
		_, err := Check([]byte(doc), "meshConfig")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: want an error naming %q, got %v", c.name, c.want, err)
		}
	}
}

// -key "" reads the whole document (the ConfigMap's `mesh` form).
func TestWholeDocument(t *testing.T) {
	doc := strings.Replace(strings.Replace(good, "meshConfig:\n", "", 1), "\n  ", "\n", -1)
	if _, err := Check([]byte(doc), ""); err != nil {
		t.Fatalf("whole-document form: %v", err)
	}
}
