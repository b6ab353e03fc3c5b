#!/usr/bin/env bash
# A page's share of the static ceiling, measured in one run: the server and `bench_static`
# (answering a response of the same shape, captured from the server) run side by side, and rounds
# alternate between them (app static, static app, ...), so that the machine's drift weighs on
# both. `bench/run.sh` measures each ceiling minutes after its page, and this kind of VM drifts
# by tens of percent in that time (bench/RESULTS.md, thirteenth session).
#
#   bench/share.sh                           # the four pages with a share target, 4 rounds each
#   bench/share.sh range cust_details        # some of them
#
# Pages: default (/api/v1/appointments), range (one shop, one week, filter_by=appointment_start,
# sort=-date; the ceiling answers one such week's bytes), appts_details, cust_details. Needs the
# data set that bench/run.sh generates. Knobs: SHARE_BACKEND (sqlite), SHARE_DATASET (main),
# SHARE_ROUNDS (4), SHARE_SECONDS (6), SHARE_CONNS (32), BENCH_PG_URL.
set -euo pipefail
cd "$(dirname "$0")/.."
backend=${SHARE_BACKEND:-sqlite}; dataset=${SHARE_DATASET:-main}
rounds=${SHARE_ROUNDS:-4}; seconds=${SHARE_SECONDS:-6}; conns=${SHARE_CONNS:-32}
pages=${*:-default range appts_details cust_details}
. bench/dataset.sh
use_dataset "$backend" "$dataset"

cargo build --release --quiet --bin autoshop --example bench_static
port=${BENCH_PORT:-18090}; static_port=$((port + 1))
. bench/pair.sh
work=$(mktemp -d)
ceiling=""
stop_ceiling() { [ -z "$ceiling" ] || { kill "$ceiling" 2>/dev/null || true; wait "$ceiling" 2>/dev/null || true; }; ceiling=""; }
trap 'stop_ceiling; pair_stop; rm -rf "$work" "$pair_logs"' EXIT
pair_start app target/release/autoshop "$port"

# page -> "wrk-mode path target-percent sample-path"
page_spec() {
  local week
  week="filter%5Bshop_id%5D=$BENCH_FIRST_SHOP&start_date=$(date -u -d "@$((BENCH_FIRST_DAY + 30 * 86400))" +%F)"
  week="$week&end_date=$(date -u -d "@$((BENCH_FIRST_DAY + 36 * 86400))" +%F)&filter_by=appointment_start&sort=-date"
  case $1 in
    default) echo "path /api/v1/appointments 25 /api/v1/appointments" ;;
    range) echo "range / 15 /api/v1/appointments?$week" ;;
    appts_details) echo "path /api/v1/appointments?with_details=true 15 /api/v1/appointments?with_details=true" ;;
    cust_details) echo "path /api/v1/customers?with_details=true 15 /api/v1/customers?with_details=true" ;;
    *) echo "share: unknown page $1 (default, range, appts_details, cust_details)" >&2; exit 1 ;;
  esac
}

for page in $pages; do page_spec "$page" >/dev/null; done # a misspelt page fails now, not minutes in
for page in $pages; do
  spec=$(page_spec "$page")
  read -r mode path target sample <<< "$spec"
  curl -sf -H "Authorization: Bearer $BENCH_KEY" "http://127.0.0.1:$port$sample" -o "$work/body.json"
  target/release/examples/bench_static --listen "127.0.0.1:$static_port" --body "$work/body.json" >"$work/static.log" 2>&1 &
  ceiling=$!
  for _ in $(seq 1 300); do curl -sf -o /dev/null "http://127.0.0.1:$static_port/" && break; sleep 0.2; done
  wrk_round "$port" "$mode" "$path" >/dev/null # warm-up, not counted
  sum=0
  for r in $(seq 1 "$rounds"); do
    if [ $((r % 2)) = 1 ]; then app=$(wrk_round "$port" "$mode" "$path"); top=$(wrk_round "$static_port" path /); else
      top=$(wrk_round "$static_port" path /); app=$(wrk_round "$port" "$mode" "$path"); fi
    share=$(echo "scale=2; 100 * $app / $top" | bc)
    sum=$(echo "scale=2; $sum + $share" | bc)
    printf 'share: %s %s round %d: %.0f req/s, static %.0f req/s (%s bytes): %s%%\n' \
      "$backend" "$page" "$r" "$app" "$top" "$(wc -c < "$work/body.json")" "$share"
  done
  mean=$(echo "scale=1; $sum / $rounds" | bc)
  printf 'share: %s %s: mean %s%% of static over %d rounds (target %s%%: %s)\n' "$backend" "$page" "$mean" "$rounds" "$target" \
    "$(echo "$mean >= $target" | bc | sed 's/1/met/; s/0/not met/')"
  stop_ceiling
done
