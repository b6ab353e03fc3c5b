#!/usr/bin/env bash
# Load benchmark: generate (or reuse) a company, start autoshop in release mode, load it with wrk,
# measure the ceilings (a static response from the same HTTP stack; pgbench on PostgreSQL) and
# print every figure with its ratio to its ceiling. See bench/README.md.
#
#   bench/run.sh                         full run: 1M appointments, 200k customers, 50 shops
#   BENCH_SIZE=smoke bench/run.sh        tiny data, 2 s per case (what .ci/bench-smoke runs)
#
# Knobs (environment): BENCH_BACKENDS ("sqlite postgres"), BENCH_CONNS ("32 64"),
# BENCH_DURATION (seconds per loaded case), BENCH_PROBE_DURATION (seconds per latency probe),
# BENCH_PG_URL (server, default postgres://postgres@127.0.0.1:5432), BENCH_OUT (results file),
# BENCH_CASES (an extended regex: only the load and probe cases whose names match, e.g.
# 'post_appointment|post_keyed'; ceilings and the outbox figure run only without it),
# BENCH_DATASETS ("main small"), BENCH_WARMUP (seconds per probe case run unrecorded before the
# probes, so they do not measure a cold database's disk; default 5, 0 in smoke runs).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

size=${BENCH_SIZE:-full}
backends=${BENCH_BACKENDS:-sqlite postgres}
pg_server=${BENCH_PG_URL:-postgres://postgres@127.0.0.1:5432}
app_port=${BENCH_PORT:-18080}
static_port=$((app_port + 1))
if [ "$size" = smoke ]; then
  conns=${BENCH_CONNS:-8}
  duration=${BENCH_DURATION:-2}
  probe_duration=${BENCH_PROBE_DURATION:-1}
  warmup=${BENCH_WARMUP:-0}
  # name:appointments:customers:shops
  datasets="main:2000:500:5 small:200:50:5"
  data_dir=$(mktemp -d)
  pg_prefix="autoshop_bench_smoke_$$_"
  reuse=0
else
  conns=${BENCH_CONNS:-32 64}
  duration=${BENCH_DURATION:-10}
  probe_duration=${BENCH_PROBE_DURATION:-3}
  warmup=${BENCH_WARMUP:-5}
  datasets="main:1000000:200000:50 small:10000:2000:50"
  if [ -n "${BENCH_DATASETS:-}" ]; then
    datasets=$(for d in $datasets; do if [[ " $BENCH_DATASETS " == *" ${d%%:*} "* ]]; then echo "$d"; fi; done)
  fi
  data_dir=$root/bench/data
  pg_prefix="autoshop_bench_"
  reuse=1
fi
mkdir -p "$data_dir" "$root/bench/data"
out=${BENCH_OUT:-$root/bench/data/results-$size-$(date -u +%Y%m%dT%H%M%SZ).jsonl}
: > "$out"

server_pid=""
static_pid=""
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null || true
  [ -n "$static_pid" ] && kill "$static_pid" 2>/dev/null && wait "$static_pid" 2>/dev/null || true
  if [ "$size" = smoke ]; then
    for spec in $datasets; do
      psql "$pg_server/test" -qc "DROP DATABASE IF EXISTS ${pg_prefix}${spec%%:*} WITH (FORCE)" >/dev/null 2>&1 || true
    done
    rm -rf "$data_dir"
  fi
}
trap cleanup EXIT

command -v wrk >/dev/null || { apt-get install -y wrk >/dev/null || { apt-get update >/dev/null && apt-get install -y wrk >/dev/null; }; }
command -v jq >/dev/null || { echo "bench: jq is needed" >&2; exit 1; }

echo "bench: building (release)"
cargo build --release --quiet --bin autoshop --example bench_seed --example bench_static
bin=$root/target/release

# ---------------------------------------------------------------------------------------------
# Data: one company per data set and backend, generated once (full runs reuse bench/data/).
. bench/dataset.sh

database_url() { # backend dataset
  if [ "$1" = sqlite ]; then echo "sqlite://$data_dir/sqlite-$2.db"; else echo "$pg_server/${pg_prefix}$2"; fi
}

