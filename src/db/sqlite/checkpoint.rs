//! WAL checkpoints on a thread of their own.
//!
//! SQLite checkpoints automatically inside the commit that takes the WAL past 1,000 pages: the
//! writer copies the WAL back into the database file and syncs it while every write queued
//! behind it waits (a fifth of the writer's time under customer updates, and a stall of
//! milliseconds each time). Here the writer only reports the WAL's size after each commit; past
//! [`WAL_PAGES`] this thread runs a `PASSIVE` checkpoint on its own connection, which never
//! blocks the writer or the readers. The writer starts the WAL over from its beginning by
//! itself once a checkpoint has copied all of it.

use std::{
    cell::Cell,
    path::Path,
    sync::{Arc, Condvar, Mutex},
    time::Duration,
};

use rusqlite::Connection;

/// WAL size (pages) past which a checkpoint runs: SQLite's own default.
const WAL_PAGES: i32 = 1000;
/// A checkpoint also runs this often while the WAL holds anything (a safety net).
const IDLE_WAKE: Duration = Duration::from_secs(5);

#[derive(Default)]
struct State {
    due: bool,
    stop: bool,
}

/// The handle the writer signals; stops the thread when dropped.
pub struct Checkpointer {
    shared: Arc<(Mutex<State>, Condvar)>,
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
        let shared: Arc<(Mutex<State>, Condvar)> = Arc::default();
        let theirs = shared.clone();
        std::thread::Builder::new().name("sqlite-checkpoint".into()).spawn(move || run(&conn, &theirs))?;
        Ok(Checkpointer { shared })
    }

    /// Called by the writer after each commit (on its thread): wakes the checkpointer when the
    /// WAL grew past [`WAL_PAGES`].
    pub fn after_commit(&self) {
        if WAL_SIZE.with(Cell::get) >= WAL_PAGES {
            let (state, wake) = &*self.shared;
            state.lock().unwrap_or_else(|e| e.into_inner()).due = true;
            wake.notify_one();
        }
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        let (state, wake) = &*self.shared;
        state.lock().unwrap_or_else(|e| e.into_inner()).stop = true;
        wake.notify_one();
    }
}

fn run(conn: &Connection, shared: &(Mutex<State>, Condvar)) {
    let (state, wake) = shared;
    loop {
        {
            let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
            if !s.due && !s.stop {
                s = wake.wait_timeout(s, IDLE_WAKE).unwrap_or_else(|e| e.into_inner()).0;
            }
            if s.stop {
                return;
            }
            s.due = false;
        }
        if let Err(e) = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
            tracing::warn!(error = %e, "SQLite checkpoint failed; the next one retries");
        }
    }
}
