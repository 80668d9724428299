// Command istiod-harness runs istiod's own config generation (istio.io/istio
// pilot/test/xds, the real translation over an in-memory Kubernetes client)
// over YAML files and serves the result to a real Envoy over ADS; and writes
// the Envoy bootstrap such an Envoy needs. See tools/istiod-harness/README.md.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/wirelens/wirelens/tools/istiod-harness/harness"
	"istio.io/istio/pkg/log"
)

func usage() {
	fmt.Fprint(os.Stderr, `usage:
  istiod-harness serve --xds 127.0.0.1:PORT --config-dir DIR [--mesh-config FILE] [--ready-file FILE]
                       [--status 127.0.0.1:PORT] [--agent-wasm-cache DIR [--insecure-registries host:port,...]]
  istiod-harness bootstrap --xds 127.0.0.1:PORT --node-type router|sidecar --namespace NS --name POD
                       [--labels k=v,...] [--admin-port N] [--ip 192.0.2.1] --out FILE
`)
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "bootstrap":
		err = bootstrap(os.Args[2:])
	case "-h", "--help", "help":
		usage()
		return
	default:
		usage()
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "istiod-harness: %v\n", err)
		os.Exit(1)
	}
}

func configureLog() {
	o := log.DefaultOptions()
	o.OutputPaths = []string{"stderr"}
	o.ErrorOutputPaths = []string{"stderr"}
	_ = log.Configure(o)
}

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	xdsAddr := fs.String("xds", "", "address to serve ADS on (plaintext gRPC), e.g. 127.0.0.1:15010; port 0 picks one")
	configDir := fs.String("config-dir", "", "directory of *.yaml: Istio resources and Kubernetes objects (watched)")
	meshFile := fs.String("mesh-config", "", "mesh config: Helm values (meshConfig:) or a plain MeshConfig (watched)")
	readyFile := fs.String("ready-file", "", "written (JSON) once ADS is served")
	status := fs.String("status", "", "optional HTTP address: GET /acks (ACK/NACK per proxy and type), /debug/ (istiod's)")
	wasmCache := fs.String("agent-wasm-cache", "", "rewrite remote (oci://, http) Wasm code in ECDS as istio-agent does, pulling into DIR")
	insecure := fs.String("insecure-registries", "", "with --agent-wasm-cache: registries pulled over plain HTTP / unverified TLS (host:port,...)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("serve: unexpected arguments %v", fs.Args())
	}
	if *xdsAddr == "" {
		return fmt.Errorf("serve: --xds is required")
	}
	if *configDir == "" {
		return fmt.Errorf("serve: --config-dir is required")
	}
	if st, err := os.Stat(*configDir); err != nil || !st.IsDir() {
		return fmt.Errorf("serve: --config-dir %s: not a directory (%v)", *configDir, err)
	}
	configureLog()
	for _, s := range harness.Switched {
		log.Infof("istiod harness: turned off for upstream Envoy: %s", s)
	}
	loaded, err := harness.LoadDir(*configDir)
	if err != nil {
		return err
	}
	m, err := harness.LoadMeshConfig(*meshFile)
	if err != nil {
		return err
	}
	opts := harness.Options{Loaded: loaded, Mesh: m, XDS: *xdsAddr, Status: *status}
	if *wasmCache != "" {
		opts.AgentWasm = &harness.AgentWasmOptions{CacheDir: *wasmCache}
		if *insecure != "" {
			opts.AgentWasm.InsecureRegistries = strings.Split(*insecure, ",")
		}
	}
	srv, err := harness.Start(opts)
	if err != nil {
		return err
	}
	defer srv.Close()
	log.Infof("istiod harness: %d configs, %d Kubernetes objects from %s", len(loaded.Configs), len(loaded.KubeObjects), *configDir)

	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	defer w.Close()
	if err := w.Add(*configDir); err != nil {
		return fmt.Errorf("watch --config-dir %s: %v", *configDir, err)
	}
	if *meshFile != "" {
		// istiod reads the mesh config once here: a change is reported, not applied.
		if err := w.Add(filepath.Dir(*meshFile)); err != nil {
			return fmt.Errorf("watch --mesh-config %s: %v", *meshFile, err)
		}
	}

	if *readyFile != "" {
		ready := map[string]string{"xds": srv.XDS.String()}
		if srv.Status != nil {
			ready["status"] = srv.Status.String()
		}
		b, _ := json.Marshal(ready)
		tmp := *readyFile + ".tmp"
		if err := os.WriteFile(tmp, b, 0o644); err != nil {
			return fmt.Errorf("--ready-file: %v", err)
		}
		if err := os.Rename(tmp, *readyFile); err != nil {
			return fmt.Errorf("--ready-file: %v", err)
		}
	}
	log.Infof("istiod harness: serving; ready")

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	// Changes are collected for a short quiet period (an editor or a
	// write-then-rename makes several events) and then applied at once.
	var pending <-chan time.Time
	absMesh, _ := filepath.Abs(*meshFile)
	for {
		select {
		case s := <-sig:
			log.Infof("istiod harness: %v, stopping", s)
			return nil
		case err := <-w.Errors:
			log.Warnf("istiod harness: watch error: %v", err)
		case ev := <-w.Events:
			if abs, _ := filepath.Abs(ev.Name); *meshFile != "" && abs == absMesh {
				log.Warnf("istiod harness: %s changed: the mesh config is read at start only; restart to apply it", *meshFile)
				continue
			}
			if filepath.Dir(ev.Name) != filepath.Clean(*configDir) {
				continue
			}
			pending = time.After(100 * time.Millisecond)
		case <-pending:
			pending = nil
			l, err := harness.LoadDir(*configDir)
			if err != nil {
				log.Errorf("istiod harness: config dir change rejected, keeping the previous config: %v", err)
				continue
			}
			changes, err := srv.Apply(l)
			for _, c := range changes {
				log.Infof("istiod harness: %s", c)
			}
			if err != nil {
				log.Errorf("istiod harness: applying the config dir: %v", err)
			}
			if len(changes) == 0 && err == nil {
				log.Infof("istiod harness: config dir changed on disk, no resource changed")
			}
		}
	}
}

