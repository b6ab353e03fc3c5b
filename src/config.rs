//! Command line and environment: one place that lists every setting.

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "autoshop", version, about = "Shop-management API server for automotive service locations")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the HTTP server (migrates the database first).
    Serve(ServeArgs),
    /// Bring the database schema up to date and exit.
    Migrate(DatabaseArgs),
    /// Manage companies (operators only; there is no HTTP surface for this).
    #[command(subcommand)]
    Company(CompanyCommand),
    /// Write a consistent copy of a SQLite database to a new file, while a server may be
    /// writing to it (on PostgreSQL, use `pg_dump`).
    Backup {
        /// The copy to write; it must not exist yet.
        #[arg(long)]
        to: PathBuf,
        #[command(flatten)]
        database: DatabaseArgs,
    },
}

#[derive(Debug, Subcommand)]
pub enum CompanyCommand {
    /// Create a company and print `{"company_id": N, "api_key": "..."}` (an admin key).
    Create {
        #[arg(long)]
        name: String,
        #[command(flatten)]
        database: DatabaseArgs,
    },
}

#[derive(Debug, Clone, Args)]
pub struct DatabaseArgs {
    /// Database URL: `sqlite://FILE` (created if missing) or `postgres://USER@HOST/DB`.
    #[arg(long, env = "AUTOSHOP_DATABASE_URL", default_value = "sqlite://autoshop.db")]
    pub database_url: String,
    /// PostgreSQL pool size per process (default 16), or the number of SQLite read connections
    /// (default twice the CPU count: each SQLite connection is a thread with its own page cache,
    /// and more of them than cores only adds switching and memory).
    #[arg(long, env = "AUTOSHOP_DB_MAX_CONNECTIONS")]
    pub db_max_connections: Option<u32>,
}

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, env = "AUTOSHOP_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    #[command(flatten)]
    pub database: DatabaseArgs,
    /// Base URL for absolute links in list responses (e.g. `https://api.example.com`). Default:
    /// `http://` plus the request's Host header.
    #[arg(long, env = "AUTOSHOP_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// Load a demo company when the database has no company yet, and print its admin key.
    #[arg(long, env = "AUTOSHOP_DEMO")]
    pub demo: bool,
    /// Log filter, in tracing's EnvFilter syntax.
    #[arg(long, env = "AUTOSHOP_LOG", default_value = "info")]
    pub log: String,
    /// Write logs as JSON lines instead of text.
    #[arg(long, env = "AUTOSHOP_LOG_JSON")]
    pub log_json: bool,
    /// Largest accepted request body, in bytes.
    #[arg(long, env = "AUTOSHOP_MAX_BODY_BYTES", default_value_t = 1024 * 1024)]
    pub max_body_bytes: usize,
    /// Largest accepted CSV file on `POST /api/v1/customers/import`, in bytes.
    #[arg(long, env = "AUTOSHOP_IMPORT_MAX_BYTES", default_value_t = 64 * 1024 * 1024)]
    pub import_max_bytes: usize,
    /// Requests running longer than this many seconds are answered 503 with `Retry-After: 1`.
    #[arg(long, env = "AUTOSHOP_REQUEST_TIMEOUT_SECS", default_value = "30", value_parser = parse_secs)]
    pub request_timeout_secs: Duration,
    #[command(flatten)]
    pub transport: TransportArgs,
    /// Requests per second allowed per API key, per process; 0 turns rate limiting off.
    #[arg(long, env = "AUTOSHOP_RATE_LIMIT", default_value_t = 100.0)]
    pub rate_limit: f64,
    /// Requests a key may make at once before the per-second rate applies.
    #[arg(long, env = "AUTOSHOP_RATE_LIMIT_BURST", default_value_t = 200.0)]
    pub rate_limit_burst: f64,
    /// Days events are kept in the change feed; a cursor older than that answers 410.
    #[arg(long, env = "AUTOSHOP_EVENT_RETENTION_DAYS", default_value_t = 30, value_parser = clap::value_parser!(u32).range(1..))]
    pub event_retention_days: u32,
    /// Seconds a slot hold (`POST /api/v1/holds`) keeps its bay before it expires.
    #[arg(long, env = "AUTOSHOP_HOLD_TTL_SECS", default_value_t = 600, value_parser = clap::value_parser!(u32).range(1..=86_400))]
    pub hold_ttl_secs: u32,
    /// CSV exports running at once, per process: each reads on a database connection of its own
    /// (beyond the pool's), so this bounds them; one more answers 503 with `Retry-After`.
    #[arg(long, env = "AUTOSHOP_MAX_EXPORTS", default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub max_exports: u32,
    /// Let webhooks point at loopback, private and link-local addresses (for receivers on the
    /// same host or network; never on a multi-tenant server).
    #[arg(long, env = "AUTOSHOP_WEBHOOK_ALLOW_PRIVATE")]
    pub webhook_allow_private: bool,
    /// Webhook deliveries in flight at once, per process.
    #[arg(long, env = "AUTOSHOP_WEBHOOK_CONCURRENCY", default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub webhook_concurrency: u32,
    /// Seconds to wait before each retry of a failed webhook delivery, comma-separated; after the
    /// last one the delivery has failed.
    #[arg(long, env = "AUTOSHOP_WEBHOOK_RETRY_SCHEDULE", default_value = "5,300,1800,7200,18000,36000,36000", value_parser = parse_schedule)]
    pub webhook_retry_schedule: RetrySchedule,
    /// Write the port actually bound to this file once listening (useful with port 0).
    #[arg(long, env = "AUTOSHOP_PORT_FILE", hide = true)]
    pub port_file: Option<PathBuf>,
}

