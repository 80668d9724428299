package harness

import (
	"fmt"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
)

// AgentWasmOptions: see serve --agent-wasm-cache.
type AgentWasmOptions struct {
	CacheDir           string
	InsecureRegistries []string
}

type agentWasm struct{}

func (s *Server) enableAgentWasm(o *AgentWasmOptions) error {
	return fmt.Errorf("--agent-wasm-cache: not implemented yet")
}

func (a *agentWasm) convert(r *discovery.DiscoveryResponse) error { return nil }
