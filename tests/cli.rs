//! The `autoshop` binary itself: bootstrap commands, and running beside a live server.

use std::{
    path::PathBuf,
    process::{Command, Stdio},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_autoshop")
}

fn temp_db() -> (String, PathBuf) {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos();
    let path = std::env::temp_dir().join(format!("autoshop_cli_{}_{nanos}.db", std::process::id()));
    (format!("sqlite://{}", path.display()), path)
}

fn company_create(db_url: &str, name: &str) -> serde_json::Value {
    let out = Command::new(binary()).args(["company", "create", "--name", name, "--database-url", db_url]).output().unwrap();
    assert!(out.status.success(), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "exactly one line on stdout: {stdout:?}");
    let json: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(json.as_object().unwrap().len(), 2, "{json}");
    json
}

#[test]
fn company_create_prints_one_json_line_on_a_fresh_database() {
    let (url, path) = temp_db();
    let first = company_create(&url, "Acme Auto");
    assert!(first["company_id"].as_i64().unwrap() >= 1);
    assert!(first["api_key"].as_str().unwrap().starts_with("ask_"));
    let second = company_create(&url, "Beta Auto");
    assert_ne!(first["company_id"], second["company_id"]);
    assert_ne!(first["api_key"], second["api_key"]);
    let out = Command::new(binary()).args(["company", "create", "--name", " ", "--database-url", &url]).output().unwrap();
    assert!(!out.status.success(), "a blank name is refused");
    let migrate = Command::new(binary()).args(["migrate", "--database-url", &url]).output().unwrap();
    assert!(migrate.status.success());
    let _ = std::fs::remove_file(path);
}

#[test]
fn help_lists_every_setting_with_its_environment_variable() {
    let out = Command::new(binary()).args(["serve", "--help"]).output().unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    for var in [
        "AUTOSHOP_LISTEN",
        "AUTOSHOP_DATABASE_URL",
        "AUTOSHOP_PUBLIC_URL",
        "AUTOSHOP_LOG",
        "AUTOSHOP_LOG_JSON",
        "AUTOSHOP_DEMO",
        "AUTOSHOP_RATE_LIMIT",
        "AUTOSHOP_RATE_LIMIT_BURST",
        "AUTOSHOP_MAX_BODY_BYTES",
        "AUTOSHOP_REQUEST_TIMEOUT_SECS",
        "AUTOSHOP_HEADER_TIMEOUT_SECS",
        "AUTOSHOP_BODY_TIMEOUT_SECS",
        "AUTOSHOP_WRITE_TIMEOUT_SECS",
        "AUTOSHOP_IDLE_TIMEOUT_SECS",
        "AUTOSHOP_DISCARD_TIMEOUT_SECS",
        "AUTOSHOP_MAX_CONNECTIONS",
        "AUTOSHOP_DB_MAX_CONNECTIONS",
        "AUTOSHOP_EVENT_RETENTION_DAYS",
        "AUTOSHOP_HOLD_TTL_SECS",
        "AUTOSHOP_WEBHOOK_ALLOW_PRIVATE",
        "AUTOSHOP_WEBHOOK_CONCURRENCY",
        "AUTOSHOP_WEBHOOK_RETRY_SCHEDULE",
    ] {
        assert!(help.contains(var), "{var} missing from:\n{help}");
    }
}

