//! Notices that a committed change sends to every process serving the database: PostgreSQL's
//! `LISTEN`/`NOTIFY` (delivered after commit, to every replica), and on SQLite, whose writers
//! are all in this process, an in-process broadcast sent after the commit.
//!
//! A listener that loses its connection (or falls behind) gets an error: notices may have been
//! missed, so whatever it caches must be dropped before it listens again.

use sqlx::postgres::PgListener;
use tokio::sync::broadcast;

use super::{Db, DbError};

/// How many notices a slow SQLite listener may fall behind before it is told it missed some.
pub(super) const BACKLOG: usize = 4096;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    pub channel: String,
    pub payload: String,
}

pub enum Listener {
    Sqlite { notices: broadcast::Receiver<Notice>, channels: Vec<String> },
    Postgres(Box<PgListener>),
}

impl Listener {
    /// Starts listening on `channels`; notices committed from now on are heard.
    pub async fn connect(db: &Db, channels: &[&str]) -> Result<Listener, DbError> {
        match db {
            Db::Sqlite(db) => Ok(Listener::Sqlite {
                notices: db.subscribe(),
                channels: channels.iter().map(|c| (*c).to_owned()).collect(),
            }),
            Db::Postgres(pool) => {
                let mut listener = PgListener::connect_with(pool).await?;
                listener.listen_all(channels.iter().copied()).await?;
                Ok(Listener::Postgres(Box::new(listener)))
            }
        }
    }

    /// The next notice; an error means notices may have been lost (reconnect and resync).
    pub async fn recv(&mut self) -> Result<Notice, DbError> {
        match self {
            Listener::Sqlite { notices, channels } => loop {
                match notices.recv().await {
                    Ok(n) if channels.contains(&n.channel) => return Ok(n),
                    Ok(_) => continue,
                    Err(broadcast::error::RecvError::Lagged(missed)) => {
                        return Err(DbError::Unavailable(format!("{missed} notices were missed")));
                    }
                    Err(broadcast::error::RecvError::Closed) => return Err(DbError::Unavailable("the database is closed".into())),
                }
            },
            Listener::Postgres(listener) => match listener.try_recv().await? {
                Some(n) => Ok(Notice { channel: n.channel().to_owned(), payload: n.payload().to_owned() }),
                None => Err(DbError::Unavailable("the notice connection was lost".into())),
            },
        }
    }
}
