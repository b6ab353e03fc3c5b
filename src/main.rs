use std::time::Duration;

use anyhow::Context;
use autoshop::{
    api_keys,
    config::{AppConfig, Cli, Command, CompanyCommand, DatabaseArgs, ServeArgs},
    db::{Db, DbConfig},
    demo, server,
};
use clap::Parser;
use tracing_subscriber::EnvFilter;

/// mimalloc for Rust's allocations: rows are decoded on SQLite's blocking threads and freed on
/// the runtime's workers, and glibc's malloc, held to two arenas below, spent about a fifth of
/// the server's CPU on its arena locks in that pattern (perf, event feed on SQLite). Built
/// without transparent huge pages (`no_thp`) and set to return freed pages at once: with either
/// left at its default the server's RSS doubled under load (bench/RESULTS.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    if !purge_freed_memory_at_once() {
        eprintln!("warning: mimalloc's purge delay option was not where expected; left at its default");
    }
    limit_malloc_arenas();
    if cfg!(feature = "bench-outbox-off") {
        eprintln!("warning: built with the bench-outbox-off feature: no change records its event (feed, stream and webhooks get nothing); for bench/outbox_http.sh only");
    }
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(run())
}

/// mimalloc keeps freed pages for a second (`purge_delay`, 1000 ms) before returning them.
/// The option is set only where its index still holds that default, so a mimalloc whose enum
/// moved leaves every option alone rather than zeroing another one.
fn purge_freed_memory_at_once() -> bool {
    /// `mi_option_purge_delay` in the `mi_option_e` enum of the mimalloc 3 the `mimalloc` crate
    /// builds (`include/mimalloc.h`); the crate's own bindings do not name it.
    const MI_OPTION_PURGE_DELAY: std::ffi::c_int = 15;
    const DEFAULT_PURGE_DELAY_MS: std::ffi::c_long = 1000;
    unsafe extern "C" {
        fn mi_option_get(option: std::ffi::c_int) -> std::ffi::c_long;
        fn mi_option_set(option: std::ffi::c_int, value: std::ffi::c_long);
    }
    // SAFETY: reads and sets a tuning option; mimalloc reads options atomically.
    unsafe {
        if mi_option_get(MI_OPTION_PURGE_DELAY) != DEFAULT_PURGE_DELAY_MS {
            return false;
        }
        mi_option_set(MI_OPTION_PURGE_DELAY, 0);
        mi_option_get(MI_OPTION_PURGE_DELAY) == 0
    }
}

#[cfg(test)]
mod tests {
    /// The hard-coded option index still names the purge delay of the mimalloc we build.
    #[test]
    fn the_purge_delay_option_is_found_and_set() {
        assert!(super::purge_freed_memory_at_once());
    }
}

/// glibc gives each thread that allocates its own arena, up to 8 per core, and keeps what they
/// free: with SQLite working on many blocking threads, the server's RSS crept past 100 MB under
/// load (bench/soak.sh). Two arenas keep it flat at no measurable cost. Set before any thread
/// starts; `MALLOC_ARENA_MAX` in the environment still wins.
fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        const M_ARENA_MAX: std::ffi::c_int = -8;
        unsafe extern "C" {
            fn mallopt(param: std::ffi::c_int, value: std::ffi::c_int) -> std::ffi::c_int;
        }
        if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
            // SAFETY: mallopt only adjusts allocator tuning; called before any other thread exists.
            unsafe { mallopt(M_ARENA_MAX, 2) };
        }
    }
}

async fn run() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Serve(args) => serve(args).await,
        Command::Migrate(database) => {
            init_logging("warn", false);
            open(&database).await?;
            eprintln!("database is up to date");
            Ok(())
        }
        Command::Company(CompanyCommand::Create { name, database }) => {
            init_logging("warn", false);
            let name = name.trim();
            anyhow::ensure!(!name.is_empty(), "--name must not be empty");
            let db = open(&database).await?;
            let (company_id, api_key) = api_keys::create_company(&db, name).await?;
            println!("{}", serde_json::json!({"company_id": company_id, "api_key": api_key}));
            db.close().await;
            Ok(())
        }
        Command::Backup { to, database } => {
            init_logging("warn", false);
            let url = database.database_url.as_str();
            anyhow::ensure!(
                url.starts_with("sqlite:"),
                "backup copies SQLite databases; for PostgreSQL use pg_dump (see docs/operations.md)"
            );
            let bytes = autoshop::db::sqlite::backup(url, &to)?;
            eprintln!("backed up {url} to {} ({bytes} bytes)", to.display());
            Ok(())
        }
    }
}

async fn open(args: &DatabaseArgs) -> anyhow::Result<Db> {
    let db = Db::connect(&DbConfig { url: args.database_url.clone(), max_connections: args.max_connections() }).await?;
    db.migrate().await.context("migrating the database")?;
    Ok(db)
}

