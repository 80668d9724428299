package main

// push, pull, the registry and the test CA.
//
// The registry is go-containerregistry's pkg/registry (an OCI distribution
// registry, blobs in memory) behind net/http, on loopback only (it has no
// authentication). With --tls-cert/--tls-key it speaks HTTPS.
//
// Who trusts what (read in the pullers' code):
//   - Envoy Gateway v1.9.1 (internal/wasm): the EnvoyExtensionPolicy's
//     `code.image.tls.caCertificateRef` (a Secret or ConfigMap with ca.crt)
//     adds a CA to the system pool. Its InsecureRegistries (skip verification,
//     plain HTTP) exists in the cache options but nothing in v1.9.1 sets it:
//     no insecure registries. go-containerregistry itself falls back to plain
//     HTTP for registries on loopback and RFC 1918 addresses, so an HTTP
//     registry on 127.0.0.1 works too; the test runs HTTPS with a CA of its own.
//   - Istio's agent (pkg/wasm): no CA setting for OCI pulls (the system pool,
//     i.e. the proxy image's); WASM_INSECURE_REGISTRIES (hosts, or *) skips
//     verification, and it retries over plain HTTP when the server answered
//     HTTPS with HTTP ("server gave HTTP response").

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// transport trusts the system roots plus caFile (if given).
func transport(caFile string) (http.RoundTripper, error) {
	t := remote.DefaultTransport.(*http.Transport).Clone()
	if caFile == "" {
		return t, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("--ca-file: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--ca-file %s: no PEM certificate in it", caFile)
	}
	t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return t, nil
}

// Push writes the images to registry (host[:port][/repo]) under their names, by digest, and tags them if tag is set.
// Returns name -> the reference by digest.
func Push(ctx context.Context, images map[string]v1.Image, registryRepo, tag string, opts ...remote.Option) (map[string]string, error) {
	registryRepo = strings.TrimSuffix(registryRepo, "/")
	if registryRepo == "" || strings.Contains(registryRepo, "://") {
		return nil, fmt.Errorf("REGISTRY %q: want host:port/repo (no scheme)", registryRepo)
	}
	opts = append(opts, remote.WithContext(ctx))
	refs := map[string]string{}
	for imageName, img := range images {
		digest, err := img.Digest()
		if err != nil {
			return nil, err
		}
		ref, err := name.NewDigest(fmt.Sprintf("%s/%s@%s", registryRepo, imageName, digest))
		if err != nil {
			return nil, fmt.Errorf("REGISTRY %q: %w", registryRepo, err)
		}
		if err := remote.Write(ref, img, opts...); err != nil {
			return nil, fmt.Errorf("pushing %s: %w", ref, err)
		}
		if tag != "" {
			if err := remote.Tag(ref.Context().Tag(tag), img, opts...); err != nil {
				return nil, fmt.Errorf("tagging %s as %s: %w", ref, tag, err)
			}
		}
		refs[imageName] = ref.String()
	}
	return refs, nil
}

func cmdPush(args []string) error {
	fs := flag.NewFlagSet("push", flag.ContinueOnError)
	dir := fs.String("layout", "build/oci", "the OCI layout `wasm-image build` wrote")
	reg := fs.String("registry", os.Getenv("REGISTRY"), "host:port/repo to push to (default $REGISTRY)")
	tag := fs.String("tag", "", "also tag each artifact (e.g. the filter's version); by digest only if empty")
	caFile := fs.String("ca-file", "", "a CA (PEM) to trust besides the system's")
	plain := fs.Bool("plain-http", false, "plain HTTP (go-containerregistry already falls back to it for loopback and RFC 1918 hosts)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *reg == "" {
		return errors.New("--registry (or REGISTRY=host:port/repo) is required")
	}
	images, err := LayoutImages(*dir)
	if err != nil {
		return err
	}
	t, err := transport(*caFile)
	if err != nil {
		return err
	}
	registryRepo := *reg
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var refs map[string]string
	if *plain {
		refs, err = pushPlain(ctx, images, registryRepo, *tag, t)
	} else {
		refs, err = Push(ctx, images, registryRepo, *tag, remote.WithTransport(t))
	}
	if err != nil {
		return err
	}
	printJSON(refs)
	return nil
}

// pushPlain is Push with name.Insecure references: plain HTTP to any host (--plain-http).
func pushPlain(ctx context.Context, images map[string]v1.Image, registryRepo, tag string, t http.RoundTripper) (map[string]string, error) {
	refs := map[string]string{}
	for imageName, img := range images {
		digest, err := img.Digest()
		if err != nil {
			return nil, err
		}
		ref, err := name.NewDigest(fmt.Sprintf("%s/%s@%s", registryRepo, imageName, digest), name.Insecure)
		if err != nil {
			return nil, fmt.Errorf("REGISTRY %q: %w", registryRepo, err)
		}
		if err := remote.Write(ref, img, remote.WithTransport(t), remote.WithContext(ctx)); err != nil {
			return nil, fmt.Errorf("pushing %s: %w", ref, err)
		}
		if tag != "" {
			if err := remote.Tag(ref.Context().Tag(tag), img, remote.WithTransport(t), remote.WithContext(ctx)); err != nil {
				return nil, err
			}
		}
		refs[imageName] = ref.String()
	}
	return refs, nil
}

