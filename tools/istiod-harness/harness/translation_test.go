package harness_test

// Rung 1 of issue 31: the COMMITTED deploy/istio resources (wasmplugin.yaml,
// telemetry.yaml, mesh-config.yaml) go through istiod's own config
// generation, for a sidecar workload and an ingress gateway, and the Envoy
// config those proxies get is checked: where the wirelens filter is (ECDS
// entry on the HCMs its match mode selects), what precedes and follows it,
// what its ECDS resource carries, and the OpenTelemetry access log and tracer.
//
// What istiod is fed comes from WIRELENS_ISTIO_INPUT_DIR if set (to plant a
// fault in an edited copy), else from the repository's deploy/istio; what the
// Envoy config must carry always comes from the repository's files, plus fixed
// rules (phase AUTHN ahead of the filters listed in mustFollow, mode CLIENT:
// not on a sidecar's inbound side, FAIL_OPEN, 100 % sampling). Whether the
// committed files match the record's fields (envoy/wiring.py RECORD_FIELDS)
// is tests/unit/test_manifests.py's job (render.py --check).

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tracev3 "github.com/envoyproxy/go-control-plane/envoy/config/trace/v3"
	otelals "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/open_telemetry/v3"
	wasmfilter "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/wasm/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	wasmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/wasm/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/wrapperspb"
	"sigs.k8s.io/yaml"

	"github.com/wirelens/wirelens/tools/istiod-harness/harness"
	extensions "istio.io/api/extensions/v1alpha1"
	"istio.io/istio/pilot/pkg/model"
	"istio.io/istio/pkg/config/schema/gvk"
)

const (
	wirelensECDS  = "extensions.istio.io/trafficextension/istio-system.wirelens~istio-translated-wasmplugin"
	otherAuthn    = "extensions.istio.io/trafficextension/istio-system.other-authn~istio-translated-wasmplugin"
	collectorHost = "otel-collector.wirelens.svc.cluster.local"
	wasmTypeURL   = "type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm"
	hcmName       = "envoy.filters.network.http_connection_manager"
	otelALSName   = "envoy.access_loggers.open_telemetry"
	otelTracer    = "envoy.tracers.opentelemetry"
)

// The workload: an ingress gateway (HTTP and gRPC-Web servers) in front of a
// meshed service `shop` (a Kubernetes Service and Pod with a sidecar), the
// Collector as a ServiceEntry, a RequestAuthentication + AuthorizationPolicy
// on the gateway (jwt_authn, rbac) and a second AUTHN-phase WasmPlugin of
// default priority 0 on every proxy, so that the filters wirelens must
// precede are all there.
const workloadYAML = `
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: gw, namespace: istio-system}
spec:
  selector: {istio: ingressgateway}
  servers:
  - port: {number: 8080, name: http, protocol: HTTP}
    hosts: ["*"]
  - port: {number: 8081, name: grpc-web, protocol: GRPC-Web}
    hosts: ["*"]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: shop, namespace: istio-system}
spec:
  hosts: ["*"]
  gateways: [gw]
  http:
  - route:
    - destination: {host: shop.shop.svc.cluster.local, port: {number: 8080}}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: otel-collector, namespace: wirelens}
spec:
  hosts: [otel-collector.wirelens.svc.cluster.local]
  location: MESH_INTERNAL
  resolution: STATIC
  ports:
  - {number: 4317, name: grpc-otlp, protocol: GRPC}
  endpoints:
  - address: 10.9.0.7
---
apiVersion: security.istio.io/v1
kind: RequestAuthentication
metadata: {name: jwt, namespace: istio-system}
spec:
  selector: {matchLabels: {istio: ingressgateway}}
  jwtRules:
  - issuer: testing@secure.istio.io
    jwks: '{"keys":[{"e":"AQAB","kid":"DHFbpoIUqrY8t2zpA2qXfCmr5VO5ZEr4RzHU_-envvQ","kty":"RSA","n":"xAE7eB6qugXyCAG3yhh7pkDkT65pHymX-P7KfIupjf59vsdo91bSP9C8H07pSAGQO1MV_xFj9VswgsCg4R6otmg5PV2He95lZdHtOcU5DXIg_pbhLdKXbi66GlVeK6ABZOUW3WYtnNHD-91gVuoeJT_DwtGGcp4ignkgXfkiEm4sw-4sfb4qdt5oLbyVpmW6x9cfa7vs2WTfURiCrBoUqgBo_-4WTiULmmHSGZHOjzwa8WtrtOQGsAFjIbno85jp6MnGGGZPYZbDAa_b3y5u-YpW7ypZrvD8BgtKVjgtQgZhLAGezMt0ua3DRrWnKqTZ0BJ_EyxOGuHJrLsn00fnMQ"}]}'
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: need-jwt, namespace: istio-system}
spec:
  selector: {matchLabels: {istio: ingressgateway}}
  action: ALLOW
  rules:
  - from:
    - source: {requestPrincipals: ["*"]}
---
apiVersion: extensions.istio.io/v1alpha1
kind: WasmPlugin
metadata: {name: other-authn, namespace: istio-system}
spec:
  url: file:///opt/plugins/other-authn.wasm
  phase: AUTHN
  pluginName: other
---
apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: v1
kind: Service
metadata: {name: shop, namespace: shop}
spec:
  clusterIP: 10.96.0.10
  selector: {app: shop}
  ports:
  - {name: http, port: 8080, targetPort: 8080}
---
apiVersion: v1
kind: Pod
metadata:
  name: shop-0
  namespace: shop
  labels: {app: shop}
spec:
  containers:
  - name: app
    image: shop
    ports: [{containerPort: 8080}]
status:
  phase: Running
  podIP: 10.1.0.5
  podIPs: [{ip: 10.1.0.5}]
  conditions: [{type: Ready, status: "True"}]
`

