# Sourced by the scripts that compare two builds side by side (ab_builds.sh, outbox_http.sh),
# and by post_cost.sh for its one server (`pair_start NAME BINARY PORT`):
# `place NAME BINARY NAME BINARY` serves the data set at `url` (see dataset.sh) with the first
# build on `port`, started first, and the second on `port + 1`, after stopping any pair already
# running. Two servers of one build differ by several percent by their place alone (port and
# start order: bench/RESULTS.md, tenth session), so the callers make the builds trade places
# halfway through their rounds. `pid_of[NAME]` and `port_of[NAME]` tell where each runs.
declare -A pid_of=() port_of=()
pair_logs=$(mktemp -d)
pair_pids() { local name; for name in "${!pid_of[@]}"; do echo "${pid_of[$name]}"; done; }
pair_stop() {
  local pids
  pids=$(pair_pids)
  if [ -n "$pids" ]; then kill $pids 2>/dev/null || true; wait $pids 2>/dev/null || true; fi
  pid_of=(); port_of=()
}
trap 'pair_stop; rm -rf "$pair_logs"' EXIT
pair_start() { # name binary port
  "$2" serve --rate-limit 0 --listen "127.0.0.1:$3" --database-url "$url" --log warn >"$pair_logs/$1.log" 2>&1 &
  pid_of[$1]=$!; port_of[$1]=$3
  for _ in $(seq 1 300); do curl -sf "http://127.0.0.1:$3/readyz" >/dev/null && return; sleep 0.2; done
  echo "bench: server $1 not ready" >&2; cat "$pair_logs/$1.log" >&2; exit 1
}
place() { # first-name first-binary second-name second-binary
  pair_stop
  pair_start "$1" "$2" "$port"
  pair_start "$3" "$4" "$((port + 1))"
}
ticks() { # pid: its CPU time so far (user + system), in clock ticks
  awk '{print $14 + $15}' "/proc/$1/stat"
}
