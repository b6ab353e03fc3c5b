//! Storage: connection pools for SQLite or PostgreSQL behind one small API.
//!
//! Feature stores write SQL once (see [`Query`]) and decode rows into types deriving
//! `sqlx::FromRow`, which decode from either backend. Instants are stored as integer microseconds
//! since the epoch and money as integer cents, so both backends compare and sort them the same way.

mod pools;
mod query;

pub use pools::{Db, DbConfig, Tx};
pub use query::{Arg, Query, like_contains};

use sqlx::{postgres::PgRow, sqlite::SqliteRow};

/// A row type that decodes from both backends.
pub trait Row: for<'r> sqlx::FromRow<'r, SqliteRow> + for<'r> sqlx::FromRow<'r, PgRow> + Send + Unpin {}
impl<T> Row for T where T: for<'r> sqlx::FromRow<'r, SqliteRow> + for<'r> sqlx::FromRow<'r, PgRow> + Send + Unpin {}

#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// A unique constraint rejected the write; the store maps it to the field it guards.
    #[error("unique constraint violated")]
    Unique,
    /// The database could not be reached (down, pool exhausted, connection lost).
    #[error("database unavailable: {0}")]
    Unavailable(sqlx::Error),
    #[error("database error: {0}")]
    Other(sqlx::Error),
}

impl From<sqlx::Error> for DbError {
    fn from(e: sqlx::Error) -> Self {
        match &e {
            sqlx::Error::Database(d) if d.is_unique_violation() => DbError::Unique,
            sqlx::Error::Io(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::WorkerCrashed
            | sqlx::Error::Tls(_) => DbError::Unavailable(e),
            // PostgreSQL shutting down / starting up / too many connections.
            sqlx::Error::Database(d)
                if d.code().is_some_and(|c| c.starts_with("57P") || c == "53300" || c.starts_with("08")) =>
            {
                DbError::Unavailable(e)
            }
            // SQLite busy beyond the busy timeout.
            sqlx::Error::Database(d) if d.code().is_some_and(|c| c == "5" || c == "517") => {
                DbError::Unavailable(e)
            }
            _ => DbError::Other(e),
        }
    }
}

/// Microseconds since the Unix epoch: how every instant is stored.
pub fn now_micros() -> i64 {
    chrono::Utc::now().timestamp_micros()
}
