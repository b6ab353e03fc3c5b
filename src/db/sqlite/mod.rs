//! SQLite through rusqlite: one writer thread (group commit, see [`writer`]) and a pool of
//! read-only connections used on tokio's blocking threads. Statements are prepared once per
//! connection and cached; rows are decoded on the thread that reads them, straight into the
//! row types, so a page crosses threads once, not once per row.

mod checkpoint;
mod migrate;
mod reader;
mod writer;

use std::{
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use rusqlite::{Connection, OpenFlags};
use tokio::sync::{broadcast, mpsc, oneshot};

use super::{Arg, DbError, FromRow, Query, RowReader, notify::{BACKLOG, Notice}};
pub use writer::MAX_GROUP;
use writer::{Command, Job};

/// Statements cached per connection: every statement text the application issues fits.
const STATEMENT_CACHE: usize = 256;
/// Page cache of the writer (index updates of big tables) and of each reader. Readers keep
/// SQLite's default and let the OS page cache, shared by all, hold the rest of the file: the
/// process stays far under 100 MB. SQLite pools the caches of all connections (its memory
/// reached the sum, 41 MB, under searches alone); 16 MB for the writer posted as fast as 32 MB
/// on the 1M-row data set and took the loaded RSS from 95-106 MB to 68 MB.
const WRITER_CACHE_KIB: i64 = 16_000;
const READER_CACHE_KIB: i64 = 2_000;
const WAL_FILE_LIMIT_BYTES: i64 = 64 * 1024 * 1024;
pub(super) const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

pub struct SqliteDb {
    path: PathBuf,
    jobs: mpsc::Sender<Job>,
    readers: Arc<reader::Readers>,
    notices: broadcast::Sender<Notice>,
    closed: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for SqliteDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteDb").field("path", &self.path).field("readers", &self.readers.stats().0).finish()
    }
}

/// The file of a `sqlite:` URL: `sqlite://autoshop.db`, `sqlite:///var/lib/autoshop.db`,
/// `sqlite:autoshop.db`; a query string (`?mode=rwc`) is ignored.
pub fn path_of(url: &str) -> anyhow::Result<PathBuf> {
    let rest = url.strip_prefix("sqlite://").or_else(|| url.strip_prefix("sqlite:")).unwrap_or(url);
    let file = rest.split('?').next().unwrap_or("");
    anyhow::ensure!(!file.is_empty() && !file.contains(":memory:"), "the SQLite URL {url:?} must name a database file");
    Ok(PathBuf::from(file))
}

fn open_writer(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    // WAL lets readers run beside the writer; FULL puts a commit on disk before we answer 2xx,
    // even across a power cut.
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.pragma_update(None, "foreign_keys", true)?;
    conn.pragma_update(None, "temp_store", "MEMORY")?;
    conn.pragma_update(None, "cache_size", -WRITER_CACHE_KIB)?;
    // A WAL that grew (a long read held its frames) is cut back when it starts over.
    conn.pragma_update(None, "journal_size_limit", WAL_FILE_LIMIT_BYTES)?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    plan_once(&conn)?;
    checkpoint::report_wal_size(&conn)?;
    Ok(conn)
}

/// The checkpointer's connection (see [`checkpoint`]).
fn open_checkpointer(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    Ok(conn)
}

/// The bundled SQLite is built with STAT4, and once `PRAGMA optimize` has gathered its
/// statistics a cached statement with a bound value in an indexed range is parsed and planned
/// again at every run, to fit the plan to the value: 18% of the server's CPU on the appointment
/// list (perf, 1M rows). The query planner stability guarantee keeps one plan per statement;
/// our statements' indexes do not depend on the values.
fn plan_once(conn: &Connection) -> rusqlite::Result<()> {
    conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)?;
    Ok(())
}

fn open_reader(path: &Path) -> rusqlite::Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_URI;
    let conn = Connection::open_with_flags(path, flags)?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    conn.pragma_update(None, "temp_store", "MEMORY")?;
    conn.pragma_update(None, "cache_size", -READER_CACHE_KIB)?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    plan_once(&conn)?;
    Ok(conn)
}

