//! SQLite migrations, kept in sqlx's `_sqlx_migrations` table (same columns, same SHA-384
//! checksums), so databases created by earlier releases, which ran sqlx's migrator, carry on.

use anyhow::{Context, bail};
use rusqlite::{Connection, OptionalExtension};
use sha2::{Digest, Sha384};

/// `(version, file name)` of every migration, in order, with its SQL (see `build.rs`).
static MIGRATIONS: &[(i64, &str, &str)] = include!(concat!(env!("OUT_DIR"), "/sqlite_migrations.rs"));

/// sqlx's description: the file name after the version, without `.sql`, `_` read as spaces.
fn description(file: &str) -> String {
    let rest = file.split_once('_').map_or(file, |(_, rest)| rest);
    rest.trim_end_matches(".sql").replace('_', " ")
}

pub fn run(conn: &mut Connection) -> anyhow::Result<()> {
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS _sqlx_migrations (
            version BIGINT PRIMARY KEY,
            description TEXT NOT NULL,
            installed_on TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
            success BOOLEAN NOT NULL,
            checksum BLOB NOT NULL,
            execution_time BIGINT NOT NULL
        )",
    )?;
    for (version, file, sql) in MIGRATIONS {
        let checksum = Sha384::digest(sql.as_bytes()).to_vec();
        // Each migration and its record commit together; another process migrating at the same
        // time waits for the write lock, then finds the record and skips it.
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let applied: Option<(Vec<u8>, bool)> = tx
            .query_row("SELECT checksum, success FROM _sqlx_migrations WHERE version = ?1", [version], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        match applied {
            Some((stored, true)) if stored == checksum => continue,
            Some((_, true)) => bail!("migration {file} was changed after it was applied to this database"),
            Some((_, false)) => bail!("migration {file} failed earlier and left the database dirty"),
            None => {}
        }
        let started = std::time::Instant::now();
        tx.execute_batch(sql).with_context(|| format!("applying migration {file}"))?;
        tx.execute(
            "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) VALUES (?1, ?2, TRUE, ?3, ?4)",
            rusqlite::params![version, description(file), checksum, started.elapsed().as_nanos() as i64],
        )?;
        tx.commit()?;
    }
    // Planner statistics for the tables that lack them or changed much, read whole: readers
    // plan each statement once (QPSG, see `plan_once`), so the plan rests on these averages,
    // and a sample (`analysis_limit`) of the first index entries saw one company and one shop
    // and sent the range page down the wrong index. About 5 s at a million appointments, once.
    conn.execute_batch("PRAGMA optimize = 0x10002;")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_follow_sqlx() {
        assert_eq!(description("0004_appointment_counts.sql"), "appointment counts");
        assert!(MIGRATIONS.windows(2).all(|w| w[0].0 < w[1].0), "versions ascend");
    }
}