// inputDir is where the files fed to istiod come from.
func inputDir(t *testing.T) string {
	if d := os.Getenv("WIRELENS_ISTIO_INPUT_DIR"); d != "" {
		return d
	}
	return istioDir(t)
}

// istioDir is the repository's deploy/istio.
func istioDir(t *testing.T) string {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for d := wd; d != filepath.Dir(d); d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "deploy", "istio", "wasmplugin.yaml")); err == nil {
			return filepath.Join(d, "deploy", "istio")
		}
	}
	t.Fatalf("deploy/istio/wasmplugin.yaml not found above %s", wd)
	return ""
}

// committed reads one of the committed files as plain YAML, independently of istiod.
func committed(t *testing.T, name string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(istioDir(t), name))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return m
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

type world struct {
	srv     *harness.Server
	gateway *model.Proxy
	sidecar *model.Proxy
}

// start runs istiod's discovery server over the committed files plus the
// workload; edit, if set, changes the loaded configs first (the file://
// variant of the WasmPlugin).
func start(t *testing.T, edit func(l *harness.Loaded)) *world {
	t.Helper()
	dir := inputDir(t)
	l, err := harness.LoadFiles(filepath.Join(dir, "wasmplugin.yaml"), filepath.Join(dir, "telemetry.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.AddYAML("workload", workloadYAML); err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(l)
	}
	m, err := harness.LoadMeshConfig(filepath.Join(dir, "mesh-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := harness.Start(harness.Options{Loaded: l, Mesh: m})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	w := &world{srv: srv}
	w.gateway = w.proxy(t, harness.BootstrapOptions{
		XDS: "127.0.0.1:1", NodeType: "router", Namespace: "istio-system", Name: "istio-ingressgateway-0",
		Labels: map[string]string{"istio": "ingressgateway", "app": "istio-ingressgateway"},
	})
	w.sidecar = w.proxy(t, harness.BootstrapOptions{
		XDS: "127.0.0.1:1", NodeType: "sidecar", Namespace: "shop", Name: "shop-0", IP: "10.1.0.5",
		Labels: map[string]string{"app": "shop"}, Interception: "REDIRECT",
	})
	return w
}

// proxy builds the model.Proxy istiod makes of a connecting Envoy whose
// bootstrap the harness wrote with these options (node id and metadata).
func (w *world) proxy(t *testing.T, o harness.BootstrapOptions) *model.Proxy {
	t.Helper()
	md := o.NodeMetadata()
	p, err := model.ParseServiceNodeWithMetadata(o.NodeID(), &md.NodeMetadata)
	if err != nil {
		t.Fatal(err)
	}
	p.ConfigNamespace = o.Namespace
	p.Labels = md.Labels
	return w.srv.ProxyFor(p)
}

type httpChain struct {
	where   string // listener / filter chain
	inbound bool
	hcm     *hcm.HttpConnectionManager
}

func (c httpChain) filterNames() []string {
	var out []string
	for _, f := range c.hcm.HttpFilters {
		out = append(out, f.Name)
	}
	return out
}

func hcms(t *testing.T, ls []*listener.Listener) []httpChain {
	t.Helper()
	var out []httpChain
	for _, l := range ls {
		for _, fc := range l.FilterChains {
			for _, f := range fc.Filters {
				if f.Name != hcmName {
					continue
				}
				h := &hcm.HttpConnectionManager{}
				if err := f.GetTypedConfig().UnmarshalTo(h); err != nil {
					t.Fatal(err)
				}
				out = append(out, httpChain{
					where:   l.Name + "/" + fc.Name,
					inbound: l.GetTrafficDirection().String() == "INBOUND",
					hcm:     h,
				})
			}
		}
	}
	return out
}

func index(names []string, name string) int {
	for i, n := range names {
		if n == name {
			return i
		}
	}
	return -1
}

// The filters that may come before wirelens: Istio's metadata exchange
// (turned off here: upstream Envoy lacks it) and a CUSTOM ext_authz.
var mayPrecede = map[string]bool{"istio.metadata_exchange": true, "envoy.filters.http.ext_authz": true}

// The filters wirelens must precede, when present.
var mustFollow = []string{
	otherAuthn,                      // another AUTHN plugin of lower priority
	"envoy.filters.http.jwt_authn",  // RequestAuthentication
	"istio_authn",                   // (istio/proxy's, when emitted)
	"envoy.filters.http.rbac",       // AuthorizationPolicy
	"envoy.filters.http.grpc_web",   // gRPC-Web ports
	"envoy.filters.http.grpc_stats", //
	"envoy.filters.http.fault",      //
	"envoy.filters.http.cors",       //
	"istio.stats",                   // (istio/proxy's, when emitted)
	"envoy.filters.http.router",     // last
}

func TestWirelensFilterPlacement(t *testing.T) {
	w := start(t, nil)
	wp := committed(t, "wasmplugin.yaml")
	if got := get(wp, "spec", "phase"); got != "AUTHN" {
		t.Errorf("wasmplugin.yaml spec.phase = %v; the filter must run in AUTHN, the earliest phase", got)
	}

	gwListeners := w.srv.Fake.Listeners(w.gateway)
	scListeners := w.srv.Fake.Listeners(w.sidecar)
	dump(t, "gateway-listeners.json", gwListeners)
	dump(t, "sidecar-listeners.json", scListeners)
	dump(t, "gateway-ecds.json", w.srv.Fake.ConfigGen.BuildExtensionConfiguration(w.gateway, w.srv.Fake.PushContext(), []string{wirelensECDS}, nil))
	gw := hcms(t, gwListeners)
	sc := hcms(t, scListeners)
	var scIn, scOut []httpChain
	for _, c := range sc {
		if c.inbound {
			scIn = append(scIn, c)
		} else {
			scOut = append(scOut, c)
		}
	}
	if len(gw) < 2 || len(scIn) == 0 || len(scOut) == 0 {
		t.Fatalf("workload HCMs: gateway %d (want the HTTP and gRPC-Web servers), sidecar inbound %d, outbound %d",
			len(gw), len(scIn), len(scOut))
	}
	sawGrpcWeb, sawJwt, sawRbac := false, false, false
	for _, c := range append(append([]httpChain{}, gw...), scOut...) {
		names := c.filterNames()
		t.Logf("%s: %s", c.where, strings.Join(names, " -> "))
		at := index(names, wirelensECDS)
		if at < 0 {
			t.Errorf("%s: no wirelens ECDS entry %s in %v", c.where, wirelensECDS, names)
			continue
		}
		if n := strings.Count(strings.Join(names, "\n")+"\n", wirelensECDS+"\n"); n != 1 {
			t.Errorf("%s: wirelens appears %d times", c.where, n)
		}
		for _, before := range names[:at] {
			if !mayPrecede[before] {
				t.Errorf("%s: %s runs before wirelens (filters %v)", c.where, before, names)
			}
		}
		for _, after := range mustFollow {
			if i := index(names, after); i >= 0 && i < at {
				t.Errorf("%s: %s must come after wirelens, is at %d (wirelens at %d)", c.where, after, i, at)
			}
		}
		if index(names, otherAuthn) < 0 {
			t.Errorf("%s: the second AUTHN plugin is missing: %v", c.where, names)
		}
		sawGrpcWeb = sawGrpcWeb || index(names, "envoy.filters.http.grpc_web") >= 0
		sawJwt = sawJwt || index(names, "envoy.filters.http.jwt_authn") >= 0
		sawRbac = sawRbac || index(names, "envoy.filters.http.rbac") >= 0

		f := c.hcm.HttpFilters[at]
		cd := f.GetConfigDiscovery()
		if cd == nil || cd.GetConfigSource().GetAds() == nil || index(cd.TypeUrls, wasmTypeURL) < 0 {
			t.Errorf("%s: wirelens is not an ECDS (ADS) entry of type Wasm: %v", c.where, f)
		}
	}
	if !sawGrpcWeb || !sawJwt || !sawRbac {
		t.Errorf("the workload should have given grpc_web (%v), jwt_authn (%v) and rbac (%v) on the gateway", sawGrpcWeb, sawJwt, sawRbac)
	}
	// mode CLIENT: not on the sidecar's inbound side (the other plugin, which has
	// no match, is, so these HCMs are the ones a plugin can reach).
	for _, c := range scIn {
		names := c.filterNames()
		t.Logf("%s (inbound): %s", c.where, strings.Join(names, " -> "))
		if index(names, wirelensECDS) >= 0 && !strings.Contains(c.where, "passthrough") {
			t.Errorf("%s: wirelens on the sidecar's inbound side (match %v): each call would be recorded twice",
				c.where, get(wp, "spec", "match"))
		}
	}
	if !anyHas(scIn, otherAuthn) {
		t.Errorf("no sidecar inbound HCM carries the unmatched plugin: the inbound check would be vacuous")
	}
}

// dump writes what istiod generated, as Envoy's JSON, into
// $WIRELENS_ISTIO_DUMP_DIR if set (for reading, and the README's excerpt).
func dump[T proto.Message](t *testing.T, name string, msgs []T) {
	d := os.Getenv("WIRELENS_ISTIO_DUMP_DIR")
	if d == "" {
		return
	}
	var parts []string
	for _, m := range msgs {
		b, err := protojson.MarshalOptions{Multiline: true, Indent: "  ", Resolver: protoregistry.GlobalTypes}.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, string(b))
	}
	if err := os.WriteFile(filepath.Join(d, name), []byte("[\n"+strings.Join(parts, ",\n")+"\n]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func anyHas(cs []httpChain, name string) bool {
	for _, c := range cs {
		if index(c.filterNames(), name) >= 0 {
			return true
		}
	}
	return false
}

func ecdsWasm(t *testing.T, w *world, p *model.Proxy) *wasmv3.PluginConfig {
	t.Helper()
	ecs := w.srv.Fake.ConfigGen.BuildExtensionConfiguration(p, w.srv.Fake.PushContext(), []string{wirelensECDS}, nil)
	if len(ecs) != 1 {
		t.Fatalf("ECDS for %s: %d resources, want 1", wirelensECDS, len(ecs))
	}
	if ecs[0].Name != wirelensECDS {
		t.Errorf("ECDS resource name %q", ecs[0].Name)
	}
	if ecs[0].GetTypedConfig().GetTypeUrl() != wasmTypeURL {
		t.Fatalf("ECDS type %s, want %s", ecs[0].GetTypedConfig().GetTypeUrl(), wasmTypeURL)
	}
	wf := &wasmfilter.Wasm{}
	if err := ecs[0].GetTypedConfig().UnmarshalTo(wf); err != nil {
		t.Fatal(err)
	}
	return wf.GetConfig()
}

func TestWirelensECDS(t *testing.T) {
	w := start(t, nil)
	wp := committed(t, "wasmplugin.yaml")
	spec := get(wp, "spec").(map[string]any)
	for _, p := range []*model.Proxy{w.gateway, w.sidecar} {
		pc := ecdsWasm(t, w, p)
		if pc.RootId != spec["pluginName"] {
			t.Errorf("root_id %q, want pluginName %v", pc.RootId, spec["pluginName"])
		}
		if pc.FailurePolicy != wasmv3.FailurePolicy_FAIL_OPEN {
			t.Errorf("failure_policy %v, want FAIL_OPEN (failStrategy %v)", pc.FailurePolicy, spec["failStrategy"])
		}
		// pluginConfig arrives as JSON text the filter parses, equal to the WasmPlugin's.
		sv := &wrapperspb.StringValue{}
		if err := pc.GetConfiguration().UnmarshalTo(sv); err != nil {
			t.Fatalf("configuration is not a StringValue: %v", err)
		}
		var got any
		if err := json.Unmarshal([]byte(sv.Value), &got); err != nil {
			t.Fatalf("configuration is not JSON: %v", err)
		}
		want := roundTrip(t, spec["pluginConfig"])
		if !reflect.DeepEqual(got, want) {
			t.Errorf("configuration JSON differs from the WasmPlugin's pluginConfig: %s", diffKeys(got, want))
		}
		if ops, _ := get(got, "operations").([]any); len(ops) == 0 {
			t.Errorf("configuration has no operations")
		}
		vm := pc.GetVmConfig()
		if vm.GetRuntime() != "envoy.wasm.runtime.v8" {
			t.Errorf("runtime %q", vm.GetRuntime())
		}
		url := spec["url"].(string)
		if !strings.HasPrefix(url, "oci://") {
			t.Fatalf("committed url %q: want an oci:// image", url)
		}
		// oci:// goes to the agent as a remote source with the placeholder cluster "_".
		r := vm.GetCode().GetRemote()
		if r == nil || r.GetHttpUri().GetUri() != url || r.GetHttpUri().GetCluster() != "_" {
			t.Errorf("code %v: want remote %s via cluster _ (istio-agent pulls it)", vm.GetCode(), url)
		}
		if sha, _ := spec["sha256"].(string); r.GetSha256() != sha {
			t.Errorf("remote sha256 %q, want the WasmPlugin's %q", r.GetSha256(), sha)
		}
		if pol := vm.GetEnvironmentVariables().GetKeyValues()["ISTIO_META_WASM_IMAGE_PULL_POLICY"]; pol != spec["imagePullPolicy"] {
			t.Errorf("pull policy %q, want %v", pol, spec["imagePullPolicy"])
		}
	}
}

// The same plugin with a file:// url (what rung 2 runs): a local filename.
func TestWirelensECDSFileURL(t *testing.T) {
	w := start(t, func(l *harness.Loaded) {
		for i, c := range l.Configs {
			if c.GroupVersionKind == gvk.WasmPlugin && c.Name == "wirelens" {
				s := c.Spec.(*extensions.WasmPlugin)
				s.Url = "file:///var/lib/wirelens/wirelens_filter.wasm"
				s.Sha256 = ""
				l.Configs[i] = c
			}
		}
	})
	pc := ecdsWasm(t, w, w.gateway)
	if got := pc.GetVmConfig().GetCode().GetLocal().GetFilename(); got != "/var/lib/wirelens/wirelens_filter.wasm" {
		t.Errorf("file:// code: %v", pc.GetVmConfig().GetCode())
	}
}

func TestAccessLogAndTracing(t *testing.T) {
	w := start(t, nil)
	mc := committed(t, "mesh-config.yaml")
	tel := committed(t, "telemetry.yaml")
	var als, tracing map[string]any
	for _, p := range get(mc, "meshConfig", "extensionProviders").([]any) {
		if v := get(p, "envoyOtelAls"); v != nil {
			als = v.(map[string]any)
		}
		if v := get(p, "opentelemetry"); v != nil {
			tracing = v.(map[string]any)
		}
	}
	if als == nil || tracing == nil {
		t.Fatalf("mesh-config.yaml: want an envoyOtelAls and an opentelemetry provider")
	}
	wantLabels := map[string]string{}
	for k, v := range get(als, "logFormat", "labels").(map[string]any) {
		wantLabels[k] = fmt.Sprint(v)
	}
	wantCluster := fmt.Sprintf("outbound|%v||%s", als["port"], als["service"])

	gw := hcms(t, w.srv.Fake.Listeners(w.gateway))
	var sc, scIn []httpChain
	for _, c := range hcms(t, w.srv.Fake.Listeners(w.sidecar)) {
		if c.inbound {
			scIn = append(scIn, c)
		} else {
			sc = append(sc, c)
		}
	}
	for _, c := range append(gw, sc...) {
		cfg := otelAccessLog(t, c.hcm)
		if cfg == nil {
			t.Errorf("%s: no OpenTelemetry access log", c.where)
			continue
		}
		if cfg.GetCommonConfig().GetLogName() != als["logName"] {
			t.Errorf("%s: log_name %q, want %v", c.where, cfg.GetCommonConfig().GetLogName(), als["logName"])
		}
		if got := cfg.GetCommonConfig().GetGrpcService().GetEnvoyGrpc().GetClusterName(); got != wantCluster {
			t.Errorf("%s: access log cluster %q, want %q", c.where, got, wantCluster)
		}
		if got := cfg.GetBody().GetStringValue(); got != get(als, "logFormat", "text") {
			t.Errorf("%s: body %q, want %v", c.where, got, get(als, "logFormat", "text"))
		}
		got := map[string]string{}
		for _, kv := range cfg.GetAttributes().GetValues() {
			got[kv.Key] = kv.GetValue().GetStringValue()
		}
		if !reflect.DeepEqual(got, wantLabels) {
			t.Errorf("%s: access-log attributes differ from mesh-config.yaml's labels: %s", c.where, diffKeys(got, wantLabels))
		}

		tr := c.hcm.GetTracing()
		if tr.GetProvider().GetName() != otelTracer {
			t.Errorf("%s: tracer %q, want %s", c.where, tr.GetProvider().GetName(), otelTracer)
			continue
		}
		oc := &tracev3.OpenTelemetryConfig{}
		if err := tr.GetProvider().GetTypedConfig().UnmarshalTo(oc); err != nil {
			t.Fatal(err)
		}
		if got, want := oc.GetGrpcService().GetEnvoyGrpc().GetClusterName(), fmt.Sprintf("outbound|%v||%s", tracing["port"], tracing["service"]); got != want {
			t.Errorf("%s: tracer cluster %q, want %q", c.where, got, want)
		}
		if v := tr.GetRandomSampling().GetValue(); v != 100 {
			t.Errorf("%s: random_sampling %v, want 100 (telemetry.yaml randomSamplingPercentage)", c.where, v)
		}
		tags := map[string]string{}
		for _, ct := range tr.GetCustomTags() {
			tags[ct.Tag] = ct.GetValue()
		}
		var rule any
		for _, r := range get(tel, "spec", "tracing").([]any) {
			rule = r
		}
		for tag, v := range get(rule, "customTags").(map[string]any) {
			want := fmt.Sprint(get(v, "formatter", "value"))
			if tags[tag] != want {
				t.Errorf("%s: span tag %s = %q, want %q", c.where, tag, tags[tag], want)
			}
		}
	}
	// CLIENT: the callee's inbound side does not log the call a second time.
	for _, c := range scIn {
		if cfg := otelAccessLog(t, c.hcm); cfg != nil && cfg.GetCommonConfig().GetLogName() == als["logName"] {
			t.Errorf("%s: the wirelens access log is on the sidecar's inbound side", c.where)
		}
	}
	if len(gw) == 0 || len(sc) == 0 {
		t.Fatalf("no HCMs: gateway %d, sidecar outbound %d", len(gw), len(sc))
	}
}

func otelAccessLog(t *testing.T, h *hcm.HttpConnectionManager) *otelals.OpenTelemetryAccessLogConfig {
	t.Helper()
	var found *accesslogv3.AccessLog
	for _, al := range h.AccessLog {
		if al.Name == otelALSName {
			found = al
		}
	}
	if found == nil {
		return nil
	}
	cfg := &otelals.OpenTelemetryAccessLogConfig{}
	if err := found.GetTypedConfig().UnmarshalTo(cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func roundTrip(t *testing.T, v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// diffKeys names what differs between two JSON-like maps (for messages).
func diffKeys(got, want any) string {
	g := roundTripAny(got)
	w := roundTripAny(want)
	gm, ok1 := g.(map[string]any)
	wm, ok2 := w.(map[string]any)
	if !ok1 || !ok2 {
		return fmt.Sprintf("got %v, want %v", g, w)
	}
	var out []string
	for k, wv := range wm {
		gv, ok := gm[k]
		switch {
		case !ok:
			out = append(out, "missing "+k)
		case !reflect.DeepEqual(gv, wv):
			out = append(out, fmt.Sprintf("%s: got %.80v, want %.80v", k, gv, wv))
		}
	}
	for k := range gm {
		if _, ok := wm[k]; !ok {
			out = append(out, "unexpected "+k)
		}
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}

func roundTripAny(v any) any {
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}