impl SqliteDb {
    /// Opens (creating it if needed) the database file, the writer thread and `readers` read
    /// connections.
    pub fn open(url: &str, readers: u32) -> anyhow::Result<SqliteDb> {
        use anyhow::Context;
        let path = path_of(url)?;
        let writer = open_writer(&path).with_context(|| format!("opening SQLite database {}", path.display()))?;
        let (jobs, queue) = mpsc::channel(4 * MAX_GROUP);
        let checkpointer = checkpoint::Checkpointer::start(&path, open_checkpointer).context("starting the SQLite checkpointer")?;
        writer::start(writer, queue, checkpointer).context("starting the SQLite writer thread")?;
        let readers = reader::Readers::open(readers.max(1) as usize, || open_reader(&path))
            .with_context(|| format!("opening SQLite database {} for reading", path.display()))?;
        let readers = Arc::new(readers);
        Ok(SqliteDb { path, jobs, readers, notices: broadcast::channel(BACKLOG).0, closed: Default::default() })
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Notice> {
        self.notices.subscribe()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `work` on a read connection (see [`reader`]: it may run twice).
    pub async fn read<T, F>(&self, work: F) -> Result<T, DbError>
    where
        T: Send + 'static,
        F: Fn(&Connection) -> Result<T, DbError> + Send + 'static,
    {
        self.readers.read(work).await
    }

    /// Reads `q` on a new read-only connection, on a blocking thread, sending its rows in
    /// batches (see [`super::Db::stream`]). One statement, so one snapshot.
    pub fn stream<T: FromRow, G: Send + 'static>(&self, q: Query, batch: usize, sender: mpsc::Sender<Result<Vec<T>, DbError>>, guard: G) {
        let path = self.path.clone();
        if let Err(e) = self.check_open() {
            let _ = sender.try_send(Err(e));
            return;
        }
        tokio::task::spawn_blocking(move || {
            let _guard = guard;
            let read = || {
                let conn = open_reader(&path)?;
                // A receiver gone (a download given up) interrupts a read still looking for rows.
                let watched = sender.clone();
                conn.progress_handler(1000, Some(move || watched.is_closed()))?;
                stream_rows(&conn, &q, batch, &sender)
            };
            // A panic is an error too: the body must break, not end as if complete.
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(read))
                .unwrap_or_else(|_| Err(DbError::Other("an export's read panicked".into())));
            if let Err(e) = result {
                let _ = sender.blocking_send(Err(e));
            }
        });
    }

    /// One write statement in the next group commit; answered once it is on disk.
    pub async fn write<T, F>(&self, work: F) -> Result<T, DbError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, DbError> + Send + 'static,
    {
        self.check_open()?;
        let (reply, answer) = oneshot::channel::<Result<T, DbError>>();
        let job = Job::Single(Box::new(move |conn| {
            let result = guarded(conn, work);
            let failed = result.is_err();
            let answer: writer::Answer = Box::new(move |committed| {
                let _ = reply.send(committed.and(result));
            });
            (failed, answer)
        }));
        self.jobs.send(job).await.map_err(|_| closed())?;
        answer.await.map_err(|_| closed())?
    }

    /// Runs `work` alone on the write connection, outside any transaction.
    pub async fn exclusive<T, F>(&self, work: F) -> Result<T, DbError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, DbError> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let job = Job::Exclusive(Box::new(move |conn| {
            let _ = reply.send(work(conn));
        }));
        self.jobs.send(job).await.map_err(|_| closed())?;
        answer.await.map_err(|_| closed())?
    }

    /// Opens an interactive write transaction (a savepoint in the next group commit).
    pub async fn begin(&self) -> Result<SqliteTx, DbError> {
        self.check_open()?;
        let (commands, receiver) = std::sync::mpsc::channel();
        self.jobs.send(Job::Unit(receiver)).await.map_err(|_| closed())?;
        Ok(SqliteTx { commands, notices: Vec::new(), broadcast: self.notices.clone() })
    }

    pub async fn migrate(&self) -> anyhow::Result<()> {
        self.exclusive(|conn| migrate::run(conn).map_err(|e| DbError::Other(format!("{e:#}")))).await?;
        Ok(())
    }

    /// `(readers, idle readers)`.
    pub fn reader_stats(&self) -> (u32, usize) {
        self.readers.stats()
    }

    /// Waits for the writes queued before it, and refuses every later read and write.
    ///
    /// It does not update the planner's statistics: a plain `PRAGMA optimize` reads a sample
    /// of 2,000 index entries (SQLite 3.46 and later), and at a million appointments of one
    /// company the sample said 2,001 rows per company and per shop, and no more per customer
    /// than per shop. The start (`migrate`) reads them whole.
    pub async fn close(&self) {
        let _ = self.exclusive(|_| Ok(())).await;
        self.closed.store(true, std::sync::atomic::Ordering::SeqCst);
        self.readers.close();
    }

    fn check_open(&self) -> Result<(), DbError> {
        if self.closed.load(std::sync::atomic::Ordering::SeqCst) { Err(closed()) } else { Ok(()) }
    }
}

/// Runs `work`, turning a panic into an error for its caller (the writer thread lives on).
fn guarded<T>(conn: &Connection, work: impl FnOnce(&Connection) -> Result<T, DbError>) -> Result<T, DbError> {
    guarded_with(conn, work)
}

