//! The test harness: each test starts the real server (`server::run`: our accept loop, timeouts
//! and all) on a real database and speaks HTTP.
//!
//! SQLite tests get a fresh database file each. PostgreSQL tests share one fresh database per
//! run (created from `AUTOSHOP_TEST_POSTGRES_URL`); they stay independent because every test
//! works in companies of its own, which is exactly the isolation the product guarantees.

use std::{
    path::PathBuf,
    sync::atomic::{AtomicU64, Ordering},
    time::{SystemTime, UNIX_EPOCH},
};

use autoshop::{
    api_keys as keys,
    app,
    config::AppConfig,
    db::{Db, DbConfig, Query},
    server,
};
use reqwest::{Method, StatusCode, header::HeaderMap};
use serde_json::{Value, json};
use tokio::sync::OnceCell;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// Runs each listed `async fn name(backend: Backend)` of the calling module on both backends.
/// Without `AUTOSHOP_TEST_POSTGRES_URL` at build time the PostgreSQL copies are reported as
/// ignored, never silently passed.
#[macro_export]
macro_rules! backend_tests {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test]
                async fn $name() {
                    super::$name($crate::support::Backend::Sqlite).await
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test]
                #[cfg_attr(not(autoshop_pg), ignore = "set AUTOSHOP_TEST_POSTGRES_URL to run the PostgreSQL tests")]
                async fn $name() {
                    super::$name($crate::support::Backend::Postgres).await
                }
            )*
        }
    };
}

pub struct TestApp {
    pub base: String,
    pub db: Db,
    /// The database URL, to open more connections (another replica's pool).
    pub db_url: String,
    pub client: reqwest::Client,
    /// The first company of the test and its admin key.
    pub company_id: i64,
    pub admin_key: String,
    pub sqlite_file: Option<PathBuf>,
}

impl Drop for TestApp {
    fn drop(&mut self) {
        if let Some(path) = &self.sqlite_file {
            for suffix in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
            }
        }
    }
}

/// A response, with its JSON body parsed (null when the body is empty).
#[derive(Debug)]
pub struct Resp {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Value,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// Asserts a problem+json error with this status and returns its body.
    #[track_caller]
    pub fn problem(&self, status: u16) -> &Value {
        assert_eq!(self.status.as_u16(), status, "body: {}", self.body);
        assert_eq!(self.header("content-type"), Some("application/problem+json"), "body: {}", self.body);
        assert_eq!(self.body["status"], status);
        assert!(self.body["title"].is_string() && self.body["detail"].is_string(), "{}", self.body);
        &self.body
    }

    /// Asserts a 422 whose `errors` map has `field`.
    #[track_caller]
    pub fn invalid(&self, field: &str) -> &Value {
        let body = self.problem(422);
        assert!(body["errors"][field].is_array(), "expected errors.{field} in {body}");
        body
    }

    #[track_caller]
    pub fn ok(&self) -> &Value {
        assert!(self.status.is_success(), "status {}: {}", self.status, self.body);
        &self.body
    }

    /// The ids of a list response's `data`, read from `field`.
    pub fn ids(&self, field: &str) -> Vec<i64> {
        self.body["data"].as_array().unwrap_or(&vec![]).iter().map(|item| item[field].as_i64().unwrap()).collect()
    }
}

fn unique_suffix() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos();
    format!("{}_{}_{}", std::process::id(), nanos, COUNTER.fetch_add(1, Ordering::Relaxed))
}

