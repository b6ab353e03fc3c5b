#!/usr/bin/env bash
# Where the CPU of one `POST /api/v1/appointments` goes when the server, the database and wrk
# share this machine's cores: per round, requests per second and CPU microseconds per create
# spent by the server, by PostgreSQL's processes (all of them: backends, WAL writer,
# checkpointer) and by wrk, from /proc; on PostgreSQL also the WAL records, full-page images
# and bytes per create (pg_stat_wal). The sum of the three is the budget a throughput target
# sets: N cores serve at most N * 1,000,000 / sum creates per second.
#
#   bench/post_cost.sh                            # PostgreSQL main data set, 4 rounds of 8 s
#   COST_BACKEND=sqlite COST_ROUNDS=6 bench/post_cost.sh
#
# Starts from the data set as generated (restore_url in bench/dataset.sh; COST_RESET=0 keeps it).
# Knobs: COST_BACKEND (postgres), COST_ROUNDS (4), COST_SECONDS (8), COST_CONNS (32),
# COST_DATASET (main), COST_BIN (target/release/autoshop, built if missing), BENCH_PG_URL.
set -euo pipefail
cd "$(dirname "$0")/.."
backend=${COST_BACKEND:-postgres}; dataset=${COST_DATASET:-main}
rounds=${COST_ROUNDS:-4}; seconds=${COST_SECONDS:-8}; conns=${COST_CONNS:-32}
bin=${COST_BIN:-target/release/autoshop}
. bench/dataset.sh
use_dataset "$backend" "$dataset"
[ "${COST_RESET:-1}" = 0 ] || restore_url "$url"
[ -x "$bin" ] || cargo build --release --quiet --bin autoshop

port=${BENCH_PORT:-18097}
. bench/pair.sh
pair_start cost "$bin" "$port"
server=${pid_of[cost]}

database_ticks() { # every PostgreSQL process on this machine (0 on SQLite: it runs in the server)
  local sum=0 pid
  if [ "$backend" = postgres ]; then
    # A process that ended between pgrep and the read counts nothing.
    for pid in $(pgrep -u postgres postgres || true); do sum=$((sum + $(ticks "$pid" 2>/dev/null || echo 0))); done
  fi
  echo "$sum"
}
wal() { if [ "$backend" = postgres ]; then psql "$url" -Atc "SELECT wal_records, wal_fpi, wal_bytes FROM pg_stat_wal"; else echo "0|0|0"; fi; }
hz=$(getconf CLK_TCK)
per_create() { echo "scale=1; ($1) * 1000000 / $hz / $2" | bc; }

BENCH_MODE=post wrk -t2 -c"$conns" -d4s --timeout 10s -s bench/wrk/autoshop.lua "http://127.0.0.1:$port" >/dev/null 2>&1 # warm-up
for r in $(seq 1 "$rounds"); do
  s0=$(ticks $server); d0=$(database_ticks); IFS='|' read -r w0 f0 b0 < <(wal)
  out=$( { /usr/bin/time -f 'WRK_CPU %U %S' env BENCH_MODE=post wrk -t2 -c"$conns" -d"${seconds}s" --timeout 10s \
    -s bench/wrk/autoshop.lua "http://127.0.0.1:$port"; } 2>&1 )
  s1=$(ticks $server); d1=$(database_ticks); IFS='|' read -r w1 f1 b1 < <(wal)
  stats=$(echo "$out" | sed -n 's/^BENCH //p')
  [ "$(echo "$stats" | jq '.non2xx + .socket_errors')" = 0 ] || { echo "post_cost: errors in round $r: $stats" >&2; exit 1; }
  n=$(echo "$stats" | jq .requests); rps=$(echo "$stats" | jq .rps)
  wrk_ticks=$(echo "$out" | awk -v hz="$hz" '/^WRK_CPU/ {printf "%d", ($2 + $3) * hz}')
  server_us=$(per_create "$s1 - $s0" "$n"); database_us=$(per_create "$d1 - $d0" "$n"); wrk_us=$(per_create "$wrk_ticks" "$n")
  line=$(printf 'post_cost: %s round %d: %.0f req/s; CPU us per create: server %s, database %s, wrk %s, sum %s' "$backend" "$r" "$rps" \
    "$server_us" "$database_us" "$wrk_us" "$(echo "$server_us + $database_us + $wrk_us" | bc)")
  if [ "$backend" = postgres ]; then
    line+=$(printf '; WAL per create: %s records, %s full pages, %s bytes' "$(echo "scale=1; ($w1 - $w0) / $n" | bc)" \
      "$(echo "scale=3; ($f1 - $f0) / $n" | bc)" "$(echo "($b1 - $b0) / $n" | bc)")
  fi
  echo "$line"
done