// Pulled is what `pull` fetched.
type Pulled struct {
	Ref          string `json:"ref"`
	Digest       string `json:"digest"`
	ArtifactType string `json:"artifact_type,omitempty"`
	File         string `json:"file"`
	ModuleSHA256 string `json:"module_sha256"`
	Size         int    `json:"size"`
}

// Pull fetches ref and returns the module it carries: plugin.wasm of a compat image, or the .so of our artifact.
// A reference by digest is verified by go-containerregistry (the manifest's bytes must hash to it).
func Pull(ctx context.Context, refText string, opts ...remote.Option) ([]byte, Pulled, error) {
	ref, err := name.ParseReference(refText)
	if err != nil {
		return nil, Pulled{}, fmt.Errorf("--ref %q: %w", refText, err)
	}
	img, err := remote.Image(ref, append(opts, remote.WithContext(ctx))...)
	if err != nil {
		return nil, Pulled{}, fmt.Errorf("fetching %s: %w", ref, err)
	}
	digest, err := img.Digest()
	if err != nil {
		return nil, Pulled{}, err
	}
	m, err := img.Manifest()
	if err != nil {
		return nil, Pulled{}, err
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, Pulled{}, err
	}
	out := Pulled{Ref: ref.String(), Digest: digest.String(), ArtifactType: m.ArtifactType}
	var data []byte
	switch {
	case m.ArtifactType == NativeArtifactType:
		for i, l := range m.Layers {
			if l.MediaType == NativeLayerMediaType {
				data, err = readBlob(layers[i])
				out.File = l.Annotations[AnnotationTitle]
				break
			}
		}
		if data == nil && err == nil {
			err = fmt.Errorf("no %s layer in %s", NativeLayerMediaType, ref)
		}
	case len(layers) > 0:
		last := layers[len(layers)-1]
		if mt, _ := last.MediaType(); mt != types.OCILayer && mt != types.DockerLayer {
			return nil, out, fmt.Errorf("%s: last layer is %s, not a tar+gzip layer (not a compat Wasm image)", ref, mt)
		}
		data, err = pluginFromLayer(last)
		out.File = PluginFile
	default:
		err = fmt.Errorf("%s has no layers", ref)
	}
	if err != nil {
		return nil, out, err
	}
	sum := sha256.Sum256(data)
	out.ModuleSHA256 = hex.EncodeToString(sum[:])
	out.Size = len(data)
	return data, out, nil
}

func readBlob(l v1.Layer) ([]byte, error) {
	rc, err := l.Compressed() // as stored: our .so layer is not compressed
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

func pluginFromLayer(l v1.Layer) ([]byte, error) {
	raw, err := readBlob(l)
	if err != nil {
		return nil, err
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("layer is not gzip: %w", err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil, fmt.Errorf("%s not found in the layer", PluginFile)
		}
		if err != nil {
			return nil, err
		}
		if path.Base(h.Name) == PluginFile {
			return io.ReadAll(tr)
		}
	}
}

func cmdPull(args []string) error {
	fs := flag.NewFlagSet("pull", flag.ContinueOnError)
	ref := fs.String("ref", "", "the artifact, e.g. 127.0.0.1:5000/wirelens/wirelens-filter@sha256:...")
	out := fs.String("out", "", "the file to write the module to (a directory: the artifact's file name in it)")
	caFile := fs.String("ca-file", "", "a CA (PEM) to trust besides the system's")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *ref == "" || *out == "" {
		return errors.New("--ref and --out are required")
	}
	t, err := transport(*caFile)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	data, pulled, err := Pull(ctx, *ref, remote.WithTransport(t))
	if err != nil {
		return err
	}
	target := *out
	if st, err := os.Stat(target); err == nil && st.IsDir() {
		target = filepath.Join(target, filepath.Base(pulled.File))
	}
	tmp := target + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, target); err != nil {
		return err
	}
	pulled.File = target
	printJSON(pulled)
	return nil
}

// ---------------------------------------------------------------- the registry

// handlerTransport sends requests straight to an http.Handler (the seeding push: the real registry protocol,
// no socket, no certificate to trust).
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	// What a server hands a handler and a client request may lack: a body (never nil), the request URI.
	in := req.Clone(req.Context())
	if in.Body == nil {
		in.Body = http.NoBody
	}
	in.RequestURI = req.URL.RequestURI()
	in.RemoteAddr = "127.0.0.1:0"
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, in)
	resp := rec.Result()
	resp.Request = req
	return resp, nil
}

