#!/usr/bin/env bash
# Python message and gRPC stubs of ../../proto, for the Python pair, with the
# project venv's grpcio-tools (pinned in requirements.txt):
#   build/python/gen/wirelens/v1/*_pb2.py, *_pb2_grpc.py
# Generated, not committed (`make python-services`, keyed on proto/ and this file).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"
mapfile -t INCLUDES < <("$PYTHON" - <<'PY'
import os, google.api, grpc_tools
print(os.path.join(os.path.dirname(grpc_tools.__file__), "_proto"))
print(os.path.dirname(os.path.dirname(list(google.api.__path__)[0])))
PY
)
mapfile -t PROTOS < <(cd proto && find wirelens -name '*.proto' -type f | LC_ALL=C sort)
OUT=build/python/gen
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
"$PYTHON" -m grpc_tools.protoc -I proto -I "${INCLUDES[0]}" -I "${INCLUDES[1]}" \
  --python_out="$TMP" --grpc_python_out="$TMP" "${PROTOS[@]}"
rm -rf "$OUT" && mkdir -p "$(dirname "$OUT")" && mv "$TMP" "$OUT" && trap - EXIT
echo "python gen: wrote $OUT (${#PROTOS[@]} proto file(s))"
