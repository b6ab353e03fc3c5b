//! Load hold: measures the server's capacity on a mixed workload (the highest open-loop rate it
//! keeps up with, found down from what 32 closed-loop connections get), then holds about 80% of
//! it at a constant rate for a while, and fails on any error or on memory that keeps growing. The hold
//! alternates turns without and beside a few hundred slow clients (`slow_clients.rs`), at least
//! three of each and none longer than 15 s, so that a drift of the machine (another build) weighs
//! on both; it fails when the slow clients raise the p99 latency of the others: the median over
//! the turns (which one stall of the machine does not move) past 1.5 times its value without
//! them plus 5 ms, and every turn beside them slower than every turn without (so that the
//! spread the machine shows between turns of the same kind counts as noise).
//!
//! `cargo run --release --example soak -- --base http://127.0.0.1:8080 --key ask_... --pid 1234 --seconds 300 [--slow-clients 300]`
//! (`bench/soak.sh` starts a server with demo data and runs this).

mod slow_clients;

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use serde_json::{Value, json};
use tokio::sync::{Mutex, Semaphore};

struct Args {
    base: String,
    key: String,
    pid: u32,
    seconds: u64,
    fraction: f64,
    slow_clients: usize,
}

fn parse_args() -> Args {
    let mut args = Args { base: String::new(), key: String::new(), pid: 0, seconds: 300, fraction: 0.8, slow_clients: 300 };
    let raw: Vec<String> = std::env::args().skip(1).collect();
    for pair in raw.chunks(2) {
        let value = pair.get(1).cloned().unwrap_or_default();
        match pair[0].as_str() {
            "--base" => args.base = value,
            "--key" => args.key = value,
            "--pid" => args.pid = value.parse().expect("--pid"),
            "--seconds" => args.seconds = value.parse().expect("--seconds"),
            "--fraction" => args.fraction = value.parse().expect("--fraction"),
            "--slow-clients" => args.slow_clients = value.parse().expect("--slow-clients"),
            other => panic!("unknown argument {other}"),
        }
    }
    assert!(!args.base.is_empty() && !args.key.is_empty() && args.pid > 0, "--base, --key and --pid are required");
    args
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| l.split_whitespace().nth(1)?.parse().ok()))
        .unwrap_or(0)
}

/// One memory sample: the server's RSS and, of it, what SQLite's caches hold (`/metrics`).
#[derive(Clone, Copy, Default)]
struct Sample {
    rss_kib: u64,
    sqlite_kib: u64,
}

impl Sample {
    /// Memory outside SQLite's caches: what a leak in the server would grow.
    fn other_kib(&self) -> u64 {
        self.rss_kib.saturating_sub(self.sqlite_kib)
    }
}

async fn sample(client: &reqwest::Client, args: &Args) -> Sample {
    let metrics = match client.get(format!("{}/metrics", args.base)).send().await {
        Ok(response) => response.text().await.unwrap_or_default(),
        Err(_) => String::new(),
    };
    let sqlite_bytes: f64 = metrics
        .lines()
        .find_map(|line| line.strip_prefix("sqlite_memory_bytes ")?.trim().parse().ok())
        .unwrap_or(0.0);
    Sample { rss_kib: rss_kib(args.pid), sqlite_kib: sqlite_bytes as u64 / 1024 }
}

#[derive(Default)]
struct Tally {
    ok: AtomicU64,
    errors: AtomicU64,
    latencies_us: Mutex<Vec<u64>>,
}

/// One request of the mix: 8 in 10 reads of various lists, 2 in 10 appointment creates.
async fn one(client: &reqwest::Client, base: &str, key: &str, shop: i64, n: u64, tally: &Tally) {
    let started = Instant::now();
    let req = match n % 10 {
        0..=2 => client.get(format!("{base}/api/v1/appointments")),
        3 => client.get(format!(
            "{base}/api/v1/appointments?filter[shop_id]={shop}&start_date=2026-01-01&end_date=2027-12-31&filter_by=appointment_start&sort=-date"
        )),
        4 => client.get(format!("{base}/api/v1/customers?filter[last_name]=son")),
        5 => client.get(format!("{base}/api/v1/customers?with_details=true")),
        6 => client.get(format!("{base}/api/v1/bays")),
        7 => client.get(format!("{base}/api/v1/settings/shop_hours")),
        _ => client.post(format!("{base}/api/v1/appointments")).json(&json!({
            // Far outside the read mix's date range, so the reads cost the same at the end of a long
            // hold as at its start: what is measured is the server, not a growing result set.
            "shop_id": shop, "date": format!("2031-{:02}-{:02}T{:02}:00:00", 1 + n % 12, 1 + n % 28, 8 + n % 9),
            "year": "2021", "make": "Honda", "model": "Civic", "home_phone": "", "work_phone": "", "cell_phone": "555-0100",
            "first_name": "Soak", "last_name": format!("Test{n}")
        })),
    };
    let ok = match req.bearer_auth(key).send().await {
        Ok(resp) => {
            let ok = resp.status().is_success();
            let _ = resp.bytes().await;
            ok
        }
        Err(_) => false,
    };
    if ok {
        tally.ok.fetch_add(1, Ordering::Relaxed);
        tally.latencies_us.lock().await.push(started.elapsed().as_micros() as u64);
    } else {
        tally.errors.fetch_add(1, Ordering::Relaxed);
    }
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize] as f64 / 1000.0
}

