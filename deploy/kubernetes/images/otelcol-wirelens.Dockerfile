# The project's own Collector distribution (collector/builder-config.yaml,
# built with ocb) as an image, instead of the upstream
# otel/opentelemetry-collector-contrib image deploy/kubernetes uses by default.
# Same components, nothing else; same command line (--config=...).
#
# Build context: the repository root.
#
#   docker buildx build -f deploy/kubernetes/images/otelcol-wirelens.Dockerfile \
#     -t REGISTRY/wirelens/otelcol-wirelens:0.161.0 --push .
#   cd deploy/kubernetes && kustomize edit set image \
#     otel/opentelemetry-collector-contrib=REGISTRY/wirelens/otelcol-wirelens:0.161.0
FROM golang:1.26 AS build
ARG OCB_VERSION=v0.161.0
WORKDIR /src
COPY collector/builder-config.yaml collector/builder-config.yaml
RUN go install go.opentelemetry.io/collector/cmd/builder@${OCB_VERSION} \
 && CGO_ENABLED=0 builder --config collector/builder-config.yaml

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /src/build/otelcol-wirelens/otelcol-wirelens /otelcol-wirelens
USER 10001:10001
EXPOSE 4317 13133 8888
ENTRYPOINT ["/otelcol-wirelens"]
