"""Ways to run wirelens: the local stack, Envoy Gateway, Istio, a ClickHouse cluster, Kubernetes."""