/// The PostgreSQL database of this test run, created on first use.
async fn postgres_url() -> String {
    static URL: OnceCell<String> = OnceCell::const_new();
    URL.get_or_init(|| async {
        let admin = std::env::var("AUTOSHOP_TEST_POSTGRES_URL").expect("AUTOSHOP_TEST_POSTGRES_URL must be set for PostgreSQL tests");
        let secs = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
        let name = format!("autoshop_test_{secs}_{}", std::process::id());
        let db = Db::connect(&DbConfig { url: admin.clone(), max_connections: 1 }).await.expect("connect to PostgreSQL");
        // Databases of earlier runs (older than a day) are dropped so they do not pile up.
        #[derive(autoshop::db::FromRow)]
        struct Name {
            datname: String,
        }
        let old: Vec<Name> = db
            .fetch_all(&Query::new("SELECT datname FROM pg_database WHERE datname LIKE 'autoshop_test_%'"))
            .await
            .expect("list test databases");
        for Name { datname } in old {
            let created: u64 = datname.split('_').nth(2).and_then(|s| s.parse().ok()).unwrap_or(u64::MAX);
            if created + 86_400 < secs {
                let _ = db.execute(&Query::new(format!("DROP DATABASE IF EXISTS \"{datname}\""))).await;
            }
        }
        db.execute(&Query::new(format!("CREATE DATABASE \"{name}\""))).await.expect("create the test database");
        db.close().await;
        let (base, _) = admin.rsplit_once('/').expect("AUTOSHOP_TEST_POSTGRES_URL ends with /DATABASE");
        format!("{base}/{name}")
    })
    .await
    .clone()
}

/// The settings every test server runs with: the defaults, except that webhooks may point at
/// 127.0.0.1 (where the tests' receivers listen) and retry after 0.3 s, three times. Every
/// server of the shared PostgreSQL database delivers every company's webhooks, so they must
/// all agree on these.
pub fn test_config() -> AppConfig {
    AppConfig {
        webhook_allow_private: true,
        webhook_retry_schedule: autoshop::config::RetrySchedule(vec![std::time::Duration::from_millis(300); 3]),
        ..AppConfig::default()
    }
}

/// A PostgreSQL database of its own (for a test whose servers must not share the run's).
async fn isolated_postgres_url() -> String {
    let shared = postgres_url().await;
    let admin = Db::connect(&DbConfig { url: shared.clone(), max_connections: 1 }).await.expect("connect to PostgreSQL");
    let name = format!("{}_{}", shared.rsplit_once('/').unwrap().1, unique_suffix());
    admin.execute(&Query::new(format!("CREATE DATABASE \"{name}\""))).await.expect("create a test database");
    admin.close().await;
    format!("{}/{name}", shared.rsplit_once('/').unwrap().0)
}

/// An HTTP client for the tests (reqwest is built with rustls and no default crypto provider;
/// the server installs ring when it starts, the tests do the same).
pub fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

/// Runs the server as `autoshop serve` does, on a free port, until the test ends.
async fn start_server(db: Db, config: AppConfig) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = app::build(db, config.clone());
    tokio::spawn(async move { server::run(listener, router, &config, std::future::pending()).await.unwrap() });
    addr
}

impl TestApp {
    pub async fn spawn(backend: Backend) -> TestApp {
        Self::spawn_with(backend, test_config()).await
    }

    pub async fn spawn_with(backend: Backend, config: AppConfig) -> TestApp {
        Self::spawn_on(backend, config, false).await
    }

    /// A server on a database no other test uses (on SQLite every test's is its own anyway).
    pub async fn spawn_isolated(backend: Backend, config: AppConfig) -> TestApp {
        Self::spawn_on(backend, config, true).await
    }

    async fn spawn_on(backend: Backend, config: AppConfig, isolated: bool) -> TestApp {
        let (url, sqlite_file) = match backend {
            Backend::Sqlite => {
                let path = std::env::temp_dir().join(format!("autoshop_test_{}.db", unique_suffix()));
                (format!("sqlite://{}", path.display()), Some(path))
            }
            Backend::Postgres if isolated => (isolated_postgres_url().await, None),
            Backend::Postgres => (postgres_url().await, None),
        };
        let db = Db::connect(&DbConfig { url: url.clone(), max_connections: 4 }).await.expect("connect");
        db.migrate().await.expect("migrate");
        let addr = start_server(db.clone(), config).await;
        let (company_id, admin_key) = keys::create_company(&db, "Test Company").await.unwrap();
        TestApp {
            base: format!("http://{addr}"),
            db,
            db_url: url,
            client: client(),
            company_id,
            admin_key,
            sqlite_file,
        }
    }

