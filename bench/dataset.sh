# Sourced by the benchmark scripts (run.sh, ab.sh, ab_builds.sh, outbox_http.sh, post_cost.sh,
# share.sh): `use_dataset BACKEND DATASET` sets `url` to the data set's database and exports what
# bench/wrk/autoshop.lua reads from its seed file (the data set that bench/run.sh generates).
use_dataset() {
  local backend=$1 dataset=$2 meta=bench/data/$1-$2.json
  [ -f "$meta" ] || { echo "bench: $meta is missing: run bench/run.sh once (BENCH_DATASETS=$dataset BENCH_BACKENDS=$backend)" >&2; exit 1; }
  case $backend in
    sqlite) url="sqlite://$(pwd)/bench/data/sqlite-$dataset.db" ;;
    postgres) url="${BENCH_PG_URL:-postgres://postgres@127.0.0.1:5432}/autoshop_bench_$dataset" ;;
    *) echo "bench: unknown backend $backend" >&2; exit 1 ;;
  esac
  export BENCH_KEY BENCH_FIRST_SHOP BENCH_SHOPS BENCH_FIRST_DAY BENCH_DAYS BENCH_FIRST_CUSTOMER BENCH_LAST_CUSTOMER BENCH_CUSTOMERS
  BENCH_KEY=$(jq -r .api_key "$meta"); BENCH_FIRST_SHOP=$(jq -r .first_shop "$meta"); BENCH_SHOPS=$(jq -r .shop_count "$meta")
  BENCH_FIRST_DAY=$(date -u -d "$(jq -r .first_day "$meta")" +%s); BENCH_DAYS=$(jq -r .days "$meta")
  BENCH_FIRST_CUSTOMER=$(jq -r .first_customer "$meta"); BENCH_LAST_CUSTOMER=$(jq -r .last_customer "$meta")
  BENCH_CUSTOMERS=$(jq -r .customers "$meta")
}

# Every POST round adds rows, and the POST figures move with the table's size (bench/RESULTS.md,
# tenth session). `snapshot_url URL` keeps a copy of a freshly generated database (bench/run.sh
# takes one after generating a data set); `restore_url URL` puts the database back as it was
# generated, so that each run of a writing benchmark starts from the same data.
pristine_of() { # url -> the copy's file (SQLite) or database name (PostgreSQL)
  case $1 in
    sqlite://*) echo "${1#sqlite://}.pristine" ;;
    postgres://*) echo "${1##*/}_pristine" ;;
  esac
}
pg_admin_url() { echo "${1%/*}/postgres"; }
no_copy() {
  echo "bench: no pristine copy $1: generate the data set again (bench/run.sh), or keep the data set as it is with *_RESET=0" >&2
  exit 1
}
snapshot_url() {
  local copy; copy=$(pristine_of "$1")
  case $1 in
    sqlite://*)
      python3 -c 'import sqlite3, sys; sqlite3.connect(sys.argv[1]).execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()' "${1#sqlite://}"
      cp --sparse=always "${1#sqlite://}" "$copy.tmp" && mv "$copy.tmp" "$copy" ;;
    postgres://*)
      psql "$1" -qc "VACUUM ANALYZE" >/dev/null
      psql "$(pg_admin_url "$1")" -qc "DROP DATABASE IF EXISTS $copy" \
        -c "CREATE DATABASE $copy TEMPLATE ${1##*/} STRATEGY FILE_COPY" >/dev/null ;;
  esac
}
restore_url() {
  local copy; copy=$(pristine_of "$1")
  case $1 in
    sqlite://*)
      [ -f "$copy" ] || no_copy "$copy"
      rm -f "${1#sqlite://}-wal" "${1#sqlite://}-shm"
      cp --sparse=always "$copy" "${1#sqlite://}" ;;
    postgres://*)
      [ "$(psql "$(pg_admin_url "$1")" -Atc "SELECT count(*) FROM pg_database WHERE datname = '$copy'")" = 1 ] \
        || no_copy "$copy"
      psql "$(pg_admin_url "$1")" -qc "DROP DATABASE IF EXISTS ${1##*/} WITH (FORCE)" \
        -c "CREATE DATABASE ${1##*/} TEMPLATE $copy STRATEGY FILE_COPY" >/dev/null
      psql "$1" -qc "CHECKPOINT" >/dev/null ;;
  esac
}

# `wrk_round PORT MODE PATH [FIELD]`: one round of bench/wrk/autoshop.lua against 127.0.0.1:PORT,
# `conns` connections for `seconds` (the caller's settings); prints the summary's FIELD (`rps`,
# or `requests`) and fails when any answer was not a 2xx, or when wrk gave no summary.
wrk_round() {
  local summary
  summary=$(BENCH_MODE=$2 BENCH_PATH=$3 wrk -t2 -c"$conns" -d"${seconds}s" --timeout 10s -s bench/wrk/autoshop.lua \
    "http://127.0.0.1:$1" 2>&1 | sed -n 's/^BENCH //p')
  [ -n "$summary" ] || { echo "bench: wrk gave no summary (port $1, mode $2)" >&2; return 1; }
  jq -r --arg field "${4:-rps}" 'if .non2xx > 0 or .socket_errors > 0 then error("non-2xx answers") else .[$field] end' <<<"$summary"
}