/// How long `serve` waits for a PostgreSQL server that is not up yet (started together with it,
/// or restarting) before it gives up.
const WAIT_FOR_DATABASE: Duration = Duration::from_secs(60);

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    init_logging(&args.log, args.log_json);
    check_settings(&args)?;
    let db = open_waiting(&args.database).await?;
    let listener = tokio::net::TcpListener::bind(args.listen).await.with_context(|| format!("binding {}", args.listen))?;
    let addr = listener.local_addr()?;
    if let Some(path) = &args.port_file {
        std::fs::write(path, addr.port().to_string())?;
    }
    if args.demo {
        match demo::load_if_empty(&db).await? {
            Some(d) => {
                println!("Demo company {} loaded. Its admin API key (shown once):\n\n  {}\n", d.company_id, d.api_key);
                println!("Try:\n\n  curl -H 'Authorization: Bearer {}' http://{addr}/api/v1/bays\n", d.api_key);
                println!("or open the scheduling board at http://{addr}/board and paste the key.\n");
            }
            None => println!("The database already has a company; demo data not loaded (use the key you saved)."),
        }
    }
    tracing::info!(%addr, backend = db.backend(), "autoshop listening; API reference at http://{addr}/docs, scheduling board at http://{addr}/board");
    server::serve(listener, db, AppConfig::from(&args)).await
}

/// Settings that parse but cannot work together.
fn check_settings(args: &ServeArgs) -> anyhow::Result<()> {
    let pool = args.database.max_connections();
    anyhow::ensure!(
        args.database.database_url.starts_with("sqlite:") || pool >= MIN_POSTGRES_POOL,
        "--db-max-connections {pool} is too small for PostgreSQL: two connections stay open to listen (key revocations, \
         events), so the pool needs at least {MIN_POSTGRES_POOL}"
    );
    anyhow::ensure!(args.rate_limit.is_finite() && args.rate_limit >= 0.0, "--rate-limit must be 0 (off) or a positive number of requests per second");
    anyhow::ensure!(
        args.rate_limit == 0.0 || (args.rate_limit_burst.is_finite() && args.rate_limit_burst >= 1.0),
        "--rate-limit-burst must be at least 1 while rate limiting is on (below that no request could pass)"
    );
    Ok(())
}

/// The two listening connections, plus two for requests.
const MIN_POSTGRES_POOL: u32 = 4;

/// [`open`], retrying for [`WAIT_FOR_DATABASE`] while a PostgreSQL server cannot be reached yet:
/// the migrations come first, so a replica cannot serve before the database answers once.
async fn open_waiting(args: &DatabaseArgs) -> anyhow::Result<Db> {
    let give_up = std::time::Instant::now() + WAIT_FOR_DATABASE;
    loop {
        match open(args).await {
            Err(e) if unreachable(&e) && std::time::Instant::now() < give_up => {
                tracing::warn!(error = format!("{e:#}"), "the database cannot be reached yet; retrying in 2 s");
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
            other => return other,
        }
    }
}

/// Whether opening failed because no PostgreSQL server answered (not yet, or not now); a wrong
/// password, URL or migration fails at once instead.
fn unreachable(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| match cause.downcast_ref::<sqlx::Error>() {
        Some(sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut) => true,
        // The server is starting up or shutting down (57P03, 57P01), or a connection failure (08...).
        Some(sqlx::Error::Database(d)) => d.code().is_some_and(|c| c.starts_with("57P") || c.starts_with("08")),
        _ => false,
    })
}

fn init_logging(filter: &str, json: bool) {
    let filter = EnvFilter::try_new(filter).unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    if json { builder.json().init() } else { builder.init() }
    // A panic is answered 500 (app::catch_panic); its message goes to the log like any error,
    // inside the request's span (JSON lines stay JSON lines), with a backtrace when
    // `RUST_BACKTRACE` asks for one. Where the filter drops errors, the default hook prints it.
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !tracing::enabled!(tracing::Level::ERROR) {
            return previous(info);
        }
        let location = info.location().map(|l| format!("{}:{}", l.file(), l.line())).unwrap_or_default();
        let message = info.payload().downcast_ref::<&str>().map(|s| (*s).to_owned()).or_else(|| info.payload().downcast_ref::<String>().cloned());
        let backtrace = std::backtrace::Backtrace::capture();
        let message = message.as_deref().unwrap_or("(no message)");
        if backtrace.status() == std::backtrace::BacktraceStatus::Captured {
            tracing::error!(panic = message, %location, %backtrace, "panicked");
        } else {
            tracing::error!(panic = message, %location, "panicked");
        }
    }));
}