ensure_data() { # backend name appointments customers shops -> prints the seed JSON file
  local backend=$1 name=$2 appts=$3 custs=$4 shops=$5
  local meta=$data_dir/$backend-$name.json
  if [ "$reuse" = 1 ] && [ -s "$meta" ]; then echo "$meta"; return; fi
  if [ "$backend" = sqlite ]; then
    rm -f "$data_dir/sqlite-$name.db" "$data_dir/sqlite-$name.db-wal" "$data_dir/sqlite-$name.db-shm"
  else
    psql "$pg_server/test" -qc "DROP DATABASE IF EXISTS ${pg_prefix}$name WITH (FORCE)" >/dev/null
    psql "$pg_server/test" -qc "CREATE DATABASE ${pg_prefix}$name" >/dev/null
  fi
  echo "bench: generating $backend/$name ($appts appointments, $custs customers, $shops shops)" >&2
  "$bin/examples/bench_seed" seed --database-url "$(database_url "$backend" "$name")" \
    --appointments "$appts" --customers "$custs" --shops "$shops" > "$meta.tmp"
  # The paired writing benchmarks (ab.sh, outbox_http.sh) start every run from this copy.
  if [ "$reuse" = 1 ]; then snapshot_url "$(database_url "$backend" "$name")"; fi
  mv "$meta.tmp" "$meta"
  echo "$meta"
}

# ---------------------------------------------------------------------------------------------
# Servers.

wait_http() { # url pid
  for _ in $(seq 1 600); do
    curl -fs -o /dev/null "$1" && return 0
    kill -0 "$2" 2>/dev/null || { echo "bench: server exited" >&2; return 1; }
    sleep 0.1
  done
  echo "bench: $1 not ready after 60 s" >&2
  return 1
}

start_app() { # database-url
  "$bin/autoshop" serve --rate-limit 0 --listen "127.0.0.1:$app_port" --database-url "$1" --log warn \
    > "$data_dir/server.log" 2>&1 &
  server_pid=$!
  wait_http "http://127.0.0.1:$app_port/readyz" "$server_pid"
}

stop_app() {
  kill "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=""
}

start_static() { # body-file
  "$bin/examples/bench_static" --listen "127.0.0.1:$static_port" --body "$1" > "$data_dir/static.log" 2>&1 &
  static_pid=$!
  wait_http "http://127.0.0.1:$static_port/" "$static_pid"
}

stop_static() {
  kill "$static_pid" 2>/dev/null || true
  wait "$static_pid" 2>/dev/null || true
  static_pid=""
}

# ---------------------------------------------------------------------------------------------
# Measurements. Each appends one JSON object to $out.

rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }

# run_wrk backend dataset case conns seconds port pid mode [path]
run_wrk() {
  local backend=$1 dataset=$2 case=$3 c=$4 secs=$5 port=$6 pid=$7 mode=$8 path=${9:-/}
  local threads=2
  [ "$c" -lt 2 ] && threads=1
  local log=$data_dir/wrk.log
  BENCH_MODE=$mode BENCH_PATH=$path wrk -t "$threads" -c "$c" -d "${secs}s" --timeout 10s \
    -s "$root/bench/wrk/autoshop.lua" "http://127.0.0.1:$port" > "$log" 2>&1 &
  local wrk_pid=$! max=0 rss
  while kill -0 "$wrk_pid" 2>/dev/null; do
    rss=$(rss_kb "$pid"); [ "${rss:-0}" -gt "$max" ] && max=$rss
    sleep 0.25
  done
  wait "$wrk_pid" || { cat "$log" >&2; echo "bench: wrk failed ($case)" >&2; return 1; }
  local line
  line=$(grep '^BENCH ' "$log" | sed 's/^BENCH //') || { cat "$log" >&2; echo "bench: no summary ($case)" >&2; return 1; }
  echo "$line" | jq -c --arg b "$backend" --arg d "$dataset" --arg k "$case" --argjson c "$c" --argjson rss "$max" \
    '{backend:$b, dataset:$d, case:$k, conns:$c, rss_kb:$rss} + .' >> "$out"
  printf '  %-9s %-6s %-22s c=%-3s %9.0f req/s  p50 %7.2f ms  p99 %7.2f ms  non-2xx %s  errors %s  rss %s MB\n' \
    "$backend" "$dataset" "$case" "$c" "$(echo "$line" | jq .rps)" "$(echo "$line" | jq .p50_ms)" \
    "$(echo "$line" | jq .p99_ms)" "$(echo "$line" | jq .non2xx)" "$(echo "$line" | jq .socket_errors)" "$((max / 1024))"
}

