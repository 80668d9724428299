package harness

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
	"k8s.io/apimachinery/pkg/runtime"

	meshconfig "istio.io/api/mesh/v1alpha1"
	"istio.io/istio/pilot/pkg/features"
	"istio.io/istio/pilot/pkg/model"
	fakexds "istio.io/istio/pilot/test/xds"
	"istio.io/istio/pkg/config"
	"istio.io/istio/pkg/log"
)

// Options configure a harness.
type Options struct {
	// Loaded configs and Kubernetes objects (LoadDir / LoadFiles).
	Loaded *Loaded
	// Mesh config (LoadMeshConfig); nil means istiod's defaults.
	Mesh *meshconfig.MeshConfig
	// XDS is the address ADS is served on ("127.0.0.1:0" for a free port);
	// empty: no socket (in-process use, e.g. the Go tests).
	XDS string
	// Status, if set, serves GET /acks (the ACK/NACK state per proxy and type,
	// JSON) and istiod's own /debug/ endpoints (syncz, config_dump, ...).
	Status string
	// AgentWasm, if set, rewrites remote Wasm code in ECDS responses the
	// way istio-agent does (see agentwasm.go).
	AgentWasm *AgentWasmOptions
}

// Switched lists what the harness turns off in istiod because upstream Envoy
// lacks the filters, and why. The same text goes to the log and the README.
var Switched = []string{
	"features.MetadataExchange=false (PILOT_ENABLE_METADATA_EXCHANGE): istiod would put Istio's metadata-exchange " +
		"filters (HTTP `istio.metadata_exchange` of type io.istio.http.peer_metadata.Config, TCP " +
		"envoy.tcp.metadataexchange.config.MetadataExchange) on every listener; they are compiled only into istio/proxy",
	"features.ALPNFilter=false (PILOT_ENABLE_ALPN_FILTER): the `istio.alpn` HTTP filter (istio.envoy.config.filter.http.alpn.v2alpha1) " +
		"on outbound and gateway HCMs exists only in istio/proxy",
	"metrics providers removed from the mesh config (prometheus, stackdriver extension providers and defaultProviders.metrics): " +
		"Istio's metrics become the `istio.stats` filter (stats.PluginConfig), only in istio/proxy",
}

// TurnOffWhatUpstreamEnvoyLacks sets the istiod feature flags (exported
// package variables read from the environment at init; set here in code) and
// strips the mesh config's metrics providers. It returns what it removed
// from the mesh config, for the log.
func TurnOffWhatUpstreamEnvoyLacks(m *meshconfig.MeshConfig) []string {
	features.MetadataExchange = false
	features.ALPNFilter = false
	var removed []string
	var keep []*meshconfig.MeshConfig_ExtensionProvider
	for _, p := range m.GetExtensionProviders() {
		switch p.GetProvider().(type) {
		case *meshconfig.MeshConfig_ExtensionProvider_Prometheus, *meshconfig.MeshConfig_ExtensionProvider_Stackdriver:
			removed = append(removed, "extensionProviders "+p.GetName())
			continue
		}
		keep = append(keep, p)
	}
	m.ExtensionProviders = keep
	if dp := m.GetDefaultProviders(); dp != nil && len(dp.Metrics) > 0 {
		removed = append(removed, "defaultProviders.metrics "+strings.Join(dp.Metrics, ","))
		dp.Metrics = nil
	}
	return removed
}

// Server is a running harness.
type Server struct {
	Fake   *fakexds.FakeDiscoveryServer
	XDS    net.Addr
	Status net.Addr

	f         *failer
	grpc      *grpc.Server
	httpSrv   *http.Server
	acks      *ackLog
	agentWasm *agentWasm

	mu      sync.Mutex
	current map[string]config.Config
	kube    map[string]runtime.Object
}