/// How long the server waits for each part of an exchange, and how many connections it keeps
/// (docs/operations.md). Seconds may have a fraction (`0.5`).
#[derive(Debug, Clone, Args)]
pub struct TransportArgs {
    /// Seconds a client has to send a request's headers, counted from the connection's opening
    /// for its first request and from the first byte for later ones; then the connection is closed.
    #[arg(long, env = "AUTOSHOP_HEADER_TIMEOUT_SECS", default_value = "10", value_parser = parse_secs)]
    pub header_timeout_secs: Duration,
    /// Seconds a request body may pause between two reads; then the request is answered 408 and
    /// the connection closed.
    #[arg(long, env = "AUTOSHOP_BODY_TIMEOUT_SECS", default_value = "10", value_parser = parse_secs)]
    pub body_timeout_secs: Duration,
    /// Seconds a response write may wait on a client that does not read; then the connection is
    /// closed.
    #[arg(long, env = "AUTOSHOP_WRITE_TIMEOUT_SECS", default_value = "30", value_parser = parse_secs)]
    pub write_timeout_secs: Duration,
    /// Seconds a keep-alive connection may wait for its next request. Behind a load balancer,
    /// make it longer than the balancer's own idle timeout.
    #[arg(long, env = "AUTOSHOP_IDLE_TIMEOUT_SECS", default_value = "75", value_parser = parse_secs)]
    pub idle_timeout_secs: Duration,
    /// Seconds spent reading and discarding the rest of a body the server answered without
    /// reading (a 401, 403, 404...), so the connection can serve the next request; a body that
    /// takes longer, or is larger than the body limit, is answered with `Connection: close`.
    #[arg(long, env = "AUTOSHOP_DISCARD_TIMEOUT_SECS", default_value = "2", value_parser = parse_secs)]
    pub discard_timeout_secs: Duration,
    /// Open connections at most; past it new connections are answered 503 and closed at once.
    #[arg(long, env = "AUTOSHOP_MAX_CONNECTIONS", default_value_t = 4096, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_connections: u32,
}

/// The transport settings (see [`TransportArgs`]).
#[derive(Debug, Clone)]
pub struct Transport {
    pub header_timeout: Duration,
    pub body_timeout: Duration,
    pub write_timeout: Duration,
    pub idle_timeout: Duration,
    pub discard_timeout: Duration,
    pub max_connections: usize,
}

impl Default for Transport {
    fn default() -> Self {
        Transport {
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(10),
            write_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(75),
            discard_timeout: Duration::from_secs(2),
            max_connections: 4096,
        }
    }
}

impl From<&TransportArgs> for Transport {
    fn from(args: &TransportArgs) -> Self {
        Transport {
            header_timeout: args.header_timeout_secs,
            body_timeout: args.body_timeout_secs,
            write_timeout: args.write_timeout_secs,
            idle_timeout: args.idle_timeout_secs,
            discard_timeout: args.discard_timeout_secs,
            max_connections: args.max_connections as usize,
        }
    }
}

