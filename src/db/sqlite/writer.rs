//! SQLite's one writer: a thread that owns the write connection and commits in groups.
//!
//! With `synchronous=FULL` every commit waits for an fsync (about 1.5 ms on the benchmark
//! machine), so one commit per request caps writes near 700 per second whatever the CPU can do.
//! The writer therefore takes every job waiting, runs each in its own savepoint of one
//! `BEGIN IMMEDIATE` transaction (a failing job rolls back alone, as it would in autocommit),
//! commits once, and only then answers each caller: an acknowledged write is on disk, and many
//! writes share one fsync.
//!
//! A job is either one statement, or an interactive transaction ([`super::SqliteTx`]) whose
//! statements arrive one by one while the writer waits for them: the caller's statements run
//! between its savepoint and its release, and its commit is answered after the group's commit.

use std::{
    panic::{AssertUnwindSafe, catch_unwind},
    sync::mpsc::{Receiver, RecvTimeoutError},
    time::Duration,
};

use rusqlite::Connection;
use tokio::sync::{mpsc, oneshot};

use super::checkpoint::Checkpointer;
use crate::db::DbError;

/// The most jobs one commit carries.
pub const MAX_GROUP: usize = 256;

/// How long the writer waits for the next statement of an open transaction before rolling it
/// back: a caller that stalls must not stop every other write.
const UNIT_IDLE_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs on the writer's connection; says whether it failed (its savepoint is then rolled back)
/// and how to answer its caller once the group's commit is known.
pub type Work = Box<dyn FnOnce(&Connection) -> (bool, Answer) + Send>;
/// Called with the outcome of the group's commit.
pub type Answer = Box<dyn FnOnce(Result<(), DbError>) + Send>;
/// Runs alone, outside any transaction (migrations, pragmas).
pub type Exclusive = Box<dyn FnOnce(&mut Connection) + Send>;

pub enum Job {
    /// One write, in its own savepoint of the next group.
    Single(Work),
    /// An interactive transaction: statements until `Commit`, or until the sender is dropped
    /// (roll back).
    Unit(Receiver<Command>),
    Exclusive(Exclusive),
}

pub enum Command {
    /// A statement inside the transaction; it answers its caller itself, at once.
    Run(Box<dyn FnOnce(&Connection) + Send>),
    Commit(oneshot::Sender<Result<(), DbError>>),
    /// The transaction's last statements, then its commit: one hand-off for both. `None`: they
    /// failed (the closure has answered its caller) and the transaction rolls back.
    CommitWith(Box<dyn FnOnce(&Connection) -> Option<Answer> + Send>),
}

/// Starts the writer thread; it ends when every sender of `jobs` is gone (and stops the
/// checkpointer it signals after each commit).
pub fn start(mut conn: Connection, mut jobs: mpsc::Receiver<Job>, checkpointer: Checkpointer) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new().name("sqlite-writer".into()).spawn(move || {
        let mut pending = None;
        while let Some(job) = pending.take().or_else(|| jobs.blocking_recv()) {
            match job {
                Job::Exclusive(work) => {
                    if catch_unwind(AssertUnwindSafe(|| work(&mut conn))).is_err() {
                        tracing::error!("a task on the SQLite writer panicked");
                    }
                }
                job => {
                    checkpointer.finish_tail(&conn);
                    pending = run_group(&conn, job, &mut jobs);
                }
            }
            checkpointer.after_commit();
        }
    })
}

/// Runs `first` and whatever else waits (up to [`MAX_GROUP`]) in one transaction. Returns an
/// exclusive job met on the way: it runs after the group's commit.
fn run_group(conn: &Connection, first: Job, jobs: &mut mpsc::Receiver<Job>) -> Option<Job> {
    if let Err(e) = conn.execute_batch("BEGIN IMMEDIATE") {
        tracing::warn!(error = %e, "the SQLite writer could not start a transaction");
        // Dropping the job answers its caller with an error (its reply channel closes).
        drop(first);
        return None;
    }
    let mut answers: Vec<Answer> = Vec::new();
    let mut next = Some(first);
    let mut count = 0;
    let mut exclusive = None;
    while let Some(job) = next.take() {
        count += 1;
        if matches!(job, Job::Exclusive(_)) {
            exclusive = Some(job);
            break;
        }
        run_in_savepoint(conn, job, &mut answers);
        if conn.is_autocommit() {
            // SQLite undid the whole transaction under the group (it does on a full disk, an
            // I/O error, running out of memory): every write of the group so far is undone, and
            // no more may run, or each would commit alone while its caller heard of a failure.
            tracing::error!("SQLite rolled back the writer's transaction; the group's writes are undone");
            for answer in answers {
                answer(Err(rolled_back()));
            }
            return exclusive;
        }
        if count < MAX_GROUP {
            next = jobs.try_recv().ok();
        }
    }
    let outcome = conn.execute_batch("COMMIT").map_err(DbError::from);
    if outcome.is_err() {
        let _ = conn.execute_batch("ROLLBACK");
    }
    for answer in answers {
        answer(outcome.clone());
    }
    exclusive
}

fn rolled_back() -> DbError {
    DbError::Unavailable("SQLite rolled the write transaction back (disk full or I/O error?)".into())
}

fn run_in_savepoint(conn: &Connection, job: Job, answers: &mut Vec<Answer>) {
    if let Err(e) = conn.execute_batch("SAVEPOINT job") {
        tracing::error!(error = %e, "could not open a savepoint on the SQLite writer");
        return;
    }
    let keep = match job {
        Job::Single(work) => match catch_unwind(AssertUnwindSafe(|| work(conn))) {
            Ok((failed, answer)) => {
                answers.push(answer);
                !failed
            }
            Err(_) => {
                tracing::error!("a write on the SQLite writer panicked");
                false
            }
        },
        Job::Unit(commands) => run_unit(conn, commands, answers),
        Job::Exclusive(_) => false,
    };
    let end = if keep { "RELEASE job" } else { "ROLLBACK TO job; RELEASE job" };
    if let Err(e) = conn.execute_batch(end) {
        tracing::error!(error = %e, "could not end a savepoint on the SQLite writer");
    }
}

/// Serves one interactive transaction; true when it committed.
fn run_unit(conn: &Connection, commands: Receiver<Command>, answers: &mut Vec<Answer>) -> bool {
    loop {
        let command = commands.recv_timeout(UNIT_IDLE_TIMEOUT);
        if conn.is_autocommit() {
            // Undone under it by SQLite (see `run_group`): a statement now would commit alone.
            // Dropping the command answers its caller with an error.
            return false;
        }
        match command {
            Ok(Command::Run(statement)) => {
                if catch_unwind(AssertUnwindSafe(|| statement(conn))).is_err() {
                    tracing::error!("a statement on the SQLite writer panicked");
                    return false;
                }
            }
            Ok(Command::Commit(reply)) => {
                answers.push(Box::new(move |outcome| {
                    let _ = reply.send(outcome);
                }));
                return true;
            }
            Ok(Command::CommitWith(last)) => match catch_unwind(AssertUnwindSafe(|| last(conn))) {
                Ok(Some(answer)) => {
                    answers.push(answer);
                    return true;
                }
                Ok(None) => return false,
                Err(_) => {
                    tracing::error!("a statement on the SQLite writer panicked");
                    return false;
                }
            },
            Err(RecvTimeoutError::Disconnected) => return false,
            Err(RecvTimeoutError::Timeout) => {
                tracing::warn!("a write transaction sent nothing for {UNIT_IDLE_TIMEOUT:?}; rolled back");
                return false;
            }
        }
    }
}
