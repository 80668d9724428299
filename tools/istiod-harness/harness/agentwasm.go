package harness

import (
	"fmt"
	"os"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/types/known/anypb"

	v3 "istio.io/istio/pilot/pkg/xds/v3"
	"istio.io/istio/pkg/log"
	"istio.io/istio/pkg/util/sets"
	"istio.io/istio/pkg/wasm"
)

// AgentWasmOptions: serve --agent-wasm-cache DIR [--insecure-registries ...].
//
// In a pod, istiod never sends Envoy a remote Wasm module it could load:
// it sends the url (oci://, http(s)://) with the placeholder cluster "_",
// and istio-agent's xDS proxy rewrites each such ECDS entry into a local
// file it pulled (pkg/istio-agent xds_proxy.go rewriteAndForward ->
// pkg/wasm.MaybeConvertWasmExtensionConfig over a pkg/wasm.LocalFileCache).
// With these options the harness runs that same code (istio's pkg/wasm, not
// pilot-agent itself: no SDS, no DNS proxy, no health probes) on every ECDS
// response before it goes to Envoy.
type AgentWasmOptions struct {
	// CacheDir is where modules are stored (the agent's /var/lib/istio/data).
	CacheDir string
	// InsecureRegistries: host[:port] pulled over plain HTTP or unverified
	// TLS (the agent's WASM_INSECURE_REGISTRIES; "*" for all).
	InsecureRegistries []string
}

type agentWasm struct {
	cache *wasm.LocalFileCache
}

func (s *Server) enableAgentWasm(o *AgentWasmOptions) error {
	if o.CacheDir == "" {
		return fmt.Errorf("--agent-wasm-cache: empty directory")
	}
	if err := os.MkdirAll(o.CacheDir, 0o755); err != nil {
		return fmt.Errorf("--agent-wasm-cache %s: %v", o.CacheDir, err)
	}
	s.agentWasm = &agentWasm{cache: wasm.NewLocalFileCache(o.CacheDir, wasm.Options{
		InsecureRegistries: sets.New(o.InsecureRegistries...),
	})}
	s.f.Cleanup(s.agentWasm.cache.Cleanup)
	log.Infof("istiod harness: ECDS Wasm entries with remote code are pulled into %s as istio-agent does (insecure registries: %v)",
		o.CacheDir, o.InsecureRegistries)
	return nil
}

// convert returns the response to send: for ECDS, a copy whose remote Wasm
// entries istio's agent code rewrote to local files (on a failed pull that
// code substitutes an allow-all RBAC filter for FAIL_OPEN plugins, deny-all
// otherwise, exactly as in a pod); other responses as they are. The
// response istiod built is not modified (its resources may be cached).
func (a *agentWasm) convert(r *discovery.DiscoveryResponse) (*discovery.DiscoveryResponse, error) {
	if r.TypeUrl != v3.ExtensionConfigurationType || len(r.Resources) == 0 {
		return r, nil
	}
	out := &discovery.DiscoveryResponse{
		VersionInfo:  r.VersionInfo,
		TypeUrl:      r.TypeUrl,
		Nonce:        r.Nonce,
		ControlPlane: r.ControlPlane,
		Resources:    make([]*anypb.Any, len(r.Resources)),
	}
	for i, res := range r.Resources {
		out.Resources[i] = &anypb.Any{TypeUrl: res.TypeUrl, Value: append([]byte(nil), res.Value...)}
	}
	err := wasm.MaybeConvertWasmExtensionConfig(out.Resources, a.cache)
	return out, err
}