// Start builds istiod's discovery server over the options and, if XDS is
// set, serves ADS on it.
func Start(opts Options) (*Server, error) {
	if opts.Loaded == nil {
		opts.Loaded = &Loaded{Source: map[string]string{}}
	}
	m := opts.Mesh
	if m == nil {
		m, _ = LoadMeshConfig("")
	}
	for _, r := range TurnOffWhatUpstreamEnvoyLacks(m) {
		log.Infof("istiod harness: removed from the mesh config (no istio.stats in upstream Envoy): %s", r)
	}
	s := &Server{f: newFailer(), acks: newAckLog(), current: map[string]config.Config{}, kube: map[string]runtime.Object{}}
	for _, c := range opts.Loaded.Configs {
		s.current[Key(c)] = c
	}
	for _, o := range opts.Loaded.KubeObjects {
		k, err := kubeKey(o)
		if err != nil {
			return nil, err
		}
		s.kube[k] = o
	}

	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Fake = fakexds.NewFakeDiscoveryServer(s.f, fakexds.FakeOptions{
			Configs:           opts.Loaded.Configs,
			KubernetesObjects: opts.Loaded.KubeObjects,
			MeshConfig:        m,
			// istiod's default debounce (100 ms), as a real istiod batches pushes.
			DebounceTime: features.DebounceAfter,
		})
	}()
	select {
	case <-done:
	case <-s.f.failedCh:
		<-done
	}
	if err := s.f.Err(); err != nil {
		s.f.Close()
		return nil, fmt.Errorf("istiod's discovery server did not start: %v", err)
	}

	if opts.AgentWasm != nil {
		if err := s.enableAgentWasm(opts.AgentWasm); err != nil {
			s.Close()
			return nil, err
		}
	}

	if opts.XDS != "" {
		lis, err := net.Listen("tcp", opts.XDS)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("--xds %s: %v", opts.XDS, err)
		}
		s.XDS = lis.Addr()
		s.grpc = grpc.NewServer(
			grpc.StreamInterceptor(s.interceptStream),
			grpc.MaxRecvMsgSize(64<<20),
			grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
		)
		s.Fake.Discovery.Register(s.grpc)
		go func() { _ = s.grpc.Serve(lis) }()
		log.Infof("istiod harness: ADS (plaintext gRPC) on %s", s.XDS)
	}
	if opts.Status != "" {
		lis, err := net.Listen("tcp", opts.Status)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("--status %s: %v", opts.Status, err)
		}
		s.Status = lis.Addr()
		mux := http.NewServeMux()
		mux.HandleFunc("/acks", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(s.acks.snapshot())
		})
		mux.Handle("/debug/", s.Fake.DiscoveryDebug)
		s.httpSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = s.httpSrv.Serve(lis) }()
		log.Infof("istiod harness: status on http://%s/acks and /debug/", s.Status)
	}
	return s, nil
}

// Close stops serving and shuts istiod's server down.
func (s *Server) Close() {
	if s.httpSrv != nil {
		_ = s.httpSrv.Close()
	}
	if s.grpc != nil {
		s.grpc.Stop()
	}
	s.f.Close()
}

// Acks returns the ACK/NACK state: node id -> type URL -> state.
func (s *Server) Acks() map[string]map[string]AckState { return s.acks.snapshot() }

// AckState is the last thing a proxy said about one resource type.
type AckState struct {
	// SentVersion / SentNonce: the last response istiod sent.
	SentVersion string `json:"sent_version"`
	SentNonce   string `json:"sent_nonce"`
	Resources   int    `json:"resources"`
	// AckedNonce: the last nonce the proxy accepted; Nack: its last error
	// (cleared by a later ACK).
	AckedNonce string `json:"acked_nonce,omitempty"`
	Nack       string `json:"nack,omitempty"`
	NackCount  int    `json:"nack_count"`
	AckCount   int    `json:"ack_count"`
}

type ackLog struct {
	mu    sync.Mutex
	m     map[string]map[string]*AckState
	conns map[string]int
}

func newAckLog() *ackLog {
	return &ackLog{m: map[string]map[string]*AckState{}, conns: map[string]int{}}
}

func (l *loggedStream) setNode(id string) {
	if id == "" || l.node != "" {
		return
	}
	l.node = id
	l.s.acks.mu.Lock()
	l.s.acks.conns[id]++
	l.s.acks.mu.Unlock()
}

func (a *ackLog) get(node, typ string) *AckState {
	n := a.m[node]
	if n == nil {
		n = map[string]*AckState{}
		a.m[node] = n
	}
	st := n[typ]
	if st == nil {
		st = &AckState{}
		n[typ] = st
	}
	return st
}

func (a *ackLog) snapshot() map[string]map[string]AckState {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string]map[string]AckState{}
	for n, types := range a.m {
		out[n] = map[string]AckState{}
		for t, st := range types {
			out[n][t] = *st
		}
	}
	return out
}

func shortType(t string) string {
	if i := strings.LastIndex(t, "."); i >= 0 {
		return t[i+1:]
	}
	return t
}

// interceptStream logs every xDS response istiod sends and every ACK / NACK
// the proxy answers with (istiod itself logs a NACK as a warning and an ACK
// only at debug level).
func (s *Server) interceptStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ls := &loggedStream{ServerStream: ss, s: s}
	err := handler(srv, ls)
	if ls.node != "" {
		a := s.acks
		a.mu.Lock()
		a.conns[ls.node]--
		if a.conns[ls.node] <= 0 {
			delete(a.conns, ls.node)
			delete(a.m, ls.node)
		}
		a.mu.Unlock()
		log.Infof("xds: %s disconnected (%v)", ls.node, err)
	}
	return err
}

type loggedStream struct {
	grpc.ServerStream
	s    *Server
	node string
}

