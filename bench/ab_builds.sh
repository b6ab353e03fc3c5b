#!/usr/bin/env bash
# Paired comparison of two builds of the server on one data set and one request shape: both
# serve the same database side by side, rounds alternate their order (A B, B A, ...), and
# halfway through the two trade places (port and start order), because two servers of one
# build differ by several percent by their place alone (bench/RESULTS.md, tenth session).
# Each round prints requests per second and the server's CPU microseconds per request (user +
# system time from /proc over the requests served), which does not depend on how wrk and the
# server shared the cores; the end prints each build's means.
#
#   bench/ab_builds.sh /tmp/autoshop-before target/release/autoshop range
#   AB_BACKEND=postgres AB_ROUNDS=8 bench/ab_builds.sh A B path /api/v1/appointments
#
# Modes are those of bench/wrk/autoshop.lua. Needs the data set that bench/run.sh generates
# (AB_DATASET, default main). Knobs: AB_BACKEND (sqlite), AB_ROUNDS (6, even), AB_SECONDS (6),
# AB_CONNS (32), BENCH_PG_URL.
set -euo pipefail
cd "$(dirname "$0")/.."
bin_a=${1:?build A}; bin_b=${2:?build B}; mode=${3:?mode}; path=${4:-/}
backend=${AB_BACKEND:-sqlite}; dataset=${AB_DATASET:-main}
rounds=${AB_ROUNDS:-6}; seconds=${AB_SECONDS:-6}; conns=${AB_CONNS:-32}
. bench/dataset.sh
use_dataset "$backend" "$dataset"
# A writing shape grows the data set: each run starts from it as generated (AB_RESET=0 keeps it).
if [[ $mode == post* || $mode == put* ]] && [ "${AB_RESET:-1}" != 0 ]; then restore_url "$url"; fi

port=${BENCH_PORT:-18091}
. bench/pair.sh
one() { # name: "req/s µs-per-request"
  local t0 t1 n
  t0=$(ticks "${pid_of[$1]}")
  n=$(wrk_round "${port_of[$1]}" "$mode" "$path" requests)
  t1=$(ticks "${pid_of[$1]}")
  echo "$((n / seconds)) $(((t1 - t0) * 1000000 / $(getconf CLK_TCK) / n))"
}
place_and_warm() { place "$@"; one A >/dev/null; one B >/dev/null; } # warm-up, not counted
place_and_warm A "$bin_a" B "$bin_b"
sum_a=0; sum_b=0
for r in $(seq 1 "$rounds"); do
  [ "$r" = $((rounds / 2 + 1)) ] && place_and_warm B "$bin_b" A "$bin_a"
  if [ $((r % 2)) = 1 ]; then a=$(one A); b=$(one B); else b=$(one B); a=$(one A); fi
  read -r ra ca <<<"$a"; read -r rb cb <<<"$b"
  sum_a=$((sum_a + ca)); sum_b=$((sum_b + cb))
  printf 'ab_builds: round %d (A on port %d): A %d req/s %d µs/req | B %d req/s %d µs/req\n' "$r" "${port_of[A]}" "$ra" "$ca" "$rb" "$cb"
done
printf 'ab_builds: %s %s: mean CPU per request A %d µs, B %d µs (B/A %s)\n' "$backend" "$mode" \
  "$((sum_a / rounds))" "$((sum_b / rounds))" "$(echo "scale=3; $sum_b / $sum_a" | bc)"