func bootstrap(args []string) error {
	fs := flag.NewFlagSet("bootstrap", flag.ContinueOnError)
	var o harness.BootstrapOptions
	fs.StringVar(&o.XDS, "xds", "", "the harness's ADS address host:port")
	fs.StringVar(&o.NodeType, "node-type", "", "router (a gateway) or sidecar")
	fs.StringVar(&o.Namespace, "namespace", "", "the pod's namespace")
	fs.StringVar(&o.Name, "name", "", "the pod's name")
	labels := fs.String("labels", "", "pod labels k=v,k=v (a Gateway's selector, a WasmPlugin's selector match them)")
	fs.IntVar(&o.AdminPort, "admin-port", 0, "Envoy admin port on 127.0.0.1 (0: Envoy picks; see --admin-address-path)")
	fs.StringVar(&o.IP, "ip", harness.DefaultInstanceIP, "the instance IP istiod sees (identity only; not a ServiceEntry endpoint's address)")
	fs.StringVar(&o.Interception, "interception", "", "sidecar INTERCEPTION_MODE (default NONE)")
	out := fs.String("out", "", "file to write (JSON, Envoy reads it with -c)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("bootstrap: unexpected arguments %v", fs.Args())
	}
	if *out == "" {
		return fmt.Errorf("bootstrap: --out is required")
	}
	l, err := harness.ParseLabels(*labels)
	if err != nil {
		return err
	}
	o.Labels = l
	b, err := harness.Bootstrap(o)
	if err != nil {
		return err
	}
	if err := os.WriteFile(*out, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("--out: %v", err)
	}
	return nil
}
