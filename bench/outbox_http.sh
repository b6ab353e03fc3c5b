#!/usr/bin/env bash
# What the outbox costs `POST /api/v1/appointments` through HTTP: the server as shipped against
# the same server built with `--features bench-outbox-off` (no change records its event), on
# one data set, in rounds whose order alternates (A B, B A, ...), each round's ratio and their
# mean. Issue #12's target: the POST with its event within 15% of the POST without (ratio >= 0.85).
#
#   bench/outbox_http.sh                          # PostgreSQL main data set, 6 rounds of 8 s, c=32
#   OUTBOX_BACKEND=sqlite OUTBOX_ROUNDS=4 bench/outbox_http.sh
#
# `bench_seed outbox` measures the same difference below HTTP (the store's write path alone),
# where the event is a larger share of the work; this script measures what a client sees.
# Needs the data set that bench/run.sh generates. Knobs: OUTBOX_BACKEND (postgres), OUTBOX_ROUNDS
# (6), OUTBOX_SECONDS (8), OUTBOX_CONNS (32), OUTBOX_DATASET (main), OUTBOX_BUILD (1), OUTBOX_RESET (1:
# start from the data set as generated; 0 keeps it as earlier runs left it), BENCH_PG_URL.
set -euo pipefail
cd "$(dirname "$0")/.."
backend=${OUTBOX_BACKEND:-postgres}; dataset=${OUTBOX_DATASET:-main}
rounds=${OUTBOX_ROUNDS:-6}; seconds=${OUTBOX_SECONDS:-8}; conns=${OUTBOX_CONNS:-32}
. bench/dataset.sh
use_dataset "$backend" "$dataset"
[ "${OUTBOX_RESET:-1}" = 0 ] || restore_url "$url" # each run starts from the data set as generated

# Both builds, one after the other (OUTBOX_BUILD=0 uses the binaries of an earlier run).
if [ "${OUTBOX_BUILD:-1}" != 0 ]; then
  cargo build --release --quiet --bin autoshop --features bench-outbox-off
  cp target/release/autoshop target/release/autoshop-outbox-off
  cargo build --release --quiet --bin autoshop
fi

# Both servers run side by side on the same database; only the one under load does any work.
port=${BENCH_PORT:-18095}
. bench/pair.sh
rps() { # port: one round of POSTs
  wrk_round "$1" post /
}
appointments() { # how many the data set holds: every POST round adds some
  case $backend in
    postgres) psql "$url" -Atc "SELECT count(*) FROM appointments" ;;
    *) python3 -c 'import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute("SELECT count(*) FROM appointments").fetchone()[0])' "${url#sqlite://}" ;;
  esac
}
place_and_warm() { # first-name first-binary second-name second-binary
  place "$@"
  with=${port_of[with]}; without=${port_of[without]}
  rps "$with" >/dev/null; rps "$without" >/dev/null # warm-up, not counted
}
echo "outbox: $backend data set at $(appointments) appointments"
place_and_warm with target/release/autoshop without target/release/autoshop-outbox-off
sum=0
for r in $(seq 1 "$rounds"); do
  [ "$r" = $((rounds / 2 + 1)) ] && place_and_warm without target/release/autoshop-outbox-off with target/release/autoshop
  if [ $((r % 2)) = 1 ]; then a=$(rps "$without"); b=$(rps "$with"); else b=$(rps "$with"); a=$(rps "$without"); fi
  ratio=$(echo "scale=3; $b / $a" | bc)
  sum=$(echo "scale=3; $sum + $ratio" | bc)
  printf 'outbox: %s round %d (events on port %d): without events %.0f req/s, with %.0f req/s, ratio %s\n' "$backend" "$r" "$with" "$a" "$b" "$ratio"
done
printf 'outbox: %s POST with events / without: mean ratio %s over %d rounds (target >= 0.85)\n' "$backend" "$(echo "scale=3; $sum / $rounds" | bc)" "$rounds"
echo "outbox: $backend data set at $(appointments) appointments after the rounds"