fn guarded_with<T, E: From<DbError>>(conn: &Connection, work: impl FnOnce(&Connection) -> Result<T, E>) -> Result<T, E> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(conn)))
        .unwrap_or_else(|_| Err(DbError::Other("a statement panicked on the SQLite writer".into()).into()))
}

pub(super) fn closed() -> DbError {
    DbError::Unavailable("the SQLite writer or reader pool is closed".into())
}

/// An interactive write transaction on SQLite. Dropped without [`SqliteTx::commit`], it rolls
/// back.
pub struct SqliteTx {
    commands: std::sync::mpsc::Sender<Command>,
    /// Sent once the transaction is on disk.
    notices: Vec<Notice>,
    broadcast: broadcast::Sender<Notice>,
}

impl SqliteTx {
    pub async fn run<T, F>(&mut self, work: F) -> Result<T, DbError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, DbError> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let command = Command::Run(Box::new(move |conn| {
            let _ = reply.send(guarded(conn, work));
        }));
        self.commands.send(command).map_err(|_| aborted())?;
        answer.await.map_err(|_| aborted())?
    }

    pub fn notify(&mut self, notice: Notice) {
        self.notices.push(notice);
    }

    /// Runs `last` as the transaction's final statements and commits, in one hand-off to the
    /// writer instead of one per statement; answered with what `last` returned once the group
    /// holding this transaction is on disk.
    pub async fn commit_with<T, E, F>(self, last: F) -> Result<T, E>
    where
        T: Send + 'static,
        E: From<DbError> + Send + 'static,
        F: FnOnce(&Connection) -> Result<T, E> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel::<Result<T, E>>();
        let command = Command::CommitWith(Box::new(move |conn| match guarded_with(conn, last) {
            Ok(value) => Some(Box::new(move |outcome: Result<(), DbError>| {
                let _ = reply.send(outcome.map(|()| value).map_err(E::from));
            }) as writer::Answer),
            Err(e) => {
                let _ = reply.send(Err(e));
                None
            }
        }));
        self.commands.send(command).map_err(|_| aborted())?;
        let value = answer.await.map_err(|_| aborted())??;
        for notice in self.notices {
            let _ = self.broadcast.send(notice);
        }
        Ok(value)
    }

    /// Commits; answered once the group holding this transaction is on disk.
    pub async fn commit(self) -> Result<(), DbError> {
        let (reply, answer) = oneshot::channel();
        self.commands.send(Command::Commit(reply)).map_err(|_| aborted())?;
        answer.await.map_err(|_| aborted())??;
        for notice in self.notices {
            // No listener is not an error.
            let _ = self.broadcast.send(notice);
        }
        Ok(())
    }
}

/// Writes a consistent copy of the SQLite database at `url` to `to` (which must not exist):
/// `VACUUM INTO` reads one snapshot while writers go on (WAL), and the copy appears under its
/// name only once complete. Returns its size in bytes.
pub fn backup(url: &str, to: &Path) -> anyhow::Result<u64> {
    use anyhow::Context;
    let from = path_of(url)?;
    anyhow::ensure!(from.exists(), "no database at {}", from.display());
    anyhow::ensure!(!to.exists(), "{} exists already; backups never overwrite", to.display());
    // A name of its own beside the target: a file the operator keeps there is never touched.
    let name = to.file_name().with_context(|| format!("{} names no file", to.display()))?.to_string_lossy();
    let partial = to.with_file_name(format!(".{name}.{}.partial", std::process::id()));
    anyhow::ensure!(!partial.exists(), "{} exists: another backup is writing it", partial.display());
    let copied = (|| {
        let conn = Connection::open_with_flags(&from, OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX)?;
        conn.busy_timeout(std::time::Duration::from_secs(30))?;
        conn.execute("VACUUM INTO ?1", [partial.to_string_lossy().as_ref()]).context("copying the database")?;
        drop(conn);
        // `VACUUM INTO` does not sync its output: the copy reaches the disk before it gets its name.
        std::fs::OpenOptions::new().write(true).open(&partial)?.sync_all().context("syncing the copy")?;
        publish(&partial, to)
    })();
    if copied.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    copied?;
    Ok(std::fs::metadata(to)?.len())
}

