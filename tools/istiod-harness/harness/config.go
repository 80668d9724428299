// Package harness runs istiod's own config generation (istio.io/istio
// pilot/test/xds FakeDiscoveryServer: the real translation, an in-memory
// Kubernetes client, no cluster) over configuration read from files, and
// serves it to a real Envoy over ADS.
package harness

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	meshconfig "istio.io/api/mesh/v1alpha1"
	"istio.io/istio/pilot/pkg/config/kube/crd"
	"istio.io/istio/pkg/config"
	"istio.io/istio/pkg/config/mesh"
	"istio.io/istio/pkg/config/schema/collections"
	kubelib "istio.io/istio/pkg/kube"
	"istio.io/istio/pkg/util/protomarshal"
)

// Loaded is what a config directory holds: Istio (and Gateway API) configs,
// which go into istiod's config store, and the Kubernetes objects
// (Namespaces, Pods, Services, ...) that go into the fake kube client.
type Loaded struct {
	Configs     []config.Config
	KubeObjects []runtime.Object
	// Source maps a config's key (see Key) to "file#doc" for messages.
	Source map[string]string
}

// Key identifies a config in the store.
func Key(c config.Config) string {
	return c.GroupVersionKind.String() + "/" + c.Namespace + "/" + c.Name
}

var docSeparator = regexp.MustCompile(`(?m)^---\s*$`)

