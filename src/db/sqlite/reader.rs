//! The read connections, and where a read runs.
//!
//! A read runs first on the calling thread, one of the runtime's workers: most reads are a page
//! of rows found through an index, tens of microseconds, and sending them to a blocking thread
//! and back cost more than the read itself (two thread switches; the default page served 1.5x
//! the requests inline). A read that outlasts [`INLINE_BUDGET`] is interrupted by SQLite's
//! progress handler and runs again from the start on a blocking thread, so a long search cannot
//! hold one of the few workers that every other request needs. Reads have no side effects, so
//! running one twice is safe; the interrupted attempt's rows are dropped.

use std::{
    sync::{
        Arc, Mutex, OnceLock,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use rusqlite::Connection;
use tokio::sync::Semaphore;

use crate::db::DbError;

/// How long a read may run on a runtime worker before it moves to a blocking thread.
const INLINE_BUDGET: Duration = Duration::from_millis(1);
/// SQLite calls the progress handler every this many virtual-machine instructions (a few
/// microseconds).
const PROGRESS_STEPS: std::ffi::c_int = 1000;

/// A read connection and the deadline its progress handler enforces.
struct Reader {
    conn: Connection,
    budget: Arc<Budget>,
}

#[derive(Default)]
struct Budget {
    /// Nanoseconds since [`clock`]'s start past which the running read is interrupted; 0: none.
    deadline: AtomicU64,
    /// Set when the handler interrupted a read.
    exceeded: AtomicBool,
}

fn clock() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

impl Reader {
    fn new(conn: Connection) -> rusqlite::Result<Reader> {
        let budget = Arc::new(Budget::default());
        let watch = budget.clone();
        conn.progress_handler(
            PROGRESS_STEPS,
            Some(move || {
                let deadline = watch.deadline.load(Ordering::Relaxed);
                let over = deadline != 0 && clock() > deadline;
                if over {
                    watch.exceeded.store(true, Ordering::Relaxed);
                }
                over
            }),
        )?;
        Ok(Reader { conn, budget })
    }

    /// Runs `work` within the inline budget: `None` when it ran out (the work was interrupted).
    fn within_budget<T>(&self, work: &impl Fn(&Connection) -> Result<T, DbError>) -> Option<Result<T, DbError>> {
        self.budget.exceeded.store(false, Ordering::Relaxed);
        self.budget.deadline.store(clock() + INLINE_BUDGET.as_nanos() as u64, Ordering::Relaxed);
        let result = work(&self.conn);
        self.budget.deadline.store(0, Ordering::Relaxed);
        if self.budget.exceeded.load(Ordering::Relaxed) { None } else { Some(result) }
    }
}

/// The pool of read connections; a permit is a right to one idle connection.
pub struct Readers {
    idle: Mutex<Vec<Reader>>,
    permits: Arc<Semaphore>,
    size: usize,
}

impl Readers {
    pub fn open(size: usize, open: impl Fn() -> rusqlite::Result<Connection>) -> rusqlite::Result<Readers> {
        let idle = (0..size).map(|_| Reader::new(open()?)).collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(Readers { idle: Mutex::new(idle), permits: Arc::new(Semaphore::new(size)), size })
    }

    /// Runs `work` on a read connection: on the calling thread, or, past the inline budget,
    /// again on a blocking thread.
    pub async fn read<T, F>(self: &Arc<Self>, work: F) -> Result<T, DbError>
    where
        T: Send + 'static,
        F: Fn(&Connection) -> Result<T, DbError> + Send + 'static,
    {
        let permit = self.permits.clone().acquire_owned().await.map_err(|_| super::closed())?;
        if let Some(result) = self.lend()?.reader().within_budget(&work) {
            return result;
        }
        metrics::counter!("sqlite_reads_moved_to_blocking_total").increment(1);
        let readers = self.clone();
        tokio::task::spawn_blocking(move || {
            let result = work(&readers.lend()?.reader().conn);
            drop(permit);
            result
        })
        .await
        .map_err(|e| DbError::Other(format!("a read failed: {e}")))?
    }

    /// Takes an idle connection; the caller holds a permit.
    fn lend(&self) -> Result<Lent<'_>, DbError> {
        match self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop() {
            Some(reader) => Ok(Lent { reader: Some(reader), readers: self }),
            None => Err(DbError::Other("no idle SQLite reader despite a permit".into())),
        }
    }

    /// `(readers, idle readers)`.
    pub fn stats(&self) -> (u32, usize) {
        (self.size as u32, self.permits.available_permits())
    }

    /// Refuses every later read and closes the idle connections.
    pub fn close(&self) {
        self.permits.close();
        self.idle.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
}

/// A read connection borrowed from the pool: back in the pool however the work ends.
struct Lent<'a> {
    reader: Option<Reader>,
    readers: &'a Readers,
}

impl Lent<'_> {
    fn reader(&self) -> &Reader {
        self.reader.as_ref().expect("a lent reader is present until dropped")
    }
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        if let Some(reader) = self.reader.take() {
            super::end_transaction(&reader.conn);
            self.readers.idle.lock().unwrap_or_else(|e| e.into_inner()).push(reader);
        }
    }
}
