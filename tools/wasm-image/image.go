package main

// The two artifacts, built byte for byte the same from the same inputs.
//
// wirelens-filter (the proxy-wasm module): the "compat" variant of the Wasm
// image spec. An OCI image manifest, an OCI image config, and ONE layer of
// media type application/vnd.oci.image.layer.v1.tar+gzip holding one file,
// plugin.wasm. Why this variant and not the application/vnd.module.wasm.*
// ("oci") one: both pullers (Istio's pkg/wasm/imagefetcher.go and Envoy
// Gateway v1.9.1's internal/wasm/imagefetcher.go, the same code) try the
// compat variant first (the LAST layer must be an OCI or Docker tar+gzip layer
// with a file whose base name is plugin.wasm), and only then the oci variant,
// which they accept only with exactly two layers, one of them
// application/vnd.module.wasm.content.layer.v1+wasm. The compat image is also
// an ordinary image every registry, mirror and scanner accepts, and what the
// old Dockerfile (FROM scratch + plugin.wasm) produced.
//
// wirelens-native (the Envoy dynamic module, libwirelens.so): no puller
// exists (Envoy Gateway loads dynamic modules from a path on the proxy,
// Istio not at all), so it is an OCI 1.1 artifact of our own: an image
// manifest with artifactType application/vnd.wirelens.envoy.dynamic-module.v1,
// the empty config (application/vnd.oci.empty.v1+json, "{}"), and one
// uncompressed layer (application/vnd.wirelens.envoy.dynamic-module.layer.v1+so)
// whose org.opencontainers.image.title annotation is libwirelens.so, which is
// the name `oras pull` writes it under; `wasm-image pull` does the same.
//
// Reproducible: the tar entry has a fixed name, mode, owner and time (the Unix
// epoch), the gzip header carries no name and no time, compression level is
// fixed, the JSON documents are Go structs (fixed key order), and no host name,
// user, path or build time goes into any of them. The same .wasm/.so bytes give
// the same digests on every machine (given the same Go compress/flate; the
// toolchain is pinned by go.mod).

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	// The image names (the layout's org.opencontainers.image.ref.name, the repository under REGISTRY).
	FilterName = "wirelens-filter"
	NativeName = "wirelens-native"

	// The file both pullers look for in the compat layer.
	PluginFile = "plugin.wasm"
	NativeFile = "libwirelens.so"

	NativeArtifactType   = "application/vnd.wirelens.envoy.dynamic-module.v1"
	NativeLayerMediaType = "application/vnd.wirelens.envoy.dynamic-module.layer.v1+so"
	EmptyMediaType       = "application/vnd.oci.empty.v1+json"

	AnnotationTitle  = "org.opencontainers.image.title"
	AnnotationRef    = "org.opencontainers.image.ref.name"
	AnnotationSource = "org.opencontainers.image.source"
	AnnotationDesc   = "org.opencontainers.image.description"
	// What the .so was built for: it is a Linux shared object for one CPU and one Envoy ABI.
	AnnotationPlatform = "io.wirelens.dynamic-module.platform"
	AnnotationEnvoy    = "io.wirelens.dynamic-module.envoy"

	Source = "https://github.com/wirelens/wirelens"
)

// NativePlatform and NativeEnvoy describe what the .so runs on (the build here: Linux x86-64, Envoy 1.40's ABI).
var (
	NativePlatform = "linux/amd64"
	NativeEnvoy    = "1.40"
)

// epoch is the time of every tar entry: fixed, so the layer's bytes depend only on the module.
var epoch = time.Unix(0, 0).UTC()

type blob struct {
	mediaType types.MediaType
	data      []byte
}

func (b blob) hash() v1.Hash {
	sum := sha256.Sum256(b.data)
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])}
}

func (b blob) descriptor(annotations map[string]string) v1.Descriptor {
	return v1.Descriptor{MediaType: b.mediaType, Size: int64(len(b.data)), Digest: b.hash(), Annotations: annotations}
}

// artifact is a manifest with its config and layers, every byte of which we made: partial.CompressedImageCore.
type artifact struct {
	manifest []byte
	config   blob
	layers   []blob
}

func (a *artifact) RawConfigFile() ([]byte, error)      { return a.config.data, nil }
func (a *artifact) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }
func (a *artifact) RawManifest() ([]byte, error)        { return a.manifest, nil }
func (a *artifact) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	for _, l := range append([]blob{a.config}, a.layers...) {
		if l.hash() == h {
			return compressedBlob{l}, nil
		}
	}
	return nil, fmt.Errorf("no blob %s in this artifact", h)
}

