package harness

import (
	"encoding/json"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	"istio.io/istio/pilot/pkg/model"
	"istio.io/istio/pkg/config/constants"
	pm "istio.io/istio/pkg/model"
)

// IstioVersion is what the bootstrap reports as ISTIO_VERSION: the istiod
// the harness is built from (istio.io/istio master of 2026-08-27, VERSION
// 1.31). istiod gates some config on the proxy's version.
const IstioVersion = "1.31.0"

// BootstrapOptions describe the proxy a bootstrap is for.
type BootstrapOptions struct {
	XDS       string // host:port of the harness's ADS
	NodeType  string // router | sidecar
	Namespace string
	Name      string // pod name
	Labels    map[string]string
	AdminPort int // 0: Envoy picks
	// IP is the instance IP istiod sees (INSTANCE_IPS, the node id). It only
	// identifies the proxy; listeners bind where the config says. Default
	// DefaultInstanceIP. It must not be the address of a ServiceEntry
	// endpoint: istiod takes the labels of a workload at the proxy's IP as the
	// proxy's own (empty for a STATIC endpoint), and a Gateway's selector
	// then matches nothing (no listener).
	IP string
	// Interception is the sidecar's INTERCEPTION_MODE; "NONE" (default for
	// sidecars here) as for a Sidecar resource with captureMode NONE.
	Interception string
}

// ParseLabels reads k=v,k=v.
func ParseLabels(s string) (map[string]string, error) {
	out := map[string]string{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--labels: %q is not key=value", kv)
		}
		out[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return out, nil
}

// NodeID is the Envoy node id istiod parses (model.ParseServiceNodeWithMetadata):
// TYPE~IP~POD.NAMESPACE~NAMESPACE.svc.cluster.local.
func (o BootstrapOptions) NodeID() string {
	return strings.Join([]string{o.NodeType, o.ip(), o.Name + "." + o.Namespace, o.Namespace + ".svc." + constants.DefaultClusterLocalDomain}, "~")
}

// DefaultInstanceIP is an address from TEST-NET-1 (RFC 5737): never bound,
// never an upstream's.
const DefaultInstanceIP = "192.0.2.1"

func (o BootstrapOptions) ip() string {
	if o.IP == "" {
		return DefaultInstanceIP
	}
	return o.IP
}

// NodeMetadata is the node metadata istio-agent would send, in istio's own
// type (pkg/model.BootstrapNodeMetadata, the JSON keys istiod reads).
func (o BootstrapOptions) NodeMetadata() *pm.BootstrapNodeMetadata {
	labels := map[string]string{}
	for k, v := range o.Labels {
		labels[k] = v
	}
	md := &pm.BootstrapNodeMetadata{
		NodeMetadata: pm.NodeMetadata{
			IstioVersion:   IstioVersion,
			Labels:         labels,
			Namespace:      o.Namespace,
			InstanceIPs:    pm.StringList{o.ip()},
			WorkloadName:   workloadName(o),
			ServiceAccount: "spiffe://cluster.local/ns/" + o.Namespace + "/sa/default",
			MeshID:         "cluster.local",
			ClusterID:      constants.DefaultClusterName,
		},
		InstanceName: o.Name,
		Owner:        "kubernetes://apis/apps/v1/namespaces/" + o.Namespace + "/deployments/" + workloadName(o),
	}
	if o.NodeType == string(model.SidecarProxy) {
		mode := o.Interception
		if mode == "" {
			mode = string(model.InterceptionNone)
		}
		md.InterceptionMode = pm.TrafficInterceptionMode(mode)
	}
	return md
}

func workloadName(o BootstrapOptions) string {
	if v := o.Labels["app"]; v != "" {
		return v
	}
	return o.Name
}

// Validate checks the options, naming the flag at fault.
func (o BootstrapOptions) Validate() error {
	host, port, err := net.SplitHostPort(o.XDS)
	if err != nil || host == "" {
		return fmt.Errorf("--xds %q: want host:port (%v)", o.XDS, err)
	}
	if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
		return fmt.Errorf("--xds %q: port %q is not 1..65535", o.XDS, port)
	}
	if o.NodeType != string(model.Router) && o.NodeType != string(model.SidecarProxy) {
		return fmt.Errorf("--node-type %q: want router or sidecar", o.NodeType)
	}
	if o.Namespace == "" || strings.ContainsAny(o.Namespace, "~. ") {
		return fmt.Errorf("--namespace %q: want a Kubernetes namespace name", o.Namespace)
	}
	if o.Name == "" || strings.ContainsAny(o.Name, "~ ") {
		return fmt.Errorf("--name %q: want a pod name", o.Name)
	}
	if o.AdminPort < 0 || o.AdminPort > 65535 {
		return fmt.Errorf("--admin-port %d: want 0..65535", o.AdminPort)
	}
	if net.ParseIP(o.ip()) == nil {
		return fmt.Errorf("--ip %q: not an IP address", o.IP)
	}
	return nil
}