// LoadDir reads every *.yaml / *.yml file of dir (not recursive), in name
// order. Each document is either an Istio / Gateway API resource (parsed and
// validated by istiod's own schema code, as its admission webhook would) or a
// Kubernetes object the fake kube client understands. Anything else is an
// error naming the file and the document.
func LoadDir(dir string) (*Loaded, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("--config-dir %s: %v", dir, err)
	}
	var files []string
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || strings.HasPrefix(n, ".") {
			continue
		}
		if strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml") {
			files = append(files, filepath.Join(dir, n))
		}
	}
	sort.Strings(files)
	out := &Loaded{Source: map[string]string{}}
	for _, f := range files {
		if err := out.addFile(f); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// LoadFiles reads the given files (same rules as LoadDir).
func LoadFiles(files ...string) (*Loaded, error) {
	out := &Loaded{Source: map[string]string{}}
	for _, f := range files {
		if err := out.addFile(f); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// AddYAML adds the documents of one YAML text (name is used in messages).
func (l *Loaded) AddYAML(name, text string) error {
	for i, doc := range docSeparator.Split(text, -1) {
		if strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		where := fmt.Sprintf("%s (document %d)", name, i+1)
		if err := strictCheck(doc); err != nil {
			return fmt.Errorf("%s: %v", where, err)
		}
		cfgs, others, err := crd.ParseInputs(doc)
		if err != nil {
			return fmt.Errorf("%s: %v", where, err)
		}
		for _, c := range cfgs {
			if c.Namespace == "" {
				if s, ok := collections.PilotGatewayAPI().FindByGroupVersionAliasesKind(c.GroupVersionKind); ok && !s.IsClusterScoped() {
					c.Namespace = "default"
				}
			}
			k := Key(c)
			if prev, dup := l.Source[k]; dup {
				return fmt.Errorf("%s: %s %s/%s is already defined in %s", where, c.GroupVersionKind.Kind, c.Namespace, c.Name, prev)
			}
			l.Source[k] = where
			l.Configs = append(l.Configs, c)
		}
		if len(others) == 0 {
			continue
		}
		obj, _, err := kubelib.IstioCodec.UniversalDeserializer().Decode([]byte(doc), nil, nil)
		if err != nil {
			return fmt.Errorf("%s: kind %q (apiVersion %q) is neither an Istio/Gateway API resource nor a Kubernetes object the fake client knows: %v",
				where, others[0].Kind, others[0].APIVersion, err)
		}
		l.KubeObjects = append(l.KubeObjects, obj)
	}
	return nil
}

func (l *Loaded) addFile(f string) error {
	b, err := os.ReadFile(f)
	if err != nil {
		return err
	}
	return l.AddYAML(f, string(b))
}

// strictCheck refuses what istiod's lenient decoding would drop silently
// and the Kubernetes API server (strict field validation) would refuse: an
// unknown top-level key or an unknown field in an Istio resource's spec.
func strictCheck(doc string) error {
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
		return err
	}
	for k := range obj {
		switch k {
		case "apiVersion", "kind", "metadata", "spec", "status":
		default:
			return fmt.Errorf("%v %v: unknown top-level field %q", obj["kind"], get(obj, "metadata", "name"), k)
		}
	}
	apiVersion, _ := obj["apiVersion"].(string)
	group, version, ok := strings.Cut(apiVersion, "/")
	if !ok {
		return nil
	}
	kind, _ := obj["kind"].(string)
	s, found := collections.PilotGatewayAPI().FindByGroupVersionAliasesKind(config.GroupVersionKind{Group: group, Version: version, Kind: kind})
	if !found || obj["spec"] == nil {
		return nil
	}
	inst, err := s.NewInstance()
	if err != nil {
		return nil
	}
	pm, isProto := inst.(proto.Message)
	if !isProto {
		return nil
	}
	js, err := json.Marshal(obj["spec"])
	if err != nil {
		return err
	}
	if err := protomarshal.ApplyJSONStrict(string(js), pm); err != nil {
		return fmt.Errorf("%s %v: spec: %v", kind, get(obj, "metadata", "name"), err)
	}
	return nil
}

func get(m any, path ...string) any {
	for _, p := range path {
		mm, ok := m.(map[string]any)
		if !ok {
			return nil
		}
		m = mm[p]
	}
	return m
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		b.WriteString(line)
		b.WriteString("\n")
	}
	return b.String()
}

// LoadMeshConfig reads a mesh config file in either form the project uses:
// the istiod Helm chart's values (a top-level `meshConfig:` key, as
// deploy/istio/mesh-config.yaml) or a plain MeshConfig (the `mesh` key of the
// `istio` ConfigMap). It is applied over istiod's defaults with istiod's own
// code (mesh.ApplyMeshConfigDefaults: unknown fields are errors, then
// istio's mesh validation). An empty path gives the defaults.
func LoadMeshConfig(path string) (*meshconfig.MeshConfig, error) {
	if path == "" {
		return mesh.DefaultMeshConfig(), nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--mesh-config: %v", err)
	}
	return ParseMeshConfig(path, b)
}

// ParseMeshConfig is LoadMeshConfig on bytes (name for messages).
func ParseMeshConfig(name string, b []byte) (*meshconfig.MeshConfig, error) {
	var top map[string]any
	if err := yaml.Unmarshal(b, &top); err != nil {
		return nil, fmt.Errorf("mesh config %s: %v", name, err)
	}
	text := string(b)
	if mc, ok := top["meshConfig"]; ok {
		if len(top) != 1 {
			return nil, fmt.Errorf("mesh config %s: Helm-values form must hold only `meshConfig:` (found %d top-level keys)", name, len(top))
		}
		inner, err := yaml.Marshal(mc)
		if err != nil {
			return nil, fmt.Errorf("mesh config %s: meshConfig: %v", name, err)
		}
		text = string(inner)
	}
	// istiod decodes the mesh config leniently (an unknown field is dropped);
	// the harness refuses it, naming it, as tools/meshconfig-check does.
	if err := protomarshal.ApplyYAMLStrict(text, &meshconfig.MeshConfig{}); err != nil {
		return nil, fmt.Errorf("mesh config %s: %v", name, err)
	}
	m, err := mesh.ApplyMeshConfigDefaults(text)
	if err != nil {
		return nil, fmt.Errorf("mesh config %s: %v", name, err)
	}
	return m, nil
}