type compressedBlob struct{ b blob }

func (c compressedBlob) Digest() (v1.Hash, error) { return c.b.hash(), nil }
func (c compressedBlob) Compressed() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(c.b.data)), nil
}
func (c compressedBlob) Size() (int64, error)                { return int64(len(c.b.data)), nil }
func (c compressedBlob) MediaType() (types.MediaType, error) { return c.b.mediaType, nil }

func (a *artifact) image() (v1.Image, error) { return partial.CompressedToImage(a) }

func marshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only our own structs: cannot fail
	}
	return b
}

// pluginLayer is the compat layer: a gzip'd tar with the one file plugin.wasm. Returns the layer and its
// uncompressed (tar) digest, the config's diff_id.
func pluginLayer(module []byte) (blob, v1.Hash, error) {
	var tarBytes bytes.Buffer
	tw := tar.NewWriter(&tarBytes)
	header := &tar.Header{
		Typeflag: tar.TypeReg, Name: PluginFile, Size: int64(len(module)), Mode: 0o444,
		ModTime: epoch, Uid: 0, Gid: 0, Format: tar.FormatUSTAR,
	}
	if err := tw.WriteHeader(header); err != nil {
		return blob{}, v1.Hash{}, err
	}
	if _, err := tw.Write(module); err != nil {
		return blob{}, v1.Hash{}, err
	}
	if err := tw.Close(); err != nil {
		return blob{}, v1.Hash{}, err
	}
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	if err != nil {
		return blob{}, v1.Hash{}, err
	}
	// gzip.Header zero value: no name, no comment, ModTime 0 (written as 0), OS 255 (unknown).
	if _, err := zw.Write(tarBytes.Bytes()); err != nil {
		return blob{}, v1.Hash{}, err
	}
	if err := zw.Close(); err != nil {
		return blob{}, v1.Hash{}, err
	}
	diffID := blob{data: tarBytes.Bytes()}.hash()
	return blob{mediaType: types.OCILayer, data: gz.Bytes()}, diffID, nil
}

// imageConfig is the OCI image config of the compat image: no created time, no history, no host.
type imageConfig struct {
	Architecture string          `json:"architecture"`
	OS           string          `json:"os"`
	Config       struct{}        `json:"config"`
	RootFS       imageConfigRoot `json:"rootfs"`
}

type imageConfigRoot struct {
	Type    string    `json:"type"`
	DiffIDs []v1.Hash `json:"diff_ids"`
}

type manifest struct {
	SchemaVersion int64             `json:"schemaVersion"`
	MediaType     types.MediaType   `json:"mediaType"`
	ArtifactType  string            `json:"artifactType,omitempty"`
	Config        v1.Descriptor     `json:"config"`
	Layers        []v1.Descriptor   `json:"layers"`
	Annotations   map[string]string `json:"annotations,omitempty"` // encoding/json sorts map keys
}

// FilterArtifact is the compat Wasm image of a proxy-wasm module.
func FilterArtifact(module []byte) (*artifact, error) {
	if len(module) < 8 || !bytes.Equal(module[:4], []byte("\x00asm")) {
		return nil, fmt.Errorf("not a WebAssembly module (no \\0asm magic)")
	}
	layer, diffID, err := pluginLayer(module)
	if err != nil {
		return nil, err
	}
	// The module runs in any Envoy on any CPU: the Wasm OCI convention's platform, wasip1/wasm.
	config := blob{mediaType: types.OCIConfigJSON, data: marshal(imageConfig{
		Architecture: "wasm", OS: "wasip1",
		RootFS: imageConfigRoot{Type: "layers", DiffIDs: []v1.Hash{diffID}},
	})}
	m := manifest{
		SchemaVersion: 2, MediaType: types.OCIManifestSchema1,
		Config: config.descriptor(nil),
		Layers: []v1.Descriptor{layer.descriptor(nil)},
		Annotations: map[string]string{
			AnnotationTitle:  FilterName,
			AnnotationDesc:   "wirelens proxy-wasm filter for Envoy (plugin.wasm): Istio WasmPlugin, Envoy Gateway",
			AnnotationSource: Source,
		},
	}
	return &artifact{manifest: marshal(m), config: config, layers: []blob{layer}}, nil
}