#[tokio::main]
async fn main() {
    let args = parse_args();
    // reqwest is built with rustls and no default crypto provider: pick ring, as the server does.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder().pool_max_idle_per_host(64).build().unwrap();
    let shops: Value = client
        .get(format!("{}/api/v1/settings/shop_info", args.base))
        .bearer_auth(&args.key)
        .send()
        .await
        .expect("server reachable")
        .json()
        .await
        .unwrap();
    let shop = shops["data"][0]["shop_id"].as_i64().expect("the company has a shop");

    // 1. Capacity: 32 closed-loop workers for 5 s.
    let tally = Arc::new(Tally::default());
    let counter = Arc::new(AtomicU64::new(0));
    let until = Instant::now() + Duration::from_secs(5);
    let mut workers = Vec::new();
    for _ in 0..32 {
        let (client, base, key, tally, counter) = (client.clone(), args.base.clone(), args.key.clone(), tally.clone(), counter.clone());
        workers.push(tokio::spawn(async move {
            while Instant::now() < until {
                let n = counter.fetch_add(1, Ordering::Relaxed);
                one(&client, &base, &key, shop, n, &tally).await;
            }
        }));
    }
    for w in workers {
        w.await.unwrap();
    }
    let closed_loop = tally.ok.load(Ordering::Relaxed) as f64 / 5.0;
    // 2. The rate the server sustains: 32 closed-loop workers overstate it (the hold at 80% of
    // their figure fell behind its schedule and its p99 climbed turn after turn). From there,
    // down in steps of a tenth, the first open-loop rate held for 5 s on schedule with a p99
    // under 100 ms.
    let mut capacity = closed_loop;
    let mut discard = Vec::new();
    for step in 0..8 {
        let rate = closed_loop * (1.0 - 0.1 * step as f64);
        let probe = Arc::new(Tally::default());
        let started = Instant::now();
        hold(&client, &args, shop, rate, 5.0, &probe, &mut discard).await;
        let mut lat = probe.latencies_us.lock().await.clone();
        lat.sort_unstable();
        let (elapsed, p99) = (started.elapsed().as_secs_f64(), percentile(&lat, 0.99));
        println!("probe: {rate:.0} req/s for 5 s took {elapsed:.1} s, p99 {p99:.1} ms");
        capacity = rate;
        if elapsed <= 5.25 && p99 < 100.0 {
            break;
        }
    }
    let rate = (capacity * args.fraction).max(1.0);
    // `--seconds` in all, as turns of at most 15 s, at least three of each kind.
    let pairs = args.seconds.div_ceil(30).max(3);
    let turn_seconds = (args.seconds as f64 / (2 * pairs) as f64).max(1.0);
    println!(
        "capacity: {capacity:.0} req/s sustained ({closed_loop:.0} req/s from 32 closed-loop connections; mixed workload); holding {rate:.0} req/s in {} turns of {turn_seconds:.0} s",
        2 * pairs
    );

    // 2. Hold `rate` req/s in turns: without slow clients, beside them, and so on. Memory is
    // sampled every second throughout.
    let (without, with) = (Arc::new(Tally::default()), Arc::new(Tally::default()));
    let slow_stats = Arc::new(slow_clients::Stats::default());
    let addr = args.base.trim_start_matches("http://").to_owned();
    let mut rss = Vec::new();
    let mut turn_p99s: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    let started = Instant::now();
    for turn in 0..2 * pairs {
        let beside = turn % 2 == 1;
        let slow = beside.then(|| slow_clients::start(&addr, &args.key, args.slow_clients, slow_stats.clone()));
        let tally = if beside { &with } else { &without };
        let from = tally.latencies_us.lock().await.len();
        hold(&client, &args, shop, rate, turn_seconds, tally, &mut rss).await;
        drop(slow);
        let mut lat = tally.latencies_us.lock().await[from..].to_vec();
        lat.sort_unstable();
        turn_p99s[beside as usize].push(percentile(&lat, 0.99));
    }
    let elapsed = started.elapsed().as_secs_f64();
    let mut failed = false;
    for (tally, label) in [(&without, "without slow clients"), (&with, "beside slow clients")] {
        let mut lat = tally.latencies_us.lock().await.clone();
        lat.sort_unstable();
        let (ok, errors) = (tally.ok.load(Ordering::Relaxed), tally.errors.load(Ordering::Relaxed));
        println!(
            "held {:.0} req/s for {pairs} x {turn_seconds:.0} s {label}: {ok} ok, {errors} errors; p50 {:.1} ms, p99 {:.1} ms",
            ok as f64 / (pairs as f64 * turn_seconds),
            percentile(&lat, 0.5),
            percentile(&lat, 0.99)
        );
        if errors > 0 {
            eprintln!("soak: {errors} requests failed {label}");
            failed = true;
        }
    }
    println!(
        "slow clients: {} at a time (trickled heads, silent connections, trickled bodies): {} connections, {} ended by the server",
        args.slow_clients,
        slow_stats.connections.load(Ordering::Relaxed),
        slow_stats.ended_by_server.load(Ordering::Relaxed)
    );
    let shown = |p99s: &[f64]| p99s.iter().map(|p| format!("{p:.1}")).collect::<Vec<_>>().join(" ");
    println!("p99 of each turn, ms: without {}; beside {}", shown(&turn_p99s[0]), shown(&turn_p99s[1]));
    let slowest_without = turn_p99s[0].iter().copied().fold(0.0, f64::max);
    let fastest_beside = turn_p99s[1].iter().copied().fold(f64::INFINITY, f64::min);
    let [alone, beside] = turn_p99s.map(|mut p99s| {
        p99s.sort_by(f64::total_cmp);
        let n = p99s.len();
        if n % 2 == 1 { p99s[n / 2] } else { (p99s[n / 2 - 1] + p99s[n / 2]) / 2.0 }
    });
    let ratio = if alone > 0.0 { beside / alone } else { 0.0 };
    println!("median p99 beside slow clients / without: {beside:.1} ms / {alone:.1} ms = {ratio:.2}");
    if beside > 1.5 * alone + 5.0 && fastest_beside > slowest_without {
        eprintln!(
            "soak: slow clients raised the others' p99 from {alone:.1} ms to {beside:.1} ms (limit 1.5 x + 5 ms), every turn beside them slower than every turn without"
        );
        failed = true;
    }
    // SQLite's page caches (16 MB for the writer, 2 MB per reader) fill while writes add pages,
    // and hold what they filled: they are measured apart (`sqlite_memory_bytes`). The rest of the
    // server's memory may grow in the second half of the hold by 10% (at least 8 MiB) of its level
    // at half-time; a leak keeps growing past that.
    let warm = rss.get(rss.len() / 2).copied().unwrap_or_default();
    let last = rss.last().copied().unwrap_or_default();
    let max = rss.iter().map(|s| s.rss_kib).max().unwrap_or(0);
    let allowed = warm.other_kib() + (warm.other_kib() / 10).max(8 * 1024);
    println!(
        "RSS over {elapsed:.0} s: at half-time {} MiB (SQLite caches {} MiB), at end {} MiB (SQLite caches {} MiB), max {} MiB",
        warm.rss_kib / 1024,
        warm.sqlite_kib / 1024,
        last.rss_kib / 1024,
        last.sqlite_kib / 1024,
        max / 1024
    );
    // Flat memory: under the 100 MB target throughout, and, over a hold long enough to tell a
    // leak from the allocator keeping what a stall of the machine made it allocate (a 30 s
    // hold on a loaded machine grew 15 MiB outside SQLite that way, and stays there), no growth
    // past the caches'.
    let judges_growth = elapsed >= 120.0;
    if !judges_growth {
        println!("(growth outside SQLite's caches is judged on holds of 120 s or more: {} MiB here)", (last.other_kib() as i64 - warm.other_kib() as i64) / 1024);
    }
    if max > 100 * 1024 || (judges_growth && last.other_kib() > allowed) {
        eprintln!(
            "soak: memory not flat: outside SQLite's caches {} MiB at half-time, {} MiB at the end (allowed {} MiB); max RSS {} MiB",
            warm.other_kib() / 1024,
            last.other_kib() / 1024,
            allowed / 1024,
            max / 1024
        );
        failed = true;
    }
    if failed {
        std::process::exit(1);
    }
    println!("soak: passed");
}