/// Starts `autoshop serve` on `url` at a free port and returns it with that port, once listening.
async fn start_server(url: &str, port_file: &std::path::Path, extra: &[&str]) -> (std::process::Child, String) {
    let server = Command::new(binary())
        .args(["serve", "--database-url", url, "--listen", "127.0.0.1:0"])
        .args(extra)
        .arg("--port-file")
        .arg(port_file)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut port = String::new();
    for _ in 0..200 {
        port = std::fs::read_to_string(port_file).unwrap_or_default();
        if !port.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(!port.is_empty(), "server did not start");
    (server, port)
}

#[tokio::test]
async fn company_create_works_while_a_server_runs_on_the_same_file_and_sigterm_stops_it() {
    let (url, path) = temp_db();
    let port_file = path.with_extension("port");
    let (mut server, port) = start_server(&url, &port_file, &[]).await;

    let created = company_create(&url, "Live Auto");
    let key = created["api_key"].as_str().unwrap();
    // reqwest is built with rustls and no default crypto provider (the server installs ring).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let response = reqwest::Client::new()
        .get(format!("http://127.0.0.1:{port}/api/v1/settings/shop_info"))
        .bearer_auth(key)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "the running server accepts the new company's key");
    // An open event stream (what the board keeps) does not hold the shutdown up: it ends.
    let stream = reqwest::Client::new()
        .get(format!("http://127.0.0.1:{port}/api/v1/events/stream"))
        .bearer_auth(key)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    let stream_ended = tokio::spawn(async move { stream.bytes().await.is_ok() });

    // SIGTERM: the server stops cleanly, within seconds (the request deadline is 30 s).
    Command::new("kill").args(["-TERM", &server.id().to_string()]).status().unwrap();
    let mut status = None;
    for _ in 0..200 {
        if let Some(s) = server.try_wait().unwrap() {
            status = Some(s);
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let status = status.expect("the server exits within 5 s of SIGTERM, open event stream included");
    assert!(status.success(), "{status:?}");
    assert!(stream_ended.await.unwrap(), "the event stream ends cleanly at shutdown");
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    let _ = std::fs::remove_file(port_file);
}

/// `autoshop backup` copies a database a server is writing to: the copy opens, passes
/// `PRAGMA integrity_check`, and holds every write acknowledged before the backup began.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backup_copies_a_database_while_a_server_writes_to_it() {
    use std::sync::{Arc, Mutex};

    let (url, path) = temp_db();
    let created = company_create(&url, "Backup Auto");
    let key = created["api_key"].as_str().unwrap().to_owned();
    let port_file = path.with_extension("port");
    let (mut server, port) = start_server(&url, &port_file, &["--rate-limit", "0"]).await;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::new();
    let base = format!("http://127.0.0.1:{port}/api/v1");
    let shop: serde_json::Value =
        client.post(format!("{base}/shops")).bearer_auth(&key).json(&serde_json::json!({"name": "Backup shop"})).send().await.unwrap().json().await.unwrap();
    let shop_id = shop["shop_id"].as_i64().unwrap();

    // Writers create bays until told to stop; each acknowledged id is kept.
    let acked = Arc::new(Mutex::new(Vec::<i64>::new()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..4 {
        let (client, base, key, acked, stop) = (client.clone(), base.clone(), key.clone(), acked.clone(), stop.clone());
        writers.push(tokio::spawn(async move {
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                n += 1;
                let body = serde_json::json!({"shop_id": shop_id, "title": format!("w{w}-{n}")});
                let r = client.post(format!("{base}/bays")).bearer_auth(&key).json(&body).send().await.unwrap();
                assert_eq!(r.status(), 201);
                let bay: serde_json::Value = r.json().await.unwrap();
                acked.lock().unwrap().push(bay["id"].as_i64().unwrap());
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before: Vec<i64> = acked.lock().unwrap().clone();
    let copy = path.with_extension("backup.db");
    // A file of the operator's beside the target stays as it was.
    let neighbour = path.with_extension("backup.partial");
    std::fs::write(&neighbour, "keep me").unwrap();
    let out = tokio::task::spawn_blocking({
        let (url, copy) = (url.clone(), copy.clone());
        move || Command::new(binary()).args(["backup", "--database-url", &url, "--to"]).arg(&copy).output().unwrap()
    })
    .await
    .unwrap();
    let during = acked.lock().unwrap().len() - before.len();
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for w in writers {
        w.await.unwrap();
    }
    assert!(out.status.success(), "backup failed: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read_to_string(&neighbour).unwrap(), "keep me");
    let _ = std::fs::remove_file(&neighbour);
    assert!(!before.is_empty(), "writes were acknowledged before the backup");

    let conn = rusqlite::Connection::open(&copy).unwrap();
    let check: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(check, "ok");
    let mut stmt = conn.prepare("SELECT id FROM bays").unwrap();
    let stored: std::collections::HashSet<i64> = stmt.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect();
    let missing: Vec<&i64> = before.iter().filter(|id| !stored.contains(id)).collect();
    assert!(missing.is_empty(), "acknowledged before the backup but not in it: {missing:?}");
    let total = acked.lock().unwrap().len();
    assert!(stored.len() < total || during == 0, "the copy is a snapshot: {} of {total} bays", stored.len());
    // One moment of the database: each bay and its `bay.created` event commit together, so a
    // copy torn between the two tables would hold one without the other.
    let mut stmt = conn.prepare("SELECT CAST(json_extract(data, '$.id') AS INTEGER) FROM events WHERE type = 'bay.created'").unwrap();
    let announced: std::collections::HashSet<i64> = stmt.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect();
    assert_eq!(announced, stored, "the copy's bays and their events are of one moment");
    eprintln!("backup: {} bays acknowledged before, {during} during, copy holds {}", before.len(), stored.len());

    let again = Command::new(binary()).args(["backup", "--database-url", &url, "--to"]).arg(&copy).output().unwrap();
    assert!(!again.status.success(), "a backup never overwrites a file");
    let pg = Command::new(binary()).args(["backup", "--database-url", "postgres://postgres@127.0.0.1:1/x", "--to", "/tmp/never"]).output().unwrap();
    assert!(!pg.status.success() && String::from_utf8_lossy(&pg.stderr).contains("pg_dump"), "PostgreSQL points to pg_dump");

    Command::new("kill").args(["-TERM", &server.id().to_string()]).status().unwrap();
    let _ = server.wait();
    for file in [path.clone(), copy, port_file] {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", file.display()));
        }
    }
}

/// Two backups started together to one name: one writes it and the other fails. Neither replaces
/// the other's finished copy (a rename would have, silently).
#[test]
fn two_backups_to_one_name_never_overwrite_each_other() {
    let (url, path) = temp_db();
    company_create(&url, "Twin Backup Auto");
    {
        // Enough pages that the two copies overlap in time.
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch("CREATE TABLE filler(x BLOB); WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 4000) INSERT INTO filler SELECT randomblob(8000) FROM n;").unwrap();
    }
    for round in 0..3 {
        let copy = path.with_extension(format!("twin{round}.db"));
        let start = || Command::new(binary()).args(["backup", "--database-url", &url, "--to"]).arg(&copy).stderr(std::process::Stdio::piped()).spawn().unwrap();
        let (first, second) = (start(), start());
        let outs = [first.wait_with_output().unwrap(), second.wait_with_output().unwrap()];
        let won = outs.iter().filter(|o| o.status.success()).count();
        assert_eq!(won, 1, "round {round}: exactly one backup writes the name: {:?}", outs.iter().map(|o| String::from_utf8_lossy(&o.stderr).into_owned()).collect::<Vec<_>>());
        let lost = outs.iter().find(|o| !o.status.success()).unwrap();
        assert!(String::from_utf8_lossy(&lost.stderr).contains("exists already"), "{}", String::from_utf8_lossy(&lost.stderr));
        let conn = rusqlite::Connection::open(&copy).unwrap();
        let rows: i64 = conn.query_row("SELECT COUNT(*) FROM filler", [], |r| r.get(0)).unwrap();
        assert_eq!(rows, 4000);
        let _ = std::fs::remove_file(&copy);
    }
    let leftovers: Vec<_> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().contains(&format!("{}", path.file_stem().unwrap().to_string_lossy())) && e.file_name().to_string_lossy().ends_with(".partial"))
        .map(|e| e.file_name())
        .collect();
    assert!(leftovers.is_empty(), "no partial copy is left behind: {leftovers:?}");
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

/// Every log line written while serving a request carries its `x-request-id` (the one the
/// client sent, echoed in the answer) with the method and path, at the default level's span.
#[tokio::test]
async fn log_lines_carry_the_request_id() {
    let (url, path) = temp_db();
    let port_file = path.with_extension("port");
    let log_file = path.with_extension("log");
    let mut server = Command::new(binary())
        .args(["serve", "--database-url", &url, "--listen", "127.0.0.1:0", "--log", "info,tower_http=debug", "--port-file"])
        .arg(&port_file)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log_file).unwrap())
        .spawn()
        .unwrap();
    let mut port = String::new();
    for _ in 0..400 {
        port = std::fs::read_to_string(&port_file).unwrap_or_default();
        if !port.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let r = reqwest::Client::new()
        .get(format!("http://127.0.0.1:{}/api/v1/bays?filter[title]=secret", port.trim()))
        .header("x-request-id", "support-ticket-4711")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(r.headers()["x-request-id"], "support-ticket-4711");
    tokio::time::sleep(Duration::from_millis(200)).await;
    Command::new("kill").args(["-TERM", &server.id().to_string()]).status().unwrap();
    let _ = server.wait();
    let log = std::fs::read_to_string(&log_file).unwrap();
    let line = log.lines().find(|l| l.contains("support-ticket-4711")).unwrap_or_else(|| panic!("no line with the id: {log}"));
    assert!(line.contains("GET") && line.contains("/api/v1/bays"), "{line}");
    assert!(!log.contains("secret"), "the query string stays out of the log: {log}");
    for file in [path.clone(), port_file, log_file] {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", file.display()));
        }
    }
}

mod postgres {
    use std::{process::Command, time::Duration};

    use super::binary;

    /// `autoshop serve` started before its PostgreSQL server (as `docker compose` may start
    /// them) waits for it, then migrates and serves; it no longer exits after the pool's 5 s.
    /// The database comes up here as a proxy to the test server, opened 7 s after the start.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[cfg_attr(not(autoshop_pg), ignore = "AUTOSHOP_TEST_POSTGRES_URL is not set")]
    async fn serve_waits_for_a_database_that_comes_up_later() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let real = std::env::var("AUTOSHOP_TEST_POSTGRES_URL").expect("AUTOSHOP_TEST_POSTGRES_URL");
        // A database of its own, migrated from scratch by the server under test.
        let admin = autoshop::db::Db::connect(&autoshop::db::DbConfig { url: real.clone(), max_connections: 1 }).await.unwrap();
        // Named as the API tests' databases, so a run that panics before its DROP leaves one that
        // their sweep removes a day later.
        let secs = super::SystemTime::now().duration_since(super::UNIX_EPOCH).unwrap().as_secs();
        let name = format!("autoshop_test_{secs}_cliwait{}", std::process::id());
        admin.execute(&autoshop::db::Query::new(format!("CREATE DATABASE \"{name}\""))).await.unwrap();
        let (scheme_user, rest) = real.split_once('@').expect("a URL with user@host");
        let (real_host, _) = rest.split_once('/').expect("a URL with a database");
        let db = name.as_str();
        let spare = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let proxy_port = spare.local_addr().unwrap().port();
        drop(spare);
        let url = format!("{scheme_user}@127.0.0.1:{proxy_port}/{db}");
        let port_file = std::env::temp_dir().join(format!("autoshop_cli_wait_{}.port", std::process::id()));
        let _ = std::fs::remove_file(&port_file);
        let mut server = Command::new(binary())
            .args(["serve", "--database-url", &url, "--listen", "127.0.0.1:0", "--port-file"])
            .arg(&port_file)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        tokio::time::sleep(Duration::from_secs(7)).await;
        assert!(server.try_wait().unwrap().is_none(), "the server gave up while the database was down");
        assert!(!port_file.exists(), "the server listens only once migrated");
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", proxy_port)).await.unwrap();
        let real_host = real_host.to_owned();
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let real_host = real_host.clone();
                tokio::spawn(async move {
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(real_host.as_str()).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        });
        let mut ready = false;
        for _ in 0..200 {
            if let Ok(port) = std::fs::read_to_string(&port_file) {
                let r = reqwest::get(format!("http://127.0.0.1:{}/readyz", port.trim())).await;
                if r.is_ok_and(|r| r.status() == 200) {
                    ready = true;
                    break;
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Command::new("kill").args(["-TERM", &server.id().to_string()]).status().unwrap();
        let _ = server.wait();
        let _ = std::fs::remove_file(&port_file);
        let _ = admin.execute(&autoshop::db::Query::new(format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))).await;
        admin.close().await;
        assert!(ready, "the server became ready once the database came up");
    }
}
