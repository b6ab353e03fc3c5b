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
        "AUTOSHOP_WEBHOOK_ALLOW_PRIVATE",
        "AUTOSHOP_WEBHOOK_CONCURRENCY",
        "AUTOSHOP_WEBHOOK_RETRY_SCHEDULE",
    ] {
        assert!(help.contains(var), "{var} missing from:\n{help}");
    }
}

#[tokio::test]
async fn company_create_works_while_a_server_runs_on_the_same_file_and_sigterm_stops_it() {
    let (url, path) = temp_db();
    let port_file = path.with_extension("port");
    let mut server = Command::new(binary())
        .args(["serve", "--database-url", &url, "--listen", "127.0.0.1:0", "--port-file"])
        .arg(&port_file)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut port = String::new();
    for _ in 0..200 {
        port = std::fs::read_to_string(&port_file).unwrap_or_default();
        if !port.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(!port.is_empty(), "server did not start");

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

    // SIGTERM: the server stops cleanly.
    Command::new("kill").args(["-TERM", &server.id().to_string()]).status().unwrap();
    let mut status = None;
    for _ in 0..200 {
        if let Some(s) = server.try_wait().unwrap() {
            status = Some(s);
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let status = status.expect("the server exits after SIGTERM");
    assert!(status.success(), "{status:?}");
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    let _ = std::fs::remove_file(port_file);
}
