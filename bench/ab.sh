#!/usr/bin/env bash
# Paired comparison of two request shapes on one server: runs A and B in alternating order
# (A B, B A, A B, ...) so that a drift of the machine weighs on both, and prints each round's
# ratio B/A and their mean. For the targets stated as "B within N% of A" (a keyed POST against
# a plain one; a GET with If-None-Match against one without), where one run of each in a fixed
# order is biased by whatever the first run left behind (a warmer cache, a longer table).
#
#   bench/ab.sh post post_keyed                       # SQLite main data set, 5 rounds of 8 s
#   AB_BACKEND=postgres AB_ROUNDS=7 bench/ab.sh one one_conditional
#
# Modes are those of bench/wrk/autoshop.lua, or `path:/api/v1/...` for a fixed path
# (e.g. `bench/ab.sh path:/api/v1/appointments 'path:/api/v1/events?limit=100'`). Needs the data set that bench/run.sh generates
# (AB_DATASET, default main). Knobs: AB_BACKEND (sqlite), AB_ROUNDS (5), AB_SECONDS (8),
# AB_CONNS (32), BENCH_PG_URL.
set -euo pipefail
cd "$(dirname "$0")/.."
a=${1:?mode A}; b=${2:?mode B}
backend=${AB_BACKEND:-sqlite}; dataset=${AB_DATASET:-main}
rounds=${AB_ROUNDS:-5}; seconds=${AB_SECONDS:-8}; conns=${AB_CONNS:-32}
. bench/dataset.sh
use_dataset "$backend" "$dataset"
# A writing shape grows the data set: each run starts from it as generated (AB_RESET=0 keeps it).
if [[ " $a $b " == *" post"* || " $a $b " == *" put"* ]] && [ "${AB_RESET:-1}" != 0 ]; then restore_url "$url"; fi

cargo build --release --quiet --bin autoshop
port=${BENCH_PORT:-18090}
log=$(mktemp)
target/release/autoshop serve --rate-limit 0 --listen "127.0.0.1:$port" --database-url "$url" --log warn >"$log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true; wait $server 2>/dev/null || true; rm -f "$log"' EXIT
for _ in $(seq 1 300); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.2; done

rps() { # mode, or path:/fixed/path
  local mode=$1 path=/api/v1/appointments
  if [[ $mode == path:* ]]; then path=${mode#path:}; mode=path; fi
  wrk_round "$port" "$mode" "$path"
}
rps "$a" >/dev/null # warm-up, not counted
sum=0
for r in $(seq 1 "$rounds"); do
  if [ $((r % 2)) = 1 ]; then ra=$(rps "$a"); rb=$(rps "$b"); else rb=$(rps "$b"); ra=$(rps "$a"); fi
  ratio=$(echo "scale=3; $rb / $ra" | bc)
  sum=$(echo "scale=3; $sum + $ratio" | bc)
  printf 'ab: %s round %d: %s %.0f req/s, %s %.0f req/s, ratio %s\n' "$backend" "$r" "$a" "$ra" "$b" "$rb" "$ratio"
done
printf 'ab: %s %s / %s: mean ratio %s over %d rounds\n' "$backend" "$b" "$a" "$(echo "scale=3; $sum / $rounds" | bc)" "$rounds"
