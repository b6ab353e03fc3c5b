//! WAL checkpoints on a thread of their own.
//!
//! SQLite checkpoints automatically inside the commit that takes the WAL past 1,000 pages: the
//! writer copies the WAL back into the database file and syncs it while every write queued
//! behind it waits (a fifth of the writer's time under customer updates, and a stall of
//! milliseconds each time). Here the writer only reports the WAL's size after each commit; past
//! [`WAL_PAGES`] this thread runs a `PASSIVE` checkpoint on its own connection, which never
//! blocks the writer or the readers.
//!
//! SQLite starts the WAL over from its beginning (instead of growing the file) only when a
//! write transaction begins with every frame already copied, which under steady writes the
//! checkpointer alone never achieves: frames keep arriving while it copies. So after each of
//! its checkpoints the writer, before its next group, copies the few frames added meanwhile
//! ([`Checkpointer::finish_tail`]); its transaction then begins on a fully copied WAL and
//! restarts it. Without that, the WAL grew past 150 MB in a minute of customer updates and every
//! commit paid for new file blocks.

use std::{
    cell::Cell,
    path::Path,
    sync::{
        Arc, Condvar, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use rusqlite::Connection;

/// WAL size (pages) past which a checkpoint runs: SQLite's own default.
const WAL_PAGES: i32 = 1000;
/// WAL size (pages) past which the writer itself makes sure the WAL starts over.
const WAL_LIMIT_PAGES: i32 = 4 * WAL_PAGES;
/// How long the writer waits for readers to let the WAL start over.
const RESTART_WAIT: Duration = Duration::from_millis(50);
/// How long the writer waits for a checkpoint in progress to end before its own (a second
/// checkpoint fails at once instead of waiting: the WAL grew past 30 MB that way while slow
/// disk syncs kept the checkpointer busy).
const CHECKPOINT_WAIT: Duration = Duration::from_secs(1);
/// A checkpoint also runs this often while the WAL holds anything (a safety net).
const IDLE_WAKE: Duration = Duration::from_secs(5);

#[derive(Default)]
struct State {
    due: bool,
    stop: bool,
    /// The checkpointer is copying frames.
    running: bool,
    /// The writer is making the WAL start over: the checkpointer waits.
    restarting: bool,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    /// Set after each checkpoint: the writer copies what arrived meanwhile.
    tail_due: AtomicBool,
}

/// The handle the writer signals; stops the thread when dropped.
pub struct Checkpointer {
    shared: Arc<Shared>,
}

thread_local! {
    /// Pages in the WAL after the last commit of the connection on this thread (the writer's).
    static WAL_SIZE: Cell<i32> = const { Cell::new(0) };
}

/// Registers, on the writer's connection, the hook that reports the WAL's size at each commit,
/// and turns SQLite's own checkpoints off.
pub fn report_wal_size(conn: &Connection) -> rusqlite::Result<()> {
    // The pragma installs a hook of its own: set it first, then ours.
    conn.pragma_update(None, "wal_autocheckpoint", 0)?;
    conn.wal_hook(Some(|_, pages| {
        WAL_SIZE.with(|size| size.set(pages));
        Ok(())
    }));
    Ok(())
}

impl Checkpointer {
    /// Opens a connection of its own on `path` and starts the thread.
    pub fn start(path: &Path, open: impl FnOnce(&Path) -> rusqlite::Result<Connection>) -> anyhow::Result<Checkpointer> {
        let conn = open(path)?;
        let shared: Arc<Shared> = Arc::default();
        let theirs = shared.clone();
        std::thread::Builder::new().name("sqlite-checkpoint".into()).spawn(move || run(&conn, &theirs))?;
        Ok(Checkpointer { shared })
    }

    /// Called by the writer after each commit (on its thread): wakes the checkpointer when the
    /// WAL grew past [`WAL_PAGES`].
    pub fn after_commit(&self) {
        if WAL_SIZE.with(Cell::get) >= WAL_PAGES {
            self.shared.state.lock().unwrap_or_else(|e| e.into_inner()).due = true;
            self.shared.wake.notify_all();
        }
    }

    /// Called by the writer between groups, on its connection: after a checkpoint, copies the
    /// frames written while it ran, so the next group can start the WAL over. Readers that
    /// began before the last commit keep the frames they may need from being copied, and under
    /// steady reads one nearly always has; so past [`WAL_LIMIT_PAGES`] the writer waits for them
    /// to move on (at most [`RESTART_WAIT`], once per 16 MB of writes: a long read, an export,
    /// must not stall every write) and the WAL starts over.
    pub fn finish_tail(&self, conn: &Connection) {
        if WAL_SIZE.with(Cell::get) >= WAL_LIMIT_PAGES {
            WAL_SIZE.with(|size| size.set(0));
            self.shared.tail_due.store(false, Ordering::Relaxed);
            self.hold_checkpointer(true);
            let waited = conn.busy_timeout(RESTART_WAIT).is_ok();
            checkpoint(conn, "RESTART");
            if waited && let Err(e) = conn.busy_timeout(super::BUSY_TIMEOUT) {
                tracing::error!(error = %e, "could not restore the SQLite writer's busy timeout");
            }
            self.hold_checkpointer(false);
        } else if self.shared.tail_due.swap(false, Ordering::Relaxed) {
            checkpoint(conn, "PASSIVE");
        }
    }

    /// Holds the checkpointer back (waiting, up to [`CHECKPOINT_WAIT`], for the end of a
    /// checkpoint it is running), or lets it go again.
    fn hold_checkpointer(&self, hold: bool) {
        let (state, wake) = (&self.shared.state, &self.shared.wake);
        let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
        s.restarting = hold;
        if hold {
            drop(wake.wait_timeout_while(s, CHECKPOINT_WAIT, |s| s.running).unwrap_or_else(|e| e.into_inner()));
        } else {
            wake.notify_all();
        }
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.shared.state.lock().unwrap_or_else(|e| e.into_inner()).stop = true;
        self.shared.wake.notify_all();
    }
}

/// `PRAGMA wal_checkpoint(mode)`: when readers held it up it reports busy (the next one retries).
fn checkpoint(conn: &Connection, mode: &str) {
    if let Err(e) = conn.query_row(&format!("PRAGMA wal_checkpoint({mode})"), [], |_| Ok(())) {
        tracing::warn!(error = %e, "SQLite checkpoint failed; the next one retries");
    }
}

fn run(conn: &Connection, shared: &Shared) {
    let (state, wake) = (&shared.state, &shared.wake);
    loop {
        {
            let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
            if !s.due && !s.stop {
                s = wake.wait_timeout(s, IDLE_WAKE).unwrap_or_else(|e| e.into_inner()).0;
            }
            s = wake.wait_while(s, |s| s.restarting && !s.stop).unwrap_or_else(|e| e.into_inner());
            if s.stop {
                return;
            }
            s.due = false;
            s.running = true;
        }
        checkpoint(conn, "PASSIVE");
        state.lock().unwrap_or_else(|e| e.into_inner()).running = false;
        wake.notify_all();
        shared.tail_due.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use std::{sync::MutexGuard, thread::sleep, time::Instant};

    use super::*;

    fn state(shared: &Shared) -> MutexGuard<'_, State> {
        shared.state.lock().unwrap()
    }

    /// Two checkpoints never overlap (SQLite fails the second at once, and the WAL then did not
    /// start over): the writer's restart waits for the checkpointer's copy in progress, and a
    /// copy that comes due meanwhile waits for the restart.
    #[test]
    fn the_writer_and_the_checkpointer_take_turns() {
        let shared: Arc<Shared> = Arc::default();
        let writer = Checkpointer { shared: shared.clone() };
        state(&shared).running = true;
        let copier = {
            let shared = shared.clone();
            std::thread::spawn(move || {
                sleep(Duration::from_millis(100));
                state(&shared).running = false;
                shared.wake.notify_all();
            })
        };
        let started = Instant::now();
        writer.hold_checkpointer(true);
        assert!(started.elapsed() >= Duration::from_millis(100), "the restart did not wait for the copy in progress");
        assert!(started.elapsed() < CHECKPOINT_WAIT, "the restart waited past the copy's end");
        copier.join().unwrap();

        state(&shared).due = true;
        let checkpointer = {
            let shared = shared.clone();
            std::thread::spawn(move || run(&Connection::open_in_memory().unwrap(), &shared))
        };
        sleep(Duration::from_millis(100));
        assert!(state(&shared).due && !shared.tail_due.load(Ordering::Relaxed), "a checkpoint began during the restart");
        writer.hold_checkpointer(false);
        let deadline = Instant::now() + Duration::from_secs(5);
        while !shared.tail_due.load(Ordering::Relaxed) && Instant::now() < deadline {
            sleep(Duration::from_millis(5));
        }
        assert!(shared.tail_due.load(Ordering::Relaxed), "the due checkpoint did not run after the restart");
        drop(writer);
        checkpointer.join().unwrap();
    }
}
