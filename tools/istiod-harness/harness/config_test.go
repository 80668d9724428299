package harness_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wirelens/wirelens/tools/istiod-harness/harness"
)

// Bad input is refused with an error naming the file, the document and the field.
func TestLoadDirRefusesBadInputNamingIt(t *testing.T) {
	cases := map[string]struct{ yaml, want string }{
		"enum": {`apiVersion: extensions.istio.io/v1alpha1
kind: WasmPlugin
metadata: {name: ok, namespace: istio-system}
spec: {url: "file:///x.wasm", phase: AUTHN}
---
apiVersion: extensions.istio.io/v1alpha1
kind: WasmPlugin
metadata: {name: bad, namespace: istio-system}
spec: {url: "file:///x.wasm", phase: EARLY}
`, `(document 2): WasmPlugin bad: spec: unknown value "\"EARLY\"" for enum istio.extensions.v1alpha1.PluginPhase`},
		"unknown field": {`apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: s}
spec: {hosts: [a.example], resolution: STATIC, location: MESH_EXTERNAL, bogus: 1,
  ports: [{number: 80, name: http, protocol: HTTP}], endpoints: [{address: 1.2.3.4}]}
`, `(document 1): ServiceEntry s: spec: unknown field "bogus"`},
		"misspelled spec": {`apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: g}
sepc: {}
`, `unknown top-level field "sepc"`},
		"istiod validation": {`apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: g}
spec: {servers: [{port: {number: 80, name: http, protocol: HTTP}}]}
`, `configuration is invalid`},
		"unknown kind": {`apiVersion: v1
kind: Frobnicator
metadata: {name: f}
`, `kind "Frobnicator" (apiVersion "v1") is neither`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			f := filepath.Join(dir, "res.yaml")
			if err := os.WriteFile(f, []byte(c.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := harness.LoadDir(dir)
			if err == nil || !strings.Contains(err.Error(), f) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v: want it to name %s and say %q", err, f, c.want)
			}
		})
	}
}

func TestMeshConfigForms(t *testing.T) {
	helm, err := harness.ParseMeshConfig("helm", []byte("meshConfig:\n  extensionProviders:\n  - name: t\n    opentelemetry: {service: c.example, port: 4317}\n"))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := harness.ParseMeshConfig("plain", []byte("extensionProviders:\n- name: t\n  opentelemetry: {service: c.example, port: 4317}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(helm.ExtensionProviders) != len(plain.ExtensionProviders) || helm.ExtensionProviders[len(helm.ExtensionProviders)-1].Name != "t" {
		t.Errorf("Helm-values and plain forms differ: %v vs %v", helm.ExtensionProviders, plain.ExtensionProviders)
	}
	_, err = harness.ParseMeshConfig("bad.yaml", []byte("meshConfig:\n  extensionProviders:\n  - name: t\n    opentelemetry: {service: c.example, port: 4317, bogus: 1}\n"))
	if err == nil || !strings.Contains(err.Error(), "bad.yaml") || !strings.Contains(err.Error(), `unknown field "bogus"`) {
		t.Errorf("unknown mesh config field: error %v", err)
	}
}

func TestBootstrapRefusesBadFlags(t *testing.T) {
	ok := harness.BootstrapOptions{XDS: "127.0.0.1:15010", NodeType: "router", Namespace: "istio-system", Name: "gw-0"}
	if _, err := harness.Bootstrap(ok); err != nil {
		t.Fatal(err)
	}
	for flag, o := range map[string]harness.BootstrapOptions{
		"--xds":       {XDS: "127.0.0.1", NodeType: "router", Namespace: "n", Name: "p"},
		"--node-type": {XDS: "127.0.0.1:1", NodeType: "ingress", Namespace: "n", Name: "p"},
		"--namespace": {XDS: "127.0.0.1:1", NodeType: "router", Name: "p"},
		"--ip":        {XDS: "127.0.0.1:1", NodeType: "router", Namespace: "n", Name: "p", IP: "localhost"},
	} {
		if _, err := harness.Bootstrap(o); err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("%+v: error %v, want it to name %s", o, err, flag)
		}
	}
}