// Bootstrap renders an Envoy (1.40, upstream) bootstrap in JSON: node
// id/cluster/metadata as istio-agent would send them, an admin listener on
// 127.0.0.1, and ADS (state of the world, gRPC, plaintext) to the harness.
// It leaves out what istio-agent's bootstrap adds for istio/proxy (the stats
// tag rules, the Prometheus and health listeners, the SDS cluster to the
// agent's socket) since nothing the harness serves needs them.
func Bootstrap(o BootstrapOptions) ([]byte, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	host, port, _ := net.SplitHostPort(o.XDS)
	p, _ := strconv.Atoi(port)
	mdJSON, err := json.Marshal(o.NodeMetadata())
	if err != nil {
		return nil, err
	}
	var md map[string]any
	if err := json.Unmarshal(mdJSON, &md); err != nil {
		return nil, err
	}
	serviceCluster := workloadName(o) + "." + o.Namespace
	keys := make([]string, 0, len(o.Labels))
	for k := range o.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	ads := map[string]any{
		"resource_api_version":  "V3",
		"ads":                   map[string]any{},
		"initial_fetch_timeout": "0s",
	}
	b := map[string]any{
		"node": map[string]any{
			"id":       o.NodeID(),
			"cluster":  serviceCluster,
			"metadata": md,
			"locality": map[string]any{},
		},
		"admin": map[string]any{
			"address": map[string]any{"socket_address": map[string]any{"address": "127.0.0.1", "port_value": o.AdminPort}},
		},
		"dynamic_resources": map[string]any{
			"ads_config": map[string]any{
				"api_type":                       "GRPC",
				"transport_api_version":          "V3",
				"set_node_on_first_message_only": true,
				"grpc_services":                  []any{map[string]any{"envoy_grpc": map[string]any{"cluster_name": "xds-grpc"}}},
			},
			"cds_config": ads,
			"lds_config": ads,
		},
		"static_resources": map[string]any{
			"clusters": []any{map[string]any{
				"name":            "xds-grpc",
				"type":            "STATIC",
				"connect_timeout": "1s",
				"load_assignment": map[string]any{
					"cluster_name": "xds-grpc",
					"endpoints": []any{map[string]any{"lb_endpoints": []any{map[string]any{"endpoint": map[string]any{
						"address": map[string]any{"socket_address": map[string]any{"address": host, "port_value": p}},
					}}}}},
				},
				"typed_extension_protocol_options": map[string]any{
					"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": map[string]any{
						"@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
						"explicit_http_config": map[string]any{"http2_protocol_options": map[string]any{
							"connection_keepalive": map[string]any{"interval": "30s", "timeout": "10s"},
						}},
					},
				},
			}},
		},
	}
	return json.MarshalIndent(b, "", "  ")
}
