#!/usr/bin/env bash
# Regenerates everything derived from proto/wirelens/**/*.proto:
#   build/proto/wirelens.pb        descriptor set (--include_imports --include_source_info)
#   services/gen/wirelens/...      Go code (protoc-gen-go + protoc-gen-go-grpc, pinned below)
#   build/opmap.json               the filter's operation map (proto/opmap.py)
#
# Usage: proto/gen.sh            regenerate
#        proto/gen.sh --check    regenerate into a temporary directory and fail if the
#                                committed Go code under services/gen differs
#
# protoc is the one in the project venv (grpcio-tools); the Go plugins are installed
# into <repo>/bin at the pinned versions when missing or at another version.
set -euo pipefail

PROTOC_GEN_GO_VERSION=v1.36.12      # google.golang.org/protobuf/cmd/protoc-gen-go
PROTOC_GEN_GO_GRPC_VERSION=v1.6.2   # google.golang.org/grpc/cmd/protoc-gen-go-grpc
GO_MODULE=github.com/wirelens/wirelens/services

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

CHECK=0
case "${1:-}" in
  --check) CHECK=1 ;;
  "") ;;
  *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"
[[ -x "$PYTHON" ]] || { echo "gen.sh: $PYTHON not found (make venv first)" >&2; exit 1; }

# Project-local Go caches and plugin directory (callers may override the caches).
export GOMODCACHE="${GOMODCACHE:-$ROOT/.cache/go/mod}"
export GOCACHE="${GOCACHE:-$ROOT/.cache/go/build}"
export GOFLAGS="${GOFLAGS:--modcacherw}"
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"
export GOBIN="$ROOT/bin"

# ensure_plugin BINARY PACKAGE VERSION VERSION_LINE
ensure_plugin() {
  local bin="$GOBIN/$1" pkg="$2" version="$3" want="$4" have=""
  [[ -x "$bin" ]] && have="$("$bin" --version 2>/dev/null || true)"
  if [[ "$have" != "$want" ]]; then
    echo "gen.sh: installing $pkg@$version (found: ${have:-none})" >&2
    (cd "$ROOT" && go install "$pkg@$version")
    have="$("$bin" --version)"
    [[ "$have" == "$want" ]] || { echo "gen.sh: $bin reports '$have', want '$want'" >&2; exit 1; }
  fi
}
ensure_plugin protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go \
  "$PROTOC_GEN_GO_VERSION" "protoc-gen-go $PROTOC_GEN_GO_VERSION"
ensure_plugin protoc-gen-go-grpc google.golang.org/grpc/cmd/protoc-gen-go-grpc \
  "$PROTOC_GEN_GO_GRPC_VERSION" "protoc-gen-go-grpc ${PROTOC_GEN_GO_GRPC_VERSION#v}"

# Include directories: the well-known types from grpc_tools, then google/api/*.proto
# from googleapis-common-protos (the site-packages directory holding google/api).
mapfile -t INCLUDES < <("$PYTHON" - <<'PY'
import os, google.api, grpc_tools
print(os.path.join(os.path.dirname(grpc_tools.__file__), "_proto"))
print(os.path.dirname(os.path.dirname(list(google.api.__path__)[0])))
PY
)
PROTOC=("$PYTHON" -m grpc_tools.protoc -I proto -I "${INCLUDES[0]}" -I "${INCLUDES[1]}")

# The project's own protos, as paths relative to proto/, in a stable order.
mapfile -t PROTOS < <(cd proto && find wirelens -name '*.proto' -type f | LC_ALL=C sort)
[[ ${#PROTOS[@]} -gt 0 ]] || { echo "gen.sh: no proto/wirelens/**/*.proto" >&2; exit 1; }

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

# 1. Descriptor set.
mkdir -p "$TMP/build/proto"
"${PROTOC[@]}" --include_imports --include_source_info \
  --descriptor_set_out="$TMP/build/proto/wirelens.pb" "${PROTOS[@]}"

# 2. Go code, into a fresh tree so that removed protos leave no stale files.
mkdir -p "$TMP/services"
PATH="$GOBIN:$PATH" "${PROTOC[@]}" \
  --plugin=protoc-gen-go="$GOBIN/protoc-gen-go" \
  --plugin=protoc-gen-go-grpc="$GOBIN/protoc-gen-go-grpc" \
  --go_out="$TMP/services" --go_opt=module="$GO_MODULE" \
  --go-grpc_out="$TMP/services" --go-grpc_opt=module="$GO_MODULE" \
  "${PROTOS[@]}"

# 3. Operation map for the filter.
"$PYTHON" proto/opmap.py "$TMP/build/proto/wirelens.pb" -o "$TMP/build/opmap.json"

if [[ $CHECK -eq 1 ]]; then
  if diff -r services/gen "$TMP/services/gen" >&2; then
    echo "gen.sh: services/gen is up to date"
    exit 0
  fi
  echo "gen.sh: services/gen differs from the protos; run proto/gen.sh" >&2
  exit 1
fi

mkdir -p build/proto
mv -f "$TMP/build/proto/wirelens.pb" build/proto/wirelens.pb
mv -f "$TMP/build/opmap.json" build/opmap.json
mkdir -p services && rm -rf services/gen
mv "$TMP/services/gen" services/gen
echo "gen.sh: wrote build/proto/wirelens.pb, build/opmap.json, services/gen/ (${#PROTOS[@]} proto file(s))"
