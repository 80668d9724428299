package harness_test

// istio-agent's Wasm pull (serve --agent-wasm-cache): the committed
// WasmPlugin, pointed at an OCI image in a real registry on loopback
// (go-containerregistry's pkg/registry), goes through istiod's ECDS
// generation and the agent's own conversion (istio pkg/wasm) on the real ADS
// stream the harness serves; the ECDS resource a proxy receives must name a
// local file holding exactly the module's bytes. A wrong sha256 must not
// load anything (the agent's allow-all fallback for FAIL_OPEN).

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rbacfilter "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	wasmfilter "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/wasm/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/wirelens/wirelens/tools/istiod-harness/harness"
	extensions "istio.io/api/extensions/v1alpha1"
	v3 "istio.io/istio/pilot/pkg/xds/v3"
	"istio.io/istio/pkg/config/schema/gvk"
)

// A small valid WebAssembly module (magic, version, one custom section), so
// that the bytes are recognizably this test's.
var testModule = append([]byte("\x00asm\x01\x00\x00\x00\x00\x0b\x0awirelens-t"), 'x')

// pushCompatImage pushes the module as the "compat" Wasm image Istio's
// fetcher reads (OCI manifest, one tar+gzip layer holding plugin.wasm) and
// returns its manifest digest.
func pushCompatImage(t *testing.T, ref string, module []byte, opts ...remote.Option) string {
	t.Helper()
	var layerBytes bytes.Buffer
	gz := gzip.NewWriter(&layerBytes)
	tw := tar.NewWriter(gz)
	if err := tw.WriteHeader(&tar.Header{Name: "plugin.wasm", Mode: 0o644, Size: int64(len(module)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	_, _ = tw.Write(module)
	_ = tw.Close()
	_ = gz.Close()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes.Bytes())), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		t.Fatal(err)
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.AppendLayers(img, layer)
	if err != nil {
		t.Fatal(err)
	}
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img, opts...); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.Hex
}

// ecdsOverADS asks the harness's ADS socket, as a router proxy with the
// harness's bootstrap metadata, for the wirelens ECDS resource.
func ecdsOverADS(t *testing.T, addr string) *core.TypedExtensionConfig {
	t.Helper()
	o := harness.BootstrapOptions{XDS: addr, NodeType: "router", Namespace: "istio-system", Name: "gw-0",
		Labels: map[string]string{"istio": "ingressgateway"}}
	mdJSON, _ := json.Marshal(o.NodeMetadata())
	var md map[string]any
	_ = json.Unmarshal(mdJSON, &md)
	st, err := structpb.NewStruct(md)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	stream, err := discovery.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&discovery.DiscoveryRequest{
		Node:          &core.Node{Id: o.NodeID(), Cluster: "gw.istio-system", Metadata: st},
		TypeUrl:       v3.ExtensionConfigurationType,
		ResourceNames: []string{wirelensECDS},
	}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatalf("no ECDS response within the deadline: %v", err)
	}
	if resp.TypeUrl != v3.ExtensionConfigurationType || len(resp.Resources) != 1 {
		t.Fatalf("ECDS response: type %s, %d resources", resp.TypeUrl, len(resp.Resources))
	}
	ec := &core.TypedExtensionConfig{}
	if err := resp.Resources[0].UnmarshalTo(ec); err != nil {
		t.Fatal(err)
	}
	return ec
}

