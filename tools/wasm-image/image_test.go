package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"io"
	"io/fs"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// The inputs: the real builds if they are there (make filter, make native), else small stand-ins.
func inputs(t *testing.T) (wasm, so string) {
	t.Helper()
	root := filepath.Join("..", "..", "build")
	wasm, so = filepath.Join(root, "wirelens_filter.wasm"), filepath.Join(root, "native", "libwirelens.so")
	dir := t.TempDir()
	if _, err := os.Stat(wasm); err != nil {
		wasm = filepath.Join(dir, "module.wasm")
		mustWrite(t, wasm, []byte("\x00asm\x01\x00\x00\x00"))
	}
	if _, err := os.Stat(so); err != nil {
		so = filepath.Join(dir, "libwirelens.so")
		mustWrite(t, so, append([]byte("\x7fELF"), bytes.Repeat([]byte{1}, 64)...))
	}
	return wasm, so
}

func mustWrite(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// tree is every file of a layout with its bytes' sha256.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		sum := sha256.Sum256(data)
		files[rel] = hex.EncodeToString(sum[:])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// Two builds from the same module bytes, in different directories, from copies with other names and times:
// the same digests and the same layout, file for file.
func TestBuildTwiceGivesTheSameDigests(t *testing.T) {
	wasm, so := inputs(t)
	first, err := BuildLayout(filepath.Join(t.TempDir(), "oci"), wasm, so)
	if err != nil {
		t.Fatal(err)
	}
	// Copies elsewhere, with another name and a modification time of now: neither may matter.
	other := t.TempDir()
	for _, p := range []*string{&wasm, &so} {
		data, err := os.ReadFile(*p)
		if err != nil {
			t.Fatal(err)
		}
		copyPath := filepath.Join(other, "copy-"+filepath.Base(*p))
		mustWrite(t, copyPath, data)
		later := time.Now().Add(time.Hour)
		if err := os.Chtimes(copyPath, later, later); err != nil {
			t.Fatal(err)
		}
		*p = copyPath
	}
	time.Sleep(1100 * time.Millisecond) // not synchronization: a build a second later must not differ (no clock in it)
	dirA, dirB := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	if _, err := BuildLayout(dirA, wasm, so); err != nil {
		t.Fatal(err)
	}
	second, err := BuildLayout(dirB, wasm, so)
	if err != nil {
		t.Fatal(err)
	}
	for i := range first {
		if first[i] != second[i] {
			t.Errorf("%s: first build %+v, second build %+v", first[i].Name, first[i], second[i])
		}
	}
	a, b := tree(t, dirA), tree(t, dirB)
	if len(a) != len(b) {
		t.Fatalf("layouts differ: %v vs %v", a, b)
	}
	for name, sum := range a {
		if b[name] != sum {
			t.Errorf("%s differs between two builds: %s vs %s", name, sum, b[name])
		}
	}
	t.Logf("wirelens-filter %s, wirelens-native %s", first[0].Digest, first[1].Digest)
}

// What the pullers read: the compat image's last layer is OCI tar+gzip and holds plugin.wasm with the module's
// bytes; the native artifact carries the .so under its title.
func TestArtifactsHaveTheFormThePullersRead(t *testing.T) {
	wasm, so := inputs(t)
	dir := filepath.Join(t.TempDir(), "oci")
	if _, err := BuildLayout(dir, wasm, so); err != nil {
		t.Fatal(err)
	}
	images, err := LayoutImages(dir)
	if err != nil {
		t.Fatal(err)
	}
	filter := images[FilterName]
	m, err := filter.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.MediaType != "application/vnd.oci.image.manifest.v1+json" || len(m.Layers) != 1 ||
		m.Layers[0].MediaType != "application/vnd.oci.image.layer.v1.tar+gzip" {
		t.Fatalf("not the compat form: %+v", m)
	}
	layers, _ := filter.Layers()
	got, err := pluginFromLayer(layers[len(layers)-1])
	if err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(wasm)
	if !bytes.Equal(got, want) {
		t.Fatalf("plugin.wasm in the layer (%d bytes) is not %s (%d bytes)", len(got), wasm, len(want))
	}
	native := images[NativeName]
	nm, _ := native.Manifest()
	if nm.ArtifactType != NativeArtifactType || nm.Config.MediaType != EmptyMediaType ||
		nm.Layers[0].Annotations[AnnotationTitle] != NativeFile {
		t.Fatalf("native artifact: %+v", nm)
	}
}

func TestBuildRefusesWhatIsNotAModule(t *testing.T) {
	dir := t.TempDir()
	notWasm := filepath.Join(dir, "x.wasm")
	mustWrite(t, notWasm, []byte("#!/bin/sh\n"))
	_, err := BuildLayout(filepath.Join(dir, "oci"), notWasm, "")
	if err == nil || !strings.Contains(err.Error(), "not a WebAssembly module") || !strings.Contains(err.Error(), notWasm) {
		t.Fatalf("want an error naming the file and what is wrong, got %v", err)
	}
}

// A registry (pkg/registry) over TLS with a CA made for this test: push the layout, pull each artifact by digest,
// the bytes are the module's; without the CA the pull fails on the certificate.
func TestRegistryRoundTripOverTLS(t *testing.T) {
	wasm, so := inputs(t)
	dir := filepath.Join(t.TempDir(), "oci")
	built, err := BuildLayout(dir, wasm, so)
	if err != nil {
		t.Fatal(err)
	}
	images, err := LayoutImages(dir)
	if err != nil {
		t.Fatal(err)
	}
	certs := t.TempDir()
	if err := TestCA(certs, []string{"127.0.0.1"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(certs, "tls.crt"), filepath.Join(certs, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	server := httptest.NewUnstartedServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	server.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	server.StartTLS()
	defer server.Close()
	host := strings.TrimPrefix(server.URL, "https://")

	trusting, err := transport(filepath.Join(certs, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	refs, err := Push(ctx, images, host+"/wirelens", "0.1.0", remote.WithTransport(trusting))
	if err != nil {
		t.Fatal(err)
	}
	sources := map[string]string{FilterName: wasm, NativeName: so}
	for _, b := range built {
		ref := refs[b.Name]
		if !strings.HasSuffix(ref, "@"+b.Digest) {
			t.Fatalf("%s pushed as %s, want the digest %s", b.Name, ref, b.Digest)
		}
		data, pulled, err := Pull(ctx, ref, remote.WithTransport(trusting))
		if err != nil {
			t.Fatalf("pull %s: %v", ref, err)
		}
		want, _ := os.ReadFile(sources[b.Name])
		if !bytes.Equal(data, want) || pulled.Digest != b.Digest || pulled.ModuleSHA256 != b.ModuleSHA256 {
			t.Fatalf("pulled %s: %+v (%d bytes), want %s's %d bytes, digest %s", ref, pulled, len(data),
				sources[b.Name], len(want), b.Digest)
		}
		// The tag names the same digest.
		_, byTag, err := Pull(ctx, host+"/wirelens/"+b.Name+":0.1.0", remote.WithTransport(trusting))
		if err != nil || byTag.Digest != b.Digest {
			t.Fatalf("by tag: %+v, %v", byTag, err)
		}
		t.Logf("%s: pushed and pulled %s, %d bytes, module sha256 %s", b.Name, ref, len(data), pulled.ModuleSHA256)
	}
	plain, _ := transport("")
	if _, _, err := Pull(ctx, refs[FilterName], remote.WithTransport(plain)); err == nil ||
		!strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a pull that does not trust the test CA must fail on the certificate, got %v", err)
	}
}

func TestRegistryListensOnLoopbackOnly(t *testing.T) {
	for _, bad := range []string{"0.0.0.0:5000", "10.0.0.1:5000", ":5000", "127.0.0.1"} {
		if err := loopback(bad); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("--listen %s: want an error naming it, got %v", bad, err)
		}
	}
	if err := loopback("127.0.0.1:0"); err != nil {
		t.Error(err)
	}
}

// The registry command's seeding path: the layout pushed into the handler in-process, then read back over it.
func TestSeedingThroughTheHandler(t *testing.T) {
	wasm, so := inputs(t)
	dir := filepath.Join(t.TempDir(), "oci")
	built, err := BuildLayout(dir, wasm, so)
	if err != nil {
		t.Fatal(err)
	}
	images, err := LayoutImages(dir)
	if err != nil {
		t.Fatal(err)
	}
	handler := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	refs, err := Push(ctx, images, "127.0.0.1:5000/wirelens", "", remote.WithTransport(handlerTransport{handler}))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range built {
		_, pulled, err := Pull(ctx, refs[b.Name], remote.WithTransport(handlerTransport{handler}))
		if err != nil || pulled.Digest != b.Digest || pulled.ModuleSHA256 != b.ModuleSHA256 {
			t.Fatalf("%s: %+v, %v", b.Name, pulled, err)
		}
	}
}
