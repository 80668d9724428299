# logship (collector/cmd/logship) as an image, for the sidecar of logship-sidecar.yaml.
# Build context: the repository root.
#
#   docker buildx build -f deploy/kubernetes-tier/durable/sidecar/logship.Dockerfile \
#     -t REGISTRY/wirelens/logship:0.1.0 --push .
#   kustomize edit set image wirelens/logship=REGISTRY/wirelens/logship:0.1.0   # in your overlay
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
COPY internal/ internal/
COPY collector/ collector/
RUN CGO_ENABLED=0 go build -trimpath -o /logship ./collector/cmd/logship

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /logship /logship
USER 10001:10001
EXPOSE 13135
ENTRYPOINT ["/logship"]