# run_pgbench dataset case conns seconds script database
run_pgbench() {
  local dataset=$1 case=$2 c=$3 secs=$4 script=$5 db=$6
  local log=$data_dir/pgbench.log
  pgbench -n -M prepared -c "$c" -j 2 -T "$secs" -f "$script" "$pg_server/$db" > "$log" 2>&1 \
    || { cat "$log" >&2; echo "bench: pgbench failed ($case)" >&2; return 1; }
  local tps lat failed
  tps=$(sed -nE 's/^tps = ([0-9.]+).*/\1/p' "$log" | head -n1)
  lat=$(sed -nE 's/^latency average = ([0-9.]+) ms/\1/p' "$log" | head -n1)
  failed=$(sed -nE 's/^number of failed transactions: ([0-9]+).*/\1/p' "$log" | head -n1)
  jq -nc --arg d "$dataset" --arg k "$case" --argjson c "$c" --argjson tps "$tps" --argjson lat "${lat:-0}" --argjson f "${failed:-0}" \
    '{backend:"postgres", dataset:$d, case:$k, conns:$c, rps:$tps, avg_ms:$lat, failed:$f}' >> "$out"
  printf '  %-9s %-6s %-22s c=%-3s %9.0f tx/s   avg %7.2f ms\n' postgres "$dataset" "$case" "$c" "$tps" "${lat:-0}"
}

# The request shapes: case name, wrk mode, path (for fixed paths).
load_cases="appts_default:path:/api/v1/appointments
appts_range:range:
cust_last_name:last_name:
cust_phone:phone:
appts_details:path:/api/v1/appointments?with_details=true
cust_details:path:/api/v1/customers?with_details=true
post_appointment:post:
post_keyed:post_keyed:
put_customer:put:
get_customer:one:
get_customer_inm:one_conditional:
events_page:path:/api/v1/events?limit=100
appts_page100:path:/api/v1/appointments?pageSize=100"
cases_filter=${BENCH_CASES:-}
if [ -n "$cases_filter" ]; then
  load_cases=$(grep -E "^($cases_filter):" <<< "$load_cases" || true)
fi
# Indexed filters whose unloaded latency is compared between the small and the main data set,
# and the substring filters (same probe).
probe_cases="appts_default:path:/api/v1/appointments
appts_range:range:
appts_date:date:
cust_number:number:
cust_shop:shop:
cust_default:path:/api/v1/customers
cust_last_name:last_name:
cust_phone:phone:
availability:availability:"
if [ -n "$cases_filter" ]; then
  probe_cases=$(grep -E "^($cases_filter):" <<< "$probe_cases" || true)
fi

export_meta() { # meta-file
  local meta=$1
  BENCH_KEY=$(jq -r .api_key "$meta"); export BENCH_KEY
  BENCH_FIRST_SHOP=$(jq -r .first_shop "$meta"); export BENCH_FIRST_SHOP
  BENCH_SHOPS=$(jq -r .shop_count "$meta"); export BENCH_SHOPS
  BENCH_FIRST_DAY=$(date -u -d "$(jq -r .first_day "$meta")" +%s); export BENCH_FIRST_DAY
  BENCH_DAYS=$(jq -r .days "$meta"); export BENCH_DAYS
  BENCH_FIRST_CUSTOMER=$(jq -r .first_customer "$meta"); export BENCH_FIRST_CUSTOMER
  BENCH_LAST_CUSTOMER=$(jq -r .last_customer "$meta"); export BENCH_LAST_CUSTOMER
  BENCH_CUSTOMERS=$(jq -r .customers "$meta"); export BENCH_CUSTOMERS
}

check_2xx() { # path
  local status
  status=$(curl -s -o "$data_dir/check.json" -w '%{http_code}' -H "Authorization: Bearer $BENCH_KEY" "http://127.0.0.1:$app_port$1")
  [ "${status:0:1}" = 2 ] || { echo "bench: GET $1 answered $status" >&2; cat "$data_dir/check.json" >&2; return 1; }
}