func (l *loggedStream) RecvMsg(m any) error {
	err := l.ServerStream.RecvMsg(m)
	if err != nil {
		return err
	}
	switch r := m.(type) {
	case *discovery.DiscoveryRequest:
		l.setNode(r.GetNode().GetId())
		if r.ResponseNonce == "" {
			log.Infof("xds: REQ %s %s %v", l.node, shortType(r.TypeUrl), r.ResourceNames)
			return nil
		}
		l.recordReply(r.TypeUrl, "version="+r.VersionInfo+" ", r.ResponseNonce, r.ErrorDetail.GetMessage(), r.ErrorDetail != nil)
	case *discovery.DeltaDiscoveryRequest:
		l.setNode(r.GetNode().GetId())
		if r.ResponseNonce == "" {
			return nil
		}
		l.recordReply(r.TypeUrl, "", r.ResponseNonce, r.ErrorDetail.GetMessage(), r.ErrorDetail != nil)
	}
	return nil
}

// recordReply notes Envoy's reply to a response of ours, an ACK or a NACK with Envoy's error, for /acks and the log.
func (l *loggedStream) recordReply(typeURL, version, nonce, nackMessage string, nack bool) {
	a := l.s.acks
	a.mu.Lock()
	st := a.get(l.node, typeURL)
	if nack {
		st.Nack = nackMessage
		st.NackCount++
	} else {
		st.AckedNonce = nonce
		st.Nack = ""
		st.AckCount++
	}
	a.mu.Unlock()
	if nack {
		log.Warnf("xds: NACK %s %s nonce=%s: %s", l.node, shortType(typeURL), nonce, nackMessage)
		return
	}
	log.Infof("xds: ACK %s %s %snonce=%s", l.node, shortType(typeURL), version, nonce)
}

func (l *loggedStream) SendMsg(m any) error {
	if l.s.agentWasm != nil {
		if r, ok := m.(*discovery.DiscoveryResponse); ok {
			converted, err := l.s.agentWasm.convert(r)
			if err != nil {
				// The agent NACKs to istiod here; the harness logs and lets Envoy judge.
				log.Warnf("xds: agent wasm conversion for %s: %v", l.node, err)
			}
			m = converted
		}
	}
	switch r := m.(type) {
	case *discovery.DiscoveryResponse:
		a := l.s.acks
		a.mu.Lock()
		st := a.get(l.node, r.TypeUrl)
		st.SentVersion, st.SentNonce, st.Resources = r.VersionInfo, r.Nonce, len(r.Resources)
		a.mu.Unlock()
		log.Infof("xds: PUSH %s %s version=%s nonce=%s resources=%d", l.node, shortType(r.TypeUrl), r.VersionInfo, r.Nonce, len(r.Resources))
	case *discovery.DeltaDiscoveryResponse:
		a := l.s.acks
		a.mu.Lock()
		st := a.get(l.node, r.TypeUrl)
		st.SentNonce, st.Resources = r.Nonce, len(r.Resources)
		a.mu.Unlock()
		log.Infof("xds: PUSH(delta) %s %s nonce=%s resources=%d removed=%d", l.node, shortType(r.TypeUrl), r.Nonce, len(r.Resources), len(r.RemovedResources))
	}
	return l.ServerStream.SendMsg(m)
}

// Apply makes istiod's config store hold exactly the loaded configs (create,
// update, delete) and the fake kube client exactly the loaded objects; each
// change raises istiod's usual push. It returns a summary of the changes.
func (s *Server) Apply(l *Loaded) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	store := s.Fake.Store()
	var changes []string
	next := map[string]config.Config{}
	for _, c := range l.Configs {
		next[Key(c)] = c
	}
	keys := make([]string, 0, len(next))
	for k := range next {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		c := next[k]
		old, ok := s.current[k]
		if !ok {
			if _, err := store.Create(c); err != nil {
				return changes, fmt.Errorf("create %s (%s): %v", k, l.Source[k], err)
			}
			changes = append(changes, "created "+k)
			continue
		}
		if sameConfig(old, c) {
			next[k] = old
			continue
		}
		c.ResourceVersion = ""
		if _, err := store.Update(c); err != nil {
			return changes, fmt.Errorf("update %s (%s): %v", k, l.Source[k], err)
		}
		changes = append(changes, "updated "+k)
	}
	for k, old := range s.current {
		if _, ok := next[k]; ok {
			continue
		}
		if err := store.Delete(old.GroupVersionKind, old.Name, old.Namespace, nil); err != nil {
			return changes, fmt.Errorf("delete %s: %v", k, err)
		}
		changes = append(changes, "deleted "+k)
	}
	s.current = next
	kc, err := s.applyKube(l.KubeObjects)
	changes = append(changes, kc...)
	return changes, err
}

func sameConfig(a, b config.Config) bool {
	ja, err1 := json.Marshal([]any{a.Spec, a.Labels, a.Annotations})
	jb, err2 := json.Marshal([]any{b.Spec, b.Labels, b.Annotations})
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}

// ProxyFor is a small helper for the in-process tests: it sets up a proxy
// the way istiod does for a connecting Envoy.
func (s *Server) ProxyFor(p *model.Proxy) *model.Proxy { return s.Fake.SetupProxy(p) }
