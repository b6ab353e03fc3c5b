#!/usr/bin/env bash
# Load hold: a release server on a fresh SQLite database with the demo company, held at about
# 80% of its measured capacity for SECONDS (default 300), in turns without and beside 300 slow
# clients, failing on any error, on memory that keeps growing, or on the slow clients raising the
# others' p99 past 1.5x + 5 ms in every turn. Usage: bench/soak.sh [SECONDS]
# (SOAK_FRACTION=0.5 holds another share of the capacity.)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-${SOAK_SECONDS:-300}}"
cargo build --release --quiet --bin autoshop --example soak

work=$(mktemp -d)
./target/release/autoshop serve --demo --database-url "sqlite://$work/soak.db" --listen 127.0.0.1:0 \
  --port-file "$work/port" --rate-limit 0 --log warn >"$work/stdout" 2>"$work/stderr" &
server=$!
trap 'kill $server 2>/dev/null || true; wait $server 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 1 100); do
  grep -q 'ask_' "$work/stdout" 2>/dev/null && [ -s "$work/port" ] && break
  sleep 0.2
done
key=$(grep -o 'ask_[0-9a-f]*' "$work/stdout" | head -n1)
./target/release/examples/soak --base "http://127.0.0.1:$(cat "$work/port")" --key "$key" --pid "$server" --seconds "$seconds" \
  --fraction "${SOAK_FRACTION:-0.8}"
