// Command wasm-image publishes wirelens' modules as OCI artifacts, without Docker.
//
//	wasm-image build    [--wasm F] [--native F|--no-native] [--out DIR]   the OCI layout (reproducible)
//	wasm-image push     --registry HOST:PORT/REPO [--layout DIR] [--tag T] [--ca-file F]
//	wasm-image pull     --ref REF --out FILE [--ca-file F]                plugin.wasm or libwirelens.so, checked
//	wasm-image registry --listen 127.0.0.1:PORT [--tls-cert F --tls-key F] [--seed DIR --repo R] [--ready-file F]
//	wasm-image testca   --out DIR [--host 127.0.0.1]                      a CA and a server certificate, for tests
//
// See image.go for the artifacts' form and why, registry.go for the registry.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
)

func usage() {
	fmt.Fprint(os.Stderr, `usage: wasm-image COMMAND [flags]

  build     write build/wirelens_filter.wasm (and build/native/libwirelens.so) as OCI artifacts
            into an OCI image layout (default build/oci); prints each artifact's digest as JSON
  push      push the layout's artifacts to REGISTRY (host:port/repo): REGISTRY/wirelens-filter, .../wirelens-native
  pull      pull an artifact by reference and write the module it carries (the digest is checked)
  registry  serve an OCI registry (go-containerregistry's pkg/registry) on loopback, optionally seeded
  testca    write a throwaway CA and a server certificate signed by it (ca.crt, tls.crt, tls.key)

Run 'wasm-image COMMAND -h' for a command's flags.
`)
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	commands := map[string]func([]string) error{
		"build": cmdBuild, "push": cmdPush, "pull": cmdPull, "registry": cmdRegistry, "testca": cmdTestCA,
	}
	command, ok := commands[os.Args[1]]
	if !ok {
		if os.Args[1] != "-h" && os.Args[1] != "--help" && os.Args[1] != "help" {
			fmt.Fprintf(os.Stderr, "wasm-image: unknown command %q\n\n", os.Args[1])
		}
		usage()
		os.Exit(2)
	}
	if err := command(os.Args[2:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintf(os.Stderr, "wasm-image %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func printJSON(v any) {
	out := json.NewEncoder(os.Stdout)
	out.SetIndent("", "  ")
	_ = out.Encode(v)
}

func cmdBuild(args []string) error {
	fs := flag.NewFlagSet("build", flag.ContinueOnError)
	wasm := fs.String("wasm", "build/wirelens_filter.wasm", "the proxy-wasm module")
	native := fs.String("native", "build/native/libwirelens.so", "the Envoy dynamic module (skipped if the file does not exist)")
	noNative := fs.Bool("no-native", false, "build only the wasm artifact")
	out := fs.String("out", "build/oci", "the OCI image layout to write (replaced)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	so := *native
	if *noNative {
		so = ""
	} else if _, err := os.Stat(so); err != nil {
		if isDefault(fs, "native") {
			fmt.Fprintf(os.Stderr, "wasm-image build: --native %s: not built, the layout has the wasm artifact only\n", so)
			so = ""
		} else {
			return fmt.Errorf("--native %s: %w", so, err)
		}
	}
	built, err := BuildLayout(*out, *wasm, so)
	if err != nil {
		return err
	}
	printJSON(map[string]any{"layout": *out, "artifacts": built})
	return nil
}

func isDefault(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			set = true
		}
	})
	return !set
}
