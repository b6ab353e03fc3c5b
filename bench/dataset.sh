# Sourced by the paired benchmarks (ab.sh, outbox_http.sh): `use_dataset BACKEND DATASET` sets
# `url` to the data set's database and exports what bench/wrk/autoshop.lua reads from its seed
# file (the data set that bench/run.sh generates).
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
