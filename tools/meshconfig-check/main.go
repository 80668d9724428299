// meshconfig-check: a strict check of Istio mesh config, which is not a
// Kubernetes resource (it lives in the ConfigMap istio-system/istio, key
// `mesh`) and so has no CRD schema for kubeconform.
//
//	meshconfig-check [-key meshConfig] FILE...
//
// Each FILE is YAML. With -key (default "meshConfig", the istiod Helm values
// and IstioOperator spec form) the mesh config is that top-level key; with
// -key "" the whole document is the mesh config (the ConfigMap's `mesh` form).
// It is converted to JSON and unmarshalled into istio.io/api's MeshConfig with
// protojson, unknown fields rejected: a misspelt field, a wrong type or an
// unknown enum value is an error naming it. Then every extension provider
// must have a name, one provider type, and the service and port the OTel
// access-log and tracing providers need.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
	meshconfig "istio.io/api/mesh/v1alpha1"
	"sigs.k8s.io/yaml"
)

// Check parses one mesh-config document strictly and returns it.
func Check(data []byte, key string) (*meshconfig.MeshConfig, error) {
	body := data
	if key != "" {
		var doc map[string]any
		if err := yaml.UnmarshalStrict(data, &doc); err != nil {
			return nil, fmt.Errorf("not YAML: %w", err)
		}
		section, ok := doc[key]
		if !ok {
			return nil, fmt.Errorf("no top-level %q", key)
		}
		var err error
		if body, err = yaml.Marshal(section); err != nil {
			return nil, err
		}
	}
	jsonBody, err := yaml.YAMLToJSONStrict(body)
	if err != nil {
		return nil, fmt.Errorf("not YAML: %w", err)
	}
	mesh := &meshconfig.MeshConfig{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: false}).Unmarshal(jsonBody, mesh); err != nil {
		return nil, fmt.Errorf("not an istio.mesh.v1alpha1.MeshConfig: %w", err)
	}
	return mesh, checkProviders(mesh)
}

func checkProviders(mesh *meshconfig.MeshConfig) error {
	var errs []error
	seen := map[string]bool{}
	for i, p := range mesh.GetExtensionProviders() {
		where := fmt.Sprintf("extensionProviders[%d] (%s)", i, p.GetName())
		if p.GetName() == "" {
			errs = append(errs, fmt.Errorf("extensionProviders[%d]: no name", i))
		}
		if seen[p.GetName()] {
			errs = append(errs, fmt.Errorf("%s: name used twice", where))
		}
		seen[p.GetName()] = true
		switch provider := p.GetProvider().(type) {
		case nil:
			errs = append(errs, fmt.Errorf("%s: no provider type", where))
		case *meshconfig.MeshConfig_ExtensionProvider_EnvoyOtelAls:
			if provider.EnvoyOtelAls.GetService() == "" || provider.EnvoyOtelAls.GetPort() == 0 {
				errs = append(errs, fmt.Errorf("%s: envoyOtelAls needs service and port", where))
			}
			for name, value := range provider.EnvoyOtelAls.GetLogFormat().GetLabels().GetFields() {
				// Istio turns each label into a string attribute (GetStringValue):
				// anything but a string would arrive empty.
				if _, ok := value.GetKind().(*structpb.Value_StringValue); !ok || value.GetStringValue() == "" {
					errs = append(errs, fmt.Errorf("%s: logFormat.labels[%q] must be a non-empty format string", where, name))
				}
			}
		case *meshconfig.MeshConfig_ExtensionProvider_Opentelemetry:
			if provider.Opentelemetry.GetService() == "" || provider.Opentelemetry.GetPort() == 0 {
				errs = append(errs, fmt.Errorf("%s: opentelemetry needs service and port", where))
			}
		}
	}
	return errors.Join(errs...)
}

func main() {
	key := flag.String("key", "meshConfig", `top-level key holding the mesh config ("" = the whole document)`)
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: meshconfig-check [-key meshConfig] FILE...")
		os.Exit(2)
	}
	failed := false
	for _, file := range flag.Args() {
		data, err := os.ReadFile(file)
		if err == nil {
			var mesh *meshconfig.MeshConfig
			if mesh, err = Check(data, *key); err == nil {
				names := []string{}
				for _, p := range mesh.GetExtensionProviders() {
					names = append(names, p.GetName())
				}
				fmt.Printf("%s: valid MeshConfig (istio.io/api), extension providers %v\n", file, names)
				continue
			}
		}
		failed = true
		fmt.Fprintf(os.Stderr, "%s: %v\n", file, err)
	}
	if failed {
		os.Exit(1)
	}
}