func loopback(listen string) error {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("--listen %q: want 127.0.0.1:PORT: %w", listen, err)
	}
	if port == "" {
		return fmt.Errorf("--listen %q: no port", listen)
	}
	ip := net.ParseIP(host)
	if host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("--listen %q: this registry has no authentication, it listens on loopback only", listen)
	}
	return nil
}

func cmdRegistry(args []string) error {
	fs := flag.NewFlagSet("registry", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:5000", "address to listen on (loopback)")
	certFile := fs.String("tls-cert", "", "serve HTTPS with this certificate (PEM)")
	keyFile := fs.String("tls-key", "", "... and this key (PEM)")
	seed := fs.String("seed", "", "push this OCI layout's artifacts into the registry before it is ready")
	repo := fs.String("repo", "wirelens", "the repository prefix the seeded artifacts go under")
	tag := fs.String("tag", "", "also tag the seeded artifacts")
	ready := fs.String("ready-file", "", "write JSON {registry, images: {name: ref@digest}} here once serving")
	quiet := fs.Bool("quiet", false, "do not log each request")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := loopback(*listen); err != nil {
		return err
	}
	if (*certFile == "") != (*keyFile == "") {
		return errors.New("--tls-cert and --tls-key go together")
	}
	var logger *log.Logger
	if *quiet {
		logger = log.New(io.Discard, "", 0)
	} else {
		logger = log.New(os.Stderr, "registry: ", log.LstdFlags)
	}
	handler := registry.New(registry.Logger(logger))
	server := &http.Server{Handler: handler, ReadHeaderTimeout: 30 * time.Second}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", *listen, err)
	}
	address := ln.Addr().String()
	scheme := "http"
	if *certFile != "" {
		cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
		if err != nil {
			return fmt.Errorf("--tls-cert %s / --tls-key %s: %w", *certFile, *keyFile, err)
		}
		server.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		ln = tls.NewListener(ln, server.TLSConfig)
		scheme = "https"
	}
	served := make(chan error, 1)
	go func() { served <- server.Serve(ln) }()

	images := map[string]string{}
	if *seed != "" {
		layoutImages, err := LayoutImages(*seed)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		images, err = Push(ctx, layoutImages, address+"/"+*repo, *tag, remote.WithTransport(handlerTransport{handler}))
		cancel()
		if err != nil {
			return fmt.Errorf("seeding from %s: %w", *seed, err)
		}
	}
	fmt.Fprintf(os.Stderr, "wasm-image registry: serving %s://%s (%d artifacts)\n", scheme, address, len(images))
	for n, ref := range images {
		fmt.Fprintf(os.Stderr, "  %s: %s\n", n, ref)
	}
	if *ready != "" {
		b, _ := json.Marshal(map[string]any{"registry": address, "scheme": scheme, "images": images})
		tmp := *ready + ".tmp"
		if err := os.WriteFile(tmp, b, 0o644); err != nil {
			return err
		}
		if err := os.Rename(tmp, *ready); err != nil {
			return err
		}
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	select {
	case err := <-served:
		return err
	case <-stop:
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return server.Shutdown(ctx)
	}
}

// ---------------------------------------------------------------- test CA

// TestCA writes ca.crt, tls.crt (for hosts: IPs and DNS names) and tls.key into dir.
func TestCA(dir string, hosts []string, validFor time.Duration) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	serial := func() *big.Int {
		n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
		return n
	}
	caTemplate := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "wirelens test CA", Organization: []string{"wirelens tests"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(validFor),
		IsCA: true, BasicConstraintsValid: true, MaxPathLenZero: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	template := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: hosts[0]},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(validFor),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			template.IPAddresses = append(template.IPAddresses, ip)
		} else {
			template.DNSNames = append(template.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, template, caCert, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	files := []struct {
		name, kind string
		der        []byte
		mode       os.FileMode
	}{
		{"ca.crt", "CERTIFICATE", caDER, 0o644},
		{"tls.crt", "CERTIFICATE", der, 0o644},
		{"tls.key", "PRIVATE KEY", keyDER, 0o600},
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.name), pem.EncodeToMemory(&pem.Block{Type: f.kind, Bytes: f.der}), f.mode); err != nil {
			return err
		}
	}
	return nil
}

func cmdTestCA(args []string) error {
	fs := flag.NewFlagSet("testca", flag.ContinueOnError)
	out := fs.String("out", "", "directory for ca.crt, tls.crt, tls.key")
	hosts := fs.String("host", "127.0.0.1,localhost", "the server certificate's names (IPs and DNS names, comma-separated)")
	days := fs.Int("days", 30, "validity in days")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" {
		return errors.New("--out is required")
	}
	var list []string
	for _, h := range strings.Split(*hosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			list = append(list, h)
		}
	}
	if len(list) == 0 {
		return errors.New("--host: at least one name")
	}
	if err := TestCA(*out, list, time.Duration(*days)*24*time.Hour); err != nil {
		return err
	}
	fmt.Println(*out)
	return nil
}