/// Gives the finished copy its name without replacing a file that appeared there since the
/// first check (another backup to the same name): a hard link fails when the name is taken, where
/// a rename would overwrite. Then the directory is synced, so the name survives a power cut.
fn publish(partial: &Path, to: &Path) -> anyhow::Result<()> {
    use anyhow::Context;
    match std::fs::hard_link(partial, to) {
        // The backup is in place under its name from here on: what follows cannot fail it.
        Ok(()) => {
            if let Err(e) = std::fs::remove_file(partial) {
                eprintln!("warning: could not remove {}: {e}", partial.display());
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => anyhow::bail!("{} exists already; backups never overwrite", to.display()),
        // A file system without hard links: the rename, checked just before.
        Err(_) => {
            anyhow::ensure!(!to.exists(), "{} exists already; backups never overwrite", to.display());
            std::fs::rename(partial, to).with_context(|| format!("moving the copy to {}", to.display()))?;
        }
    }
    #[cfg(unix)]
    {
        let dir = to.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        if let Err(e) = std::fs::File::open(dir).and_then(|d| d.sync_all()) {
            eprintln!("warning: could not sync {}: {e}", dir.display());
        }
    }
    Ok(())
}

fn aborted() -> DbError {
    DbError::Unavailable("the SQLite write transaction was rolled back by the writer".into())
}

fn bind(stmt: &mut rusqlite::Statement<'_>, q: &Query) -> Result<(), DbError> {
    for (i, arg) in q.args.iter().enumerate() {
        let index = i + 1;
        match arg {
            Arg::I64(v) => stmt.raw_bind_parameter(index, v),
            Arg::F64(v) => stmt.raw_bind_parameter(index, v),
            Arg::Text(v) => stmt.raw_bind_parameter(index, v),
            Arg::Bool(v) => stmt.raw_bind_parameter(index, v),
        }?;
    }
    Ok(())
}

/// Every row of `q`, decoded.
pub fn fetch_all<T: FromRow>(conn: &Connection, q: &Query) -> Result<Vec<T>, DbError> {
    let mut stmt = conn.prepare_cached(&q.sqlite_sql())?;
    bind(&mut stmt, q)?;
    let mut rows = stmt.raw_query();
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        out.push(T::from_row(&mut RowReader::sqlite(row))?);
    }
    Ok(out)
}

/// Sends the rows of `q` in batches until they end or the receiver is gone.
fn stream_rows<T: FromRow>(conn: &Connection, q: &Query, batch: usize, sender: &mpsc::Sender<Result<Vec<T>, DbError>>) -> Result<(), DbError> {
    let mut stmt = conn.prepare(&q.sqlite_sql())?;
    bind(&mut stmt, q)?;
    let mut rows = stmt.raw_query();
    // The first batch is the first row alone: the receiver learns at once that the read runs.
    let (mut size, mut out) = (1, Vec::with_capacity(1));
    while let Some(row) = rows.next()? {
        out.push(T::from_row(&mut RowReader::sqlite(row))?);
        if out.len() == size {
            if sender.blocking_send(Ok(std::mem::replace(&mut out, Vec::with_capacity(batch)))).is_err() {
                return Ok(());
            }
            size = batch;
        }
    }
    if !out.is_empty() {
        let _ = sender.blocking_send(Ok(out));
    }
    Ok(())
}

/// Runs `work`'s statements in one read transaction: one snapshot, and one acquisition of the
/// WAL read lock instead of one per statement (a lock that costs a system call and a mutex
/// shared by every connection of the process).
pub fn in_snapshot<T>(conn: &Connection, work: impl FnOnce(&Connection) -> Result<T, DbError>) -> Result<T, DbError> {
    conn.prepare_cached("BEGIN")?.execute([])?;
    let result = work(conn);
    end_transaction(conn);
    result
}

/// Ends a read transaction left open (by [`in_snapshot`], or by a read interrupted inside one),
/// so the connection's next read sees the latest commit.
pub(super) fn end_transaction(conn: &Connection) {
    if !conn.is_autocommit() && conn.prepare_cached("COMMIT").and_then(|mut s| s.execute([])).is_err() {
        let _ = conn.execute_batch("ROLLBACK");
    }
}

/// The first row of `q`, decoded; the statement still runs to completion.
pub fn fetch_optional<T: FromRow>(conn: &Connection, q: &Query) -> Result<Option<T>, DbError> {
    let mut stmt = conn.prepare_cached(&q.sqlite_sql())?;
    bind(&mut stmt, q)?;
    let mut rows = stmt.raw_query();
    let mut first = None;
    while let Some(row) = rows.next()? {
        if first.is_none() {
            first = Some(T::from_row(&mut RowReader::sqlite(row))?);
        }
    }
    Ok(first)
}

/// Runs `q` (rows it returns are skipped) and counts the rows it changed.
pub fn execute(conn: &Connection, q: &Query) -> Result<u64, DbError> {
    let mut stmt = conn.prepare_cached(&q.sqlite_sql())?;
    bind(&mut stmt, q)?;
    let mut rows = stmt.raw_query();
    while rows.next()?.is_some() {}
    drop(rows);
    Ok(conn.changes())
}

#[cfg(test)]
mod tests;