for backend in $backends; do
  echo "bench: === $backend ==="
  for spec in $datasets; do
    IFS=: read -r name appts custs shops <<< "$spec"
    meta=$(ensure_data "$backend" "$name" "$appts" "$custs" "$shops")
    export_meta "$meta"
    url=$(database_url "$backend" "$name")
    start_app "$url"
    check_2xx /api/v1/appointments
    check_2xx /api/v1/customers

    # The probes' pages read once first, unrecorded: on a database just generated or restarted,
    # the first requests read from disk (PostgreSQL's range probe: p99 645 ms on its first run,
    # 20.7 ms on the next).
    if [ "$warmup" -gt 0 ]; then
      while IFS=: read -r case mode path; do
        [ -n "$case" ] && BENCH_MODE=$mode BENCH_PATH=${path:-/} wrk -t 2 -c 4 -d "${warmup}s" --timeout 10s \
          -s "$root/bench/wrk/autoshop.lua" "http://127.0.0.1:$app_port" > /dev/null 2>&1 || true
      done <<< "$probe_cases"
    fi

    # Unloaded latency (one connection) of the indexed and substring filters, on every data set.
    while IFS=: read -r case mode path; do
      [ -n "$case" ] && run_wrk "$backend" "$name" "$case" 1 "$probe_duration" "$app_port" "$server_pid" "$mode" "$path"
    done <<< "$probe_cases"

    if [ "$name" = main ]; then
      # Capture the bodies the static ceiling serves: same size as the real responses.
      for body in page:/api/v1/appointments appts_details:/api/v1/appointments?with_details=true cust_details:/api/v1/customers?with_details=true events:/api/v1/events?limit=100; do
        check_2xx "${body#*:}"
        cp "$data_dir/check.json" "$data_dir/body-$backend-${body%%:*}.json"
      done
      for c in $conns; do
        while IFS=: read -r case mode path; do
          [ -n "$case" ] && run_wrk "$backend" "$name" "$case" "$c" "$duration" "$app_port" "$server_pid" "$mode" "$path"
        done <<< "$load_cases"
      done
      stop_app
      [ -n "$cases_filter" ] && continue
      for body in page appts_details cust_details events; do
        start_static "$data_dir/body-$backend-$body.json"
        for c in $conns; do
          run_wrk "$backend" "$name" "static_$body" "$c" "$duration" "$static_port" "$static_pid" path /
        done
        stop_static
      done
      if [ "$backend" = postgres ]; then
        db=${pg_prefix}$name
        company=$(jq -r .company_id "$meta")
        for case in default range; do
          "$bin/examples/bench_seed" pgbench --database-url "$url" --company-id "$company" --case "$case" \
            --first-shop "$BENCH_FIRST_SHOP" --shop-count "$BENCH_SHOPS" --first-day "$(jq -r .first_day "$meta")" \
            --days "$BENCH_DAYS" > "$data_dir/pgbench-$case.sql"
          for c in $conns; do
            run_pgbench "$name" "pgbench_$case" "$c" "$duration" "$data_dir/pgbench-$case.sql" "$db"
          done
        done
        cp "$data_dir"/pgbench-*.sql "$root/bench/data/" 2>/dev/null || true
      fi
    else
      stop_app
    fi
  done

  # The outbox's cost on writes: the same appointment inserts with and without their event, in
  # alternating rounds on a fresh database (printed as a ratio, not kept in the JSON results).
  [ -n "$cases_filter" ] && continue
  if [ "$backend" = sqlite ]; then
    outbox_url="sqlite://$data_dir/outbox-$$.db"
  else
    psql "$pg_server/test" -qc "DROP DATABASE IF EXISTS ${pg_prefix}outbox WITH (FORCE)" >/dev/null
    psql "$pg_server/test" -qc "CREATE DATABASE ${pg_prefix}outbox" >/dev/null
    outbox_url="$pg_server/${pg_prefix}outbox"
  fi
  "$bin/examples/bench_seed" outbox --database-url "$outbox_url" --seconds "$probe_duration" --rounds 3 --concurrency 16
  if [ "$backend" = sqlite ]; then rm -f "$data_dir/outbox-$$.db"*; else
    psql "$pg_server/test" -qc "DROP DATABASE IF EXISTS ${pg_prefix}outbox WITH (FORCE)" >/dev/null
  fi
done

echo
python3 "$root/bench/report.py" "$out"

# Smoke: any non-2xx answer or socket error in the load phase fails the run.
bad=$(jq -s '[.[] | select((.non2xx // 0) > 0 or (.socket_errors // 0) > 0 or (.failed // 0) > 0)] | length' "$out")
if [ "$bad" -ne 0 ]; then
  echo "bench: $bad case(s) had errors:" >&2
  jq -c 'select((.non2xx // 0) > 0 or (.socket_errors // 0) > 0 or (.failed // 0) > 0)' "$out" >&2
  exit 1
fi
echo "bench: results in $out"