/// Holds `rate` req/s for `seconds` (open loop, at most 256 in flight), recording into `tally`
/// and sampling the server's memory every second into `rss`.
async fn hold(client: &reqwest::Client, args: &Args, shop: i64, rate: f64, seconds: f64, tally: &Arc<Tally>, rss: &mut Vec<Sample>) {
    let in_flight = Arc::new(Semaphore::new(256));
    let started = Instant::now();
    let total = (rate * seconds) as u64;
    let mut next_sample = Instant::now();
    let mut handles = Vec::new();
    for n in 0..total {
        let due = started + Duration::from_secs_f64(n as f64 / rate);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            tokio::time::sleep(wait).await;
        }
        if Instant::now() >= next_sample {
            rss.push(sample(client, args).await);
            next_sample += Duration::from_secs(1);
        }
        let permit = in_flight.clone().acquire_owned().await.unwrap();
        let (client, base, key, tally) = (client.clone(), args.base.clone(), args.key.clone(), tally.clone());
        handles.push(tokio::spawn(async move {
            one(&client, &base, &key, shop, n, &tally).await;
            drop(permit);
        }));
        if handles.len() > 4096 {
            handles.retain(|h| !h.is_finished());
        }
    }
    for h in handles {
        h.await.unwrap();
    }
}