// startWithImage runs the harness over the committed WasmPlugin whose url and
// sha256 point at ref and sha.
func startWithImage(t *testing.T, url, sha, cacheDir string, insecureRegistries ...string) *harness.Server {
	t.Helper()
	l, err := harness.LoadFiles(filepath.Join(inputDir(t), "wasmplugin.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range l.Configs {
		if c.GroupVersionKind == gvk.WasmPlugin {
			s := c.Spec.(*extensions.WasmPlugin)
			s.Url, s.Sha256 = url, sha
			l.Configs[i] = c
		}
	}
	srv, err := harness.Start(harness.Options{Loaded: l, XDS: "127.0.0.1:0",
		AgentWasm: &harness.AgentWasmOptions{CacheDir: cacheDir, InsecureRegistries: insecureRegistries}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}

func TestAgentPullsTheModuleByDigest(t *testing.T) {
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer reg.Close()
	host := strings.TrimPrefix(reg.URL, "http://")
	digest := pushCompatImage(t, host+"/wirelens/wirelens-filter:test", testModule)
	url := "oci://" + host + "/wirelens/wirelens-filter@sha256:" + digest
	cache := t.TempDir()

	srv := startWithImage(t, url, digest, cache)
	ec := ecdsOverADS(t, srv.XDS.String())
	wf := &wasmfilter.Wasm{}
	if err := ec.GetTypedConfig().UnmarshalTo(wf); err != nil {
		t.Fatalf("ECDS resource is %s, not Wasm: the pull failed? (%v)", ec.GetTypedConfig().GetTypeUrl(), err)
	}
	vm := wf.GetConfig().GetVmConfig()
	file := vm.GetCode().GetLocal().GetFilename()
	if file == "" {
		t.Fatalf("code %v: want a local file (the agent's rewrite of the remote %s)", vm.GetCode(), url)
	}
	if !strings.HasPrefix(file, cache+string(os.PathSeparator)) || !strings.HasSuffix(file, digest+".wasm") {
		t.Errorf("module file %s: want DIR/…/%s.wasm under %s", file, digest, cache)
	}
	got, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, testModule) {
		t.Errorf("the pulled file holds %d bytes, not the module pushed (%d bytes)", len(got), len(testModule))
	}
	for k := range vm.GetEnvironmentVariables().GetKeyValues() {
		if strings.HasPrefix(k, "ISTIO_META_") {
			t.Errorf("agent-internal env %s left in the VM config", k)
		}
	}
	if wf.GetConfig().GetRootId() != "wirelens" {
		t.Errorf("root_id %q", wf.GetConfig().GetRootId())
	}
}

func TestAgentRefusesAModuleWithAnotherDigest(t *testing.T) {
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer reg.Close()
	host := strings.TrimPrefix(reg.URL, "http://")
	digest := pushCompatImage(t, host+"/wirelens/wirelens-filter:test", testModule)
	wrong := strings.Repeat("0", 64)
	url := "oci://" + host + "/wirelens/wirelens-filter@sha256:" + digest

	srv := startWithImage(t, url, wrong, t.TempDir())
	ec := ecdsOverADS(t, srv.XDS.String())
	rb := &rbacfilter.RBAC{}
	if err := ec.GetTypedConfig().UnmarshalTo(rb); err != nil {
		t.Fatalf("ECDS resource is %s: want the agent's RBAC fallback for a checksum mismatch", ec.GetTypedConfig().GetTypeUrl())
	}
	if rb.GetRulesStatPrefix() != "wasm-default-allow" || rb.GetRules() != nil {
		t.Errorf("fallback %v: want allow-all (FAIL_OPEN)", rb)
	}
}

// A registry with TLS the agent cannot verify (a self-signed certificate):
// refused unless it is among the insecure registries (the agent's
// WASM_INSECURE_REGISTRIES, serve --insecure-registries).
func TestAgentInsecureRegistries(t *testing.T) {
	reg := httptest.NewTLSServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer reg.Close()
	host := strings.TrimPrefix(reg.URL, "https://")
	digest := pushCompatImage(t, host+"/wirelens/wirelens-filter:test", testModule, remote.WithTransport(reg.Client().Transport))
	url := "oci://" + host + "/wirelens/wirelens-filter@sha256:" + digest

	refused := ecdsOverADS(t, startWithImage(t, url, digest, t.TempDir()).XDS.String())
	if refused.GetTypedConfig().GetTypeUrl() != "type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC" {
		t.Errorf("unverifiable TLS registry, not insecure: ECDS %s, want the agent's RBAC fallback", refused.GetTypedConfig().GetTypeUrl())
	}
	pulled := ecdsOverADS(t, startWithImage(t, url, digest, t.TempDir(), host).XDS.String())
	wf := &wasmfilter.Wasm{}
	if err := pulled.GetTypedConfig().UnmarshalTo(wf); err != nil || wf.GetConfig().GetVmConfig().GetCode().GetLocal() == nil {
		t.Errorf("--insecure-registries %s: ECDS %s, want the pulled module as a local file", host, pulled.GetTypedConfig().GetTypeUrl())
	}
}