// NativeArtifact is the OCI 1.1 artifact of the Envoy dynamic module.
func NativeArtifact(so []byte) (*artifact, error) {
	if len(so) < 4 || !bytes.Equal(so[:4], []byte("\x7fELF")) {
		return nil, fmt.Errorf("not an ELF shared object (no \\x7fELF magic)")
	}
	config := blob{mediaType: EmptyMediaType, data: []byte("{}")}
	layer := blob{mediaType: NativeLayerMediaType, data: so}
	configDescriptor := config.descriptor(nil)
	configDescriptor.Data = config.data // the OCI 1.1 empty descriptor carries its two bytes inline
	m := manifest{
		SchemaVersion: 2, MediaType: types.OCIManifestSchema1, ArtifactType: NativeArtifactType,
		Config: configDescriptor,
		Layers: []v1.Descriptor{layer.descriptor(map[string]string{AnnotationTitle: NativeFile})},
		Annotations: map[string]string{
			AnnotationTitle:    NativeName,
			AnnotationDesc:     "wirelens as an Envoy dynamic module (libwirelens.so): Envoy's dynamic_modules filter",
			AnnotationSource:   Source,
			AnnotationPlatform: NativePlatform,
			AnnotationEnvoy:    NativeEnvoy,
		},
	}
	return &artifact{manifest: marshal(m), config: config, layers: []blob{layer}}, nil
}

// Built is one artifact of a layout: its name, manifest digest, and the digest of the module inside.
type Built struct {
	Name         string `json:"name"`
	Digest       string `json:"digest"`        // the manifest's: what a reference @sha256:... and EG's/Istio's sha256 name
	ModuleSHA256 string `json:"module_sha256"` // the .wasm's / .so's own sha256: what Envoy checks after the pull
	Size         int64  `json:"size"`
}

// BuildLayout writes the artifacts into an OCI image layout at dir, replacing what is there (written
// beside it, then renamed: a reader sees the old layout or the new one). wasm is required, so is optional.
func BuildLayout(dir, wasmPath, soPath string) ([]Built, error) {
	type input struct {
		name, path string
		make       func([]byte) (*artifact, error)
	}
	inputs := []input{{FilterName, wasmPath, FilterArtifact}}
	if soPath != "" {
		inputs = append(inputs, input{NativeName, soPath, NativeArtifact})
	}
	index := v1.ImageIndex(empty.Index)
	var built []Built
	for _, in := range inputs {
		data, err := os.ReadFile(in.path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", in.name, err)
		}
		a, err := in.make(data)
		if err != nil {
			return nil, fmt.Errorf("%s (%s): %w", in.name, in.path, err)
		}
		img, err := a.image()
		if err != nil {
			return nil, err
		}
		digest, err := img.Digest()
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(data)
		desc := v1.Descriptor{MediaType: types.OCIManifestSchema1, Annotations: map[string]string{AnnotationRef: in.name}}
		if in.name == NativeName {
			desc.ArtifactType = NativeArtifactType
		}
		index = mutate.AppendManifests(index, mutate.IndexAddendum{Add: img, Descriptor: desc})
		built = append(built, Built{Name: in.name, Digest: digest.String(), ModuleSHA256: hex.EncodeToString(sum[:]),
			Size: int64(len(a.manifest))})
	}
	parent := filepath.Dir(filepath.Clean(dir))
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(parent, ".oci-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	if _, err := layout.Write(tmp, index); err != nil {
		return nil, fmt.Errorf("writing the OCI layout: %w", err)
	}
	// Directory modes from MkdirTemp are 0700; the layout is for everyone to read.
	if err := os.Chmod(tmp, 0o755); err != nil {
		return nil, err
	}
	old := tmp + ".old"
	if _, err := os.Stat(dir); err == nil {
		if err := os.Rename(dir, old); err != nil {
			return nil, err
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		return nil, err
	}
	if err := os.RemoveAll(old); err != nil {
		return nil, err
	}
	return built, nil
}

// LayoutImages reads back a layout's images by name (its ref.name annotations).
func LayoutImages(dir string) (map[string]v1.Image, error) {
	path, err := layout.FromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("%s is not an OCI layout (run `make wasm-image`): %w", dir, err)
	}
	index, err := path.ImageIndex()
	if err != nil {
		return nil, err
	}
	im, err := index.IndexManifest()
	if err != nil {
		return nil, err
	}
	images := map[string]v1.Image{}
	for _, desc := range im.Manifests {
		name := desc.Annotations[AnnotationRef]
		if name == "" {
			continue
		}
		img, err := index.Image(desc.Digest)
		if err != nil {
			return nil, fmt.Errorf("%s in %s: %w", name, dir, err)
		}
		images[name] = img
	}
	if images[FilterName] == nil {
		return nil, fmt.Errorf("%s has no %s image", dir, FilterName)
	}
	return images, nil
}
