# The wirelens filter as an OCI image, in the form Istio (WasmPlugin `url:
# oci://...`) and Envoy Gateway (EnvoyExtensionPolicy wasm code `type: Image`)
# pull: the "compat" variant of the Wasm image spec — one gzip'd tar layer
# holding `plugin.wasm`, nothing else (no OS, no entrypoint). Both fetchers
# read the image's last layer and take the file named plugin.wasm from it.
#
# Build context: build/ (after `make filter`, it holds wirelens_filter.wasm).
#
#   make filter
#   docker buildx build -f deploy/kubernetes/images/wasm.Dockerfile \
#     --platform linux/amd64 \
#     --output type=image,name=REGISTRY/wirelens/wirelens-filter:0.1.0,push=true,compression=gzip,oci-mediatypes=true \
#     build/
#
# `compression=gzip` matters: Istio and Envoy Gateway read the layer as tar+gzip
# (a zstd layer is refused). The module is the same on every CPU: one platform.
# Then put the pushed digest into the manifests (Istio verifies it):
#   deploy/istio/render.py --image oci://REGISTRY/wirelens/wirelens-filter:0.1.0 --sha256 <digest hex>
#
# Without Docker, the same image with `crane` (go-containerregistry):
#   mkdir -p /tmp/wasm && cp build/wirelens_filter.wasm /tmp/wasm/plugin.wasm
#   tar -C /tmp/wasm -czf /tmp/wasm-layer.tar.gz plugin.wasm
#   crane append --new_layer /tmp/wasm-layer.tar.gz --new_tag REGISTRY/wirelens/wirelens-filter:0.1.0 --oci-empty-base
FROM scratch
LABEL org.opencontainers.image.title="wirelens-filter" \
      org.opencontainers.image.description="wirelens proxy-wasm filter (plugin.wasm) for Envoy, Istio WasmPlugin, Envoy Gateway" \
      org.opencontainers.image.source="wirelens filters/"
COPY wirelens_filter.wasm ./plugin.wasm
