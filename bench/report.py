#!/usr/bin/env python3
"""Prints a results file of bench/run.sh (JSON lines) as tables: every figure with its ceiling
and ratio, the 10k-vs-1M latency comparison, resident memory, and the targets: storage v2's (issue
#11), the cost of safe retries (#13) and of the feed (#12), and the first benchmark's (#5)."""

import json
import sys

rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]


def find(backend, dataset, case, conns):
    for r in rows:
        if (r["backend"], r["dataset"], r["case"], r["conns"]) == (backend, dataset, case, conns):
            return r
    return None


STATIC_FOR = {"appts_details": "static_appts_details", "cust_details": "static_cust_details", "events_page": "static_events"}
PGBENCH_FOR = {"appts_default": "pgbench_default", "appts_range": "pgbench_range"}
targets = []
# Storage v2 (issue #11): share of the static ceiling serving the same bytes, and write rates.
SQLITE_STATIC_FLOOR = {"appts_default": 0.25, "appts_range": 0.15, "appts_details": 0.15, "cust_details": 0.15}
WRITE_FLOOR = {("sqlite", "post_appointment"): 5000, ("postgres", "post_appointment"): 4000, ("sqlite", "put_customer"): 3000}

backends = sorted({r["backend"] for r in rows}, key=lambda b: b != "sqlite")
for backend in backends:
    loaded = [r for r in rows if r["backend"] == backend and r["dataset"] == "main" and r["conns"] > 1
              and not r["case"].startswith(("static_", "pgbench_"))]
    if not loaded:
        continue
    print(f"### {backend}: loaded (main data set)\n")
    print("| case | conns | req/s | p50 ms | p99 ms | static ceiling req/s | ratio | pgbench tx/s | ratio | RSS MB |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in loaded:
        static = find(backend, "main", STATIC_FOR.get(r["case"], "static_page"), r["conns"])
        pg = find(backend, "main", PGBENCH_FOR[r["case"]], r["conns"]) if r["case"] in PGBENCH_FOR else None
        s_rps = static["rps"] if static else None
        s_ratio = r["rps"] / s_rps if s_rps else None
        p_ratio = r["rps"] / pg["rps"] if pg else None
        print(f"| {r['case']} | {r['conns']} | {r['rps']:.0f} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} | "
              f"{s_rps or 0:.0f} | {s_ratio or 0:.1%} | {pg['rps'] if pg else 0:.0f} | "
              f"{'%.1f%%' % (100 * p_ratio) if p_ratio else '-'} | {r['rss_kb'] / 1024:.0f} |")
        if backend == "sqlite" and s_ratio is not None and r["case"] in SQLITE_STATIC_FLOOR:
            floor = SQLITE_STATIC_FLOOR[r["case"]]
            targets.append((f"sqlite {r['case']} c={r['conns']} >= {floor:.0%} of static", s_ratio >= floor, f"{s_ratio:.1%}"))
        if backend == "postgres" and p_ratio is not None:
            targets.append((f"postgres {r['case']} c={r['conns']} >= 50% of pgbench", p_ratio >= 0.5, f"{p_ratio:.1%}"))
        floor = WRITE_FLOOR.get((backend, r["case"]))
        if floor:
            targets.append((f"{backend} {r['case']} c={r['conns']} >= {floor}/s", r["rps"] >= floor, f"{r['rps']:.0f}/s"))
        # A feed page of 100 events is served at list-page speed (issue #12): against the default
        # list page (10 rows, a fifth of the bytes), against a list page of as many items, and as
        # a share of the static ceiling for its own bytes compared with the default page's share.
        page = find(backend, "main", "appts_default", r["conns"])
        if r["case"] == "events_page" and page:
            ratio = r["rps"] / page["rps"]
            targets.append((f"{backend} events_page c={r['conns']} >= 90% of appts_default (req/s)", ratio >= 0.9, f"{ratio:.1%}"))
            page100 = find(backend, "main", "appts_page100", r["conns"])
            if page100:
                ratio = r["rps"] / page100["rps"]
                targets.append((f"{backend} events_page c={r['conns']} >= 90% of appts_page100 (req/s)", ratio >= 0.9, f"{ratio:.1%}"))
            page_static = find(backend, "main", "static_page", r["conns"])
            if static and page_static:
                ratio = (r["rps"] / static["rps"]) / (page["rps"] / page_static["rps"])
                targets.append((f"{backend} events_page c={r['conns']} share of its static >= 90% of appts_default's", ratio >= 0.9, f"{ratio:.1%}"))
        # Safe retries and conditional requests cost little (issue #13): a keyed POST within 20%
        # of an unkeyed one, a conditional GET within 5% of a plain one.
        for case, base, floor in (("post_keyed", "post_appointment", 0.80), ("get_customer_inm", "get_customer", 0.95)):
            plain = find(backend, "main", base, r["conns"])
            if r["case"] == case and plain:
                ratio = r["rps"] / plain["rps"]
                targets.append((f"{backend} {case} c={r['conns']} >= {floor:.0%} of {base}", ratio >= floor, f"{ratio:.1%}"))
        if r["case"] in ("cust_last_name", "cust_phone"):
            targets.append((f"{backend} {r['case']} c={r['conns']} p99 < 50 ms (loaded)", r["p99_ms"] < 50, f"{r['p99_ms']:.1f} ms"))
    print()

    print(f"### {backend}: unloaded latency (1 connection), small vs main data set\n")
    print("| case | small req/s | small p50 | small p99 | main req/s | main p50 | main p99 | p99 main/small |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for case in ["appts_default", "appts_range", "appts_date", "cust_number", "cust_shop", "cust_default", "cust_last_name", "cust_phone"]:
        small, main = find(backend, "small", case, 1), find(backend, "main", case, 1)
        if not (small and main):
            continue
        ratio = main["p99_ms"] / small["p99_ms"] if small["p99_ms"] else 0
        print(f"| {case} | {small['rps']:.0f} | {small['p50_ms']:.2f} | {small['p99_ms']:.2f} | {main['rps']:.0f} | "
              f"{main['p50_ms']:.2f} | {main['p99_ms']:.2f} | {ratio:.2f}x |")
        if case.startswith(("cust_last", "cust_phone")):
            targets.append((f"{backend} {case} p99 < 50 ms (1 connection)", main["p99_ms"] < 50, f"{main['p99_ms']:.1f} ms"))
        else:
            targets.append((f"{backend} {case} p99 main <= 1.5x small", ratio <= 1.5, f"{ratio:.2f}x"))
    print()
    rss = max((r.get("rss_kb", 0) for r in rows if r["backend"] == backend and not r["case"].startswith(("static_", "pgbench_"))), default=0)
    targets.append((f"{backend} RSS under load <= 100 MB", rss <= 100 * 1024, f"{rss / 1024:.0f} MB"))

if targets:
    print("### Targets\n")
    print("| target | measured | met |")
    print("|---|---:|---|")
    for name, ok, value in targets:
        print(f"| {name} | {value} | {'yes' if ok else '**no**'} |")
