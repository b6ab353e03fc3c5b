#!/usr/bin/env bash
# Export and import figures (issue 16, decisions §16), on each backend:
#  - exporting the benchmark company's appointments (1M rows) and customers (200k): time to the
#    first byte, rows per second, and the server's largest RSS while it streams;
#  - importing 100,000 customers from one CSV file into a shop of its own: seconds, and RSS.
# Uses the data set bench/run.sh generates ("main": 1M appointments, 200k customers), generating
# it when bench/data does not hold it yet.
#
#   bench/export_import.sh               both backends
#   BENCH_BACKENDS=sqlite bench/export_import.sh
#   BENCH_SIZE=smoke bench/export_import.sh   tiny data (2,000 appointments, 1,000 imported rows)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

backends=${BENCH_BACKENDS:-sqlite postgres}
pg_server=${BENCH_PG_URL:-postgres://postgres@127.0.0.1:5432}
port=${BENCH_PORT:-18090}
if [ "${BENCH_SIZE:-full}" = smoke ]; then
  appts=2000 custs=500 shops=5 import_rows=1000 data_dir=$(mktemp -d) pg_db="autoshop_bench_xsmoke_$$" reuse=0
else
  appts=1000000 custs=200000 shops=50 import_rows=100000 data_dir=$root/bench/data pg_db="autoshop_bench_main" reuse=1
fi
mkdir -p "$data_dir"
work=$(mktemp -d)
server_pid=""
sampler_pid=""
cleanup() {
  [ -n "$sampler_pid" ] && kill "$sampler_pid" 2>/dev/null || true
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null || true
  if [ "$reuse" = 0 ]; then
    psql "$pg_server/test" -qc "DROP DATABASE IF EXISTS $pg_db WITH (FORCE)" >/dev/null 2>&1 || true
    rm -rf "$data_dir"
  fi
  rm -rf "$work"
}
trap cleanup EXIT

echo "bench: building (release)"
cargo build --release --quiet --bin autoshop --example bench_seed
bin=$root/target/release

database_url() { if [ "$1" = sqlite ]; then echo "sqlite://$data_dir/sqlite-main.db"; else echo "$pg_server/$pg_db"; fi; }

ensure_data() { # backend -> meta file (the same data set and file names as bench/run.sh)
  local meta=$data_dir/$1-main.json
  if [ "$reuse" = 1 ] && [ -s "$meta" ]; then echo "$meta"; return; fi
  if [ "$1" = postgres ]; then
    psql "$pg_server/test" -qc "DROP DATABASE IF EXISTS $pg_db WITH (FORCE)" >/dev/null
    psql "$pg_server/test" -qc "CREATE DATABASE $pg_db" >/dev/null
  else
    rm -f "$data_dir"/sqlite-main.db*
  fi
  echo "bench: generating $1 data ($appts appointments, $custs customers)" >&2
  "$bin/examples/bench_seed" seed --database-url "$(database_url "$1")" --appointments "$appts" --customers "$custs" --shops "$shops" > "$meta.tmp"
  mv "$meta.tmp" "$meta"
  echo "$meta"
}

# Samples the server's RSS every 50 ms into $work/rss until killed.
start_sampler() {
  : > "$work/rss"
  (while kill -0 "$server_pid" 2>/dev/null; do awk '/^VmRSS/ {print $2}' "/proc/$server_pid/status" >> "$work/rss" 2>/dev/null; sleep 0.05; done) &
  sampler_pid=$!
}
stop_sampler() { kill "$sampler_pid" 2>/dev/null || true; wait "$sampler_pid" 2>/dev/null || true; sampler_pid=""; sort -n "$work/rss" | tail -1 | awk '{printf "%.0f", $1/1024}'; }

for backend in $backends; do
  meta=$(ensure_data "$backend")
  key=$(jq -r .api_key "$meta")
  "$bin/autoshop" serve --rate-limit 0 --listen "127.0.0.1:$port" --database-url "$(database_url "$backend")" --log warn > "$work/server.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 1 600); do curl -fs -o /dev/null "http://127.0.0.1:$port/readyz" && break; sleep 0.1; done
  rest_rss=$(awk '/^VmRSS/ {printf "%.0f", $2/1024}' "/proc/$server_pid/status")
  echo "bench: === $backend (server at rest: $rest_rss MiB) ==="

  for resource in appointments customers; do
    start_sampler
    if [ "$resource" = appointments ]; then sort=-date; else sort=last_name; fi
    stats=$(curl -fsS -o "$work/export.csv" -w '%{time_starttransfer} %{time_total} %{size_download}' \
      -H "Authorization: Bearer $key" "http://127.0.0.1:$port/api/v1/$resource/export?sort=$sort")
    rss=$(stop_sampler)
    rows=$(python3 -c "import csv; print(sum(1 for _ in csv.reader(open('$work/export.csv', newline=''))) - 1)")
    read -r first total bytes <<< "$stats"
    printf '  export %-12s %9d rows  first byte %6.3f s  total %6.2f s  %9.0f rows/s  %6.1f MB  max RSS %4d MiB\n' \
      "$resource" "$rows" "$first" "$total" "$(echo "$rows / $total" | bc -l)" "$(echo "$bytes / 1000000" | bc -l)" "$rss"
  done

  shop=$(curl -fsS -X POST -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
    -d "{\"name\": \"Import $(date +%s)\"}" "http://127.0.0.1:$port/api/v1/shops" | jq .shop_id)
  python3 - "$import_rows" "$work/import.csv" <<'EOF'
import sys
rows, path = int(sys.argv[1]), sys.argv[2]
stamp = __import__("time").time_ns()
with open(path, "w", newline="") as f:
    f.write("business_name,first_name,last_name,address,city,state,zip,phone.home,phone.cell,email,customer_number,credit_limit,comments\r\n")
    for i in range(rows):
        f.write(f'"Fleet {i}, LLC",First{i},Last{i % 997},{i} Main St,Springfield,IL,62701,555-{i % 10000:04d},'
                f'555-{(i * 7) % 10000:04d},c{i}@example.com,IMP-{stamp}-{i},{(i % 50) * 100}.50,"Imported, row {i}"\r\n')
EOF
  start_sampler
  answer=$(curl -sS -w ' %{http_code} %{time_total}' -X POST -H "Authorization: Bearer $key" -H 'Content-Type: text/csv' \
    --data-binary "@$work/import.csv" "http://127.0.0.1:$port/api/v1/customers/import?shop_id=$shop")
  rss=$(stop_sampler)
  printf '  import customers %9d rows  %s  max RSS %4d MiB  (%s MB file)\n' "$import_rows" "$answer" "$rss" \
    "$(echo "$(stat -c %s "$work/import.csv") / 1000000" | bc -l | cut -c1-5)"
  kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; server_pid=""
done