/// Settings the running application needs (a subset of the CLI, testable without clap).
#[derive(Debug, Clone)]
pub struct AppConfig {
    pub public_url: Option<String>,
    pub max_body_bytes: usize,
    pub import_max_bytes: usize,
    /// The per-request deadline: past it the answer is a 503 with `Retry-After`.
    pub request_timeout: Duration,
    pub transport: Transport,
    pub rate_limit: f64,
    pub rate_limit_burst: f64,
    pub event_retention_days: u32,
    pub hold_ttl_secs: u32,
    pub max_exports: u32,
    pub webhook_allow_private: bool,
    pub webhook_concurrency: u32,
    pub webhook_retry_schedule: RetrySchedule,
}

/// Waits between webhook delivery attempts.
#[derive(Debug, Clone, PartialEq)]
pub struct RetrySchedule(pub Vec<Duration>);

/// Seconds, possibly with a fraction, from 1 ms to one day.
fn parse_secs(raw: &str) -> Result<Duration, String> {
    raw.trim()
        .parse::<f64>()
        .ok()
        .filter(|n| n.is_finite() && (0.001..=86_400.0).contains(n))
        .map(Duration::from_secs_f64)
        .ok_or_else(|| "expected seconds from 0.001 to 86400".to_owned())
}

fn parse_schedule(raw: &str) -> Result<RetrySchedule, String> {
    let waits = raw
        .split(',')
        .map(|s| s.trim().parse::<f64>().ok().filter(|n| n.is_finite() && *n >= 0.0 && *n <= 7.0 * 86_400.0))
        .map(|n| n.map(Duration::from_secs_f64))
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| "expected comma-separated seconds, each from 0 to 604800".to_owned())?;
    if waits.len() > 20 {
        return Err("at most 20 retries".into());
    }
    Ok(RetrySchedule(waits))
}

impl AppConfig {
    /// The largest body a request to `path` may send: imports take files.
    pub fn body_limit_for(&self, path: &str) -> usize {
        if path == crate::customers::IMPORT_PATH { self.import_max_bytes } else { self.max_body_bytes }
    }
}

impl Default for AppConfig {
    fn default() -> Self {
        AppConfig {
            public_url: None,
            max_body_bytes: 1024 * 1024,
            import_max_bytes: 64 * 1024 * 1024,
            request_timeout: Duration::from_secs(30),
            transport: Transport::default(),
            rate_limit: 100.0,
            rate_limit_burst: 200.0,
            event_retention_days: 30,
            hold_ttl_secs: 600,
            max_exports: 4,
            webhook_allow_private: false,
            webhook_concurrency: 32,
            webhook_retry_schedule: RetrySchedule(crate::webhooks::dispatch::default_retry_schedule()),
        }
    }
}

impl From<&ServeArgs> for AppConfig {
    fn from(args: &ServeArgs) -> Self {
        AppConfig {
            public_url: args.public_url.as_ref().map(|u| u.trim_end_matches('/').to_owned()),
            max_body_bytes: args.max_body_bytes,
            import_max_bytes: args.import_max_bytes,
            request_timeout: args.request_timeout_secs,
            transport: Transport::from(&args.transport),
            rate_limit: args.rate_limit,
            rate_limit_burst: args.rate_limit_burst,
            event_retention_days: args.event_retention_days,
            hold_ttl_secs: args.hold_ttl_secs,
            max_exports: args.max_exports,
            webhook_allow_private: args.webhook_allow_private,
            webhook_concurrency: args.webhook_concurrency,
            webhook_retry_schedule: args.webhook_retry_schedule.clone(),
        }
    }
}

impl DatabaseArgs {
    /// The pool size: as given, or the backend's default.
    pub fn max_connections(&self) -> u32 {
        self.db_max_connections.unwrap_or_else(|| {
            if self.database_url.starts_with("sqlite:") {
                let cores = std::thread::available_parallelism().map(|n| n.get() as u32).unwrap_or(2);
                (2 * cores).max(2)
            } else {
                16
            }
        })
    }
}