    /// A second server on the same database (what another replica is), returning its base URL.
    /// On PostgreSQL the replica has a pool of its own, as another process would; SQLite is one
    /// process per file, so a second server shares the database handle.
    pub async fn spawn_replica(&self) -> String {
        self.spawn_replica_with(test_config()).await
    }

    /// [`TestApp::spawn_replica`] with its own settings.
    pub async fn spawn_replica_with(&self, config: AppConfig) -> String {
        let db = match &self.db {
            Db::Sqlite(_) => self.db.clone(),
            Db::Postgres(_) => Db::connect(&DbConfig { url: self.db_url.clone(), max_connections: 4 }).await.expect("connect"),
        };
        format!("http://{}", start_server(db, config).await)
    }

    /// Another company with its own admin key.
    pub async fn new_company(&self, name: &str) -> (i64, String) {
        keys::create_company(&self.db, name).await.unwrap()
    }

    pub async fn request(&self, method: Method, key: Option<&str>, path: &str, body: Option<Value>) -> Resp {
        let mut req = self.client.request(method, format!("{}{path}", self.base));
        if let Some(key) = key {
            req = req.bearer_auth(key);
        }
        if let Some(body) = body {
            req = req.json(&body);
        }
        let resp = req.send().await.expect("request");
        let status = resp.status();
        let headers = resp.headers().clone();
        let bytes = resp.bytes().await.unwrap();
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
        };
        Resp { status, headers, body }
    }

    /// The body of a GET as the server wrote it (field order included).
    pub async fn get_text(&self, key: &str, path: &str) -> String {
        let resp = self.client.get(format!("{}{path}", self.base)).bearer_auth(key).send().await.expect("request");
        assert!(resp.status().is_success(), "{path}: {}", resp.status());
        resp.text().await.unwrap()
    }

    pub async fn get(&self, key: &str, path: &str) -> Resp {
        self.request(Method::GET, Some(key), path, None).await
    }

    /// Polls `path` until `check` holds on its body (or panics after 30 s: a busy CI machine).
    /// For what is promised eventually: on PostgreSQL the event feed shows a commit only once
    /// every transaction older than it has ended, other tests' included.
    pub async fn eventually(&self, key: &str, path: &str, check: impl Fn(&Value) -> bool) -> Value {
        for _ in 0..1500 {
            let r = self.get(key, path).await;
            if check(&r.body) {
                return r.body;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        panic!("{path} never reached the expected state: {}", self.get(key, path).await.body);
    }

    pub async fn post(&self, key: &str, path: &str, body: Value) -> Resp {
        self.request(Method::POST, Some(key), path, Some(body)).await
    }

    pub async fn put(&self, key: &str, path: &str, body: Value) -> Resp {
        self.request(Method::PUT, Some(key), path, Some(body)).await
    }

    pub async fn delete(&self, key: &str, path: &str) -> Resp {
        self.request(Method::DELETE, Some(key), path, None).await
    }

    /// Creates a shop with `key` and returns its id.
    pub async fn create_shop(&self, key: &str, name: &str, timezone: &str) -> i64 {
        let r = self.post(key, "/api/v1/shops", json!({"name": name, "timezone": timezone})).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
        r.body["shop_id"].as_i64().unwrap()
    }

    pub async fn create_bay(&self, key: &str, shop_id: i64, title: &str, order: i64) -> i64 {
        let r = self.post(key, "/api/v1/bays", json!({"shop_id": shop_id, "title": title, "order": order})).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
        r.body["id"].as_i64().unwrap()
    }

    /// Creates an API key with `role` and an optional shop list, using the admin key.
    pub async fn create_key(&self, admin_key: &str, role: &str, shop_ids: Option<Vec<i64>>) -> String {
        let mut body = json!({"name": format!("{role} key"), "role": role});
        if let Some(ids) = shop_ids {
            body["shop_ids"] = json!(ids);
        }
        let r = self.post(admin_key, "/api/v1/api_keys", body).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
        r.body["api_key"].as_str().unwrap().to_owned()
    }
}

/// Sends `requests` at the same moment (one task each) and returns their statuses in order: for
/// the tests that race writers against each other.
pub async fn together(requests: Vec<reqwest::RequestBuilder>) -> Vec<u16> {
    let tasks: Vec<_> = requests.into_iter().map(|r| tokio::spawn(async move { r.send().await.unwrap().status().as_u16() })).collect();
    let mut statuses = Vec::with_capacity(tasks.len());
    for task in tasks {
        statuses.push(task.await.unwrap());
    }
    statuses
}

/// Sends `POST /api/v1/appointments` to `base` on a task of its own (with an `Idempotency-Key`
/// when given): its status and body, for races of creates.
pub fn spawn_create(app: &TestApp, base: &str, body: &Value, idempotency_key: Option<String>) -> tokio::task::JoinHandle<(u16, Value)> {
    let mut post = app.client.post(format!("{base}/api/v1/appointments")).bearer_auth(&app.admin_key).json(body);
    if let Some(key) = idempotency_key {
        post = post.header("idempotency-key", key);
    }
    tokio::spawn(async move {
        let r = post.send().await.unwrap();
        (r.status().as_u16(), r.json::<Value>().await.unwrap())
    })
}

/// Sends every create body at once across `servers` (the n-th to server n % len); with
/// `keyed`, every third is sent with the `Idempotency-Key` `{keyed}-{n}` to two servers. Asserts
/// that every answer is 201 and a keyed repeat answers the same appointment; the ids created.
pub async fn create_across(app: &TestApp, servers: &[String], bodies: Vec<Value>, keyed: Option<&str>) -> std::collections::BTreeSet<i64> {
    assert!(keyed.is_none() || servers.len() > 1, "a keyed repeat goes to another server");
    let mut creates = Vec::new();
    for (n, body) in bodies.iter().enumerate() {
        let key = keyed.filter(|_| n % 3 == 0).map(|prefix| format!("{prefix}-{n}"));
        let repeats = if key.is_some() { 2 } else { 1 };
        for base in servers.iter().cycle().skip(n % servers.len()).take(repeats) {
            creates.push(spawn_create(app, base, body, key.clone()));
        }
    }
    let mut ids = std::collections::BTreeSet::new();
    for c in creates {
        let (status, answer) = c.await.unwrap();
        assert_eq!(status, 201, "{answer}");
        ids.insert(answer["appointment_id"].as_i64().unwrap());
    }
    assert_eq!(ids.len(), bodies.len(), "a keyed repeat answers the same appointment");
    ids
}

/// A transaction the test holds open to make the server's writes wait: on SQLite it holds the
/// database's write lock (the server's writer waits up to its busy timeout, 5 s); on PostgreSQL
/// it holds the row locks its statements take. What it writes shows when it commits, after a
/// request has read the rows as they were.
pub enum HeldWrite {
    Postgres(tokio::sync::Mutex<sqlx::PgConnection>),
    Sqlite(std::sync::Mutex<rusqlite::Connection>),
}

/// Sends `PUT path` with `body` while `held` holds a change of the same row, commits that
/// change once the PUT waits for it ([`HeldWrite::await_a_waiter`]), and returns the PUT's
/// answer: a write that read the row before the change and lands after it.
pub async fn put_across(app: &std::sync::Arc<TestApp>, held: HeldWrite, key: &str, path: &str, body: Value) -> Resp {
    let put = {
        let (app, key, path) = (app.clone(), key.to_owned(), path.to_owned());
        tokio::spawn(async move { app.put(&key, &path, body).await })
    };
    held.await_a_waiter(app).await;
    assert!(!put.is_finished(), "the PUT waits for the row");
    held.commit().await;
    put.await.unwrap()
}

impl HeldWrite {
    pub async fn begin(app: &TestApp) -> HeldWrite {
        use sqlx::{Connection, Executor};
        match &app.sqlite_file {
            Some(path) => {
                // The server runs on this test's thread: a busy wait inside SQLite would stop the
                // server's own transaction from finishing and releasing the lock (a 5 s deadlock,
                // then a failed test), so the wait for the lock yields between tries.
                let conn = rusqlite::Connection::open(path).unwrap();
                conn.busy_timeout(std::time::Duration::ZERO).unwrap();
                let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
                loop {
                    match conn.execute_batch("BEGIN IMMEDIATE") {
                        Ok(()) => break,
                        Err(e) if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy) && tokio::time::Instant::now() < deadline => {
                            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                        }
                        Err(e) => panic!("taking the SQLite write lock: {e}"),
                    }
                }
                HeldWrite::Sqlite(std::sync::Mutex::new(conn))
            }
            None => {
                let mut conn = sqlx::PgConnection::connect(&app.db_url).await.unwrap();
                conn.execute("BEGIN").await.unwrap();
                HeldWrite::Postgres(tokio::sync::Mutex::new(conn))
            }
        }
    }

    /// Runs a statement with integer parameters (`$1`, `$2`... on both backends); rows changed.
    pub async fn run(&self, sql: &str, params: &[i64]) -> u64 {
        self.try_run(sql, params).await.unwrap()
    }

    /// [`HeldWrite::run`], or the database's error message (on PostgreSQL the transaction is
    /// then aborted).
    pub async fn try_run(&self, sql: &str, params: &[i64]) -> Result<u64, String> {
        match self {
            HeldWrite::Sqlite(conn) => {
                let conn = conn.lock().unwrap();
                let sql = sql.replace('$', "?");
                conn.execute(&sql, rusqlite::params_from_iter(params)).map(|n| n as u64).map_err(|e| e.to_string())
            }
            HeldWrite::Postgres(conn) => {
                let mut q = sqlx::query(sqlx::AssertSqlSafe(sql.to_owned()));
                for p in params {
                    q = q.bind(*p);
                }
                q.execute(&mut *conn.lock().await).await.map(|r| r.rows_affected()).map_err(|e| e.to_string())
            }
        }
    }

    /// Locks a row `FOR UPDATE` on PostgreSQL, which also stops inserts whose foreign key points
    /// at it (SQLite's write lock stops every write already).
    pub async fn lock_row_on_postgres(&self, table: &str, company_id: i64, id: i64) {
        if let HeldWrite::Postgres(conn) = self {
            let lock = format!("SELECT 1 FROM {table} WHERE company_id = $1 AND id = $2 FOR UPDATE");
            let rows = sqlx::query(sqlx::AssertSqlSafe(lock)).bind(company_id).bind(id).fetch_all(&mut *conn.lock().await).await.unwrap();
            assert_eq!(rows.len(), 1, "{table} {id} exists");
        }
    }

    /// Returns once a request waits for this change: on PostgreSQL, once a backend is blocked
    /// by this one (within 10 s, else the test fails); on SQLite, which shows no waiter, after
    /// 400 ms.
    pub async fn await_a_waiter(&self, app: &TestApp) {
        let HeldWrite::Postgres(conn) = self else {
            return tokio::time::sleep(std::time::Duration::from_millis(400)).await;
        };
        let (pid,): (i32,) = sqlx::query_as("SELECT pg_backend_pid()").fetch_one(&mut *conn.lock().await).await.unwrap();
        let blocked = Query::new("SELECT COUNT(*) FROM pg_stat_activity WHERE CAST($1 AS INTEGER) = ANY(pg_blocking_pids(pid))").bind(i64::from(pid));
        for _ in 0..200 {
            if app.db.fetch_optional::<(i64,)>(&blocked).await.unwrap().is_some_and(|(n,)| n > 0) {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        panic!("nothing waited for the held change");
    }

    pub async fn commit(self) {
        match self {
            HeldWrite::Sqlite(conn) => conn.into_inner().unwrap().execute_batch("COMMIT").unwrap(),
            HeldWrite::Postgres(conn) => {
                use sqlx::Executor;
                conn.into_inner().execute("COMMIT").await.unwrap();
            }
        }
    }
}
