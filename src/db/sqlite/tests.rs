//! The writer's promises: concurrent writes all land, a failing write rolls back alone, an
//! uncommitted transaction leaves nothing, a panic is an error and not a dead writer; and the
//! readers': statements read together see one snapshot.

use std::sync::Arc;

use super::SqliteDb;
use crate::db::{Db, DbError, Query};

async fn temp_db() -> (Db, std::path::PathBuf) {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = std::env::temp_dir().join(format!("autoshop_writer_{}_{n}.db", std::process::id()));
    let db = Db::Sqlite(Arc::new(SqliteDb::open(&format!("sqlite://{}", path.display()), 2).unwrap()));
    let Db::Sqlite(inner) = &db else { unreachable!() };
    inner
        .exclusive(|conn| conn.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL UNIQUE)").map_err(DbError::from))
        .await
        .unwrap();
    (db, path)
}

async fn count(db: &Db) -> i64 {
    db.fetch_optional::<(i64,)>(&Query::new("SELECT COUNT(*) FROM t")).await.unwrap().unwrap().0
}

fn insert(v: &str) -> Query {
    Query::new("INSERT INTO t (v) VALUES ($1)").bind(v)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writes_all_land_and_a_duplicate_fails_alone() {
    let (db, path) = temp_db().await;
    let mut tasks = Vec::new();
    for i in 0..200 {
        let db = db.clone();
        // Every tenth write repeats a value: it fails with Unique, the others in its group commit.
        let v = if i % 10 == 9 { format!("v{}", i - 1) } else { format!("v{i}") };
        tasks.push(tokio::spawn(async move { db.execute(&insert(&v)).await }));
    }
    let mut unique = 0;
    for t in tasks {
        match t.await.unwrap() {
            Ok(1) => {}
            Err(DbError::Unique) => unique += 1,
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(unique, 20);
    assert_eq!(count(&db).await, 180);
    let _ = std::fs::remove_file(path);
}

#[tokio::test]
async fn a_transaction_commits_all_or_nothing() {
    let (db, path) = temp_db().await;
    let mut tx = db.begin().await.unwrap();
    tx.execute(&insert("a")).await.unwrap();
    let inside: Option<(i64,)> = tx.fetch_optional(&Query::new("SELECT COUNT(*) FROM t")).await.unwrap();
    assert_eq!(inside, Some((1,)), "a transaction reads its own writes");
    drop(tx);
    assert_eq!(count(&db).await, 0, "dropped without commit: rolled back");

    let mut tx = db.begin().await.unwrap();
    tx.execute(&insert("a")).await.unwrap();
    assert!(matches!(tx.execute(&insert("a")).await, Err(DbError::Unique)));
    tx.execute(&insert("b")).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(count(&db).await, 2, "committed, and visible to readers once acknowledged");
    let _ = std::fs::remove_file(path);
}

#[tokio::test]
async fn a_panicking_statement_is_an_error_and_the_writer_lives_on() {
    let (db, path) = temp_db().await;
    let Db::Sqlite(inner) = &db else { unreachable!() };
    let r: Result<(), DbError> = inner.write(|_| panic!("boom")).await;
    assert!(matches!(r, Err(DbError::Other(_))), "{r:?}");
    db.execute(&insert("after")).await.unwrap();
    assert_eq!(count(&db).await, 1);
    let _ = std::fs::remove_file(path);
}

#[tokio::test]
async fn a_closed_database_refuses_reads_and_writes() {
    let (db, path) = temp_db().await;
    db.execute(&insert("a")).await.unwrap();
    db.close().await;
    assert!(matches!(db.execute(&insert("b")).await, Err(DbError::Unavailable(_))));
    assert!(matches!(db.fetch_optional::<(i64,)>(&Query::new("SELECT 1")).await, Err(DbError::Unavailable(_))));
    let _ = std::fs::remove_file(path);
}

/// Sums 1..=n in SQLite itself: a read whose length the test chooses.
fn slow_sum(n: i64) -> Query {
    Query::new("WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < $1) SELECT CAST(SUM(i) AS BIGINT) FROM c").bind(n)
}

/// A read past the inline budget is interrupted on the runtime's thread and runs again, in
/// full, on a blocking thread: its answer is whole, and the one runtime thread of this test
/// keeps serving other tasks meanwhile (inline, the ticker below would not tick until the
/// read ended).
#[tokio::test(flavor = "current_thread")]
async fn a_long_read_leaves_the_runtime_thread_and_still_answers_in_full() {
    let (db, path) = temp_db().await;
    let ticks = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let ticker = {
        let ticks = ticks.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(std::time::Duration::from_millis(2)).await;
                ticks.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        })
    };
    let n = 3_000_000i64;
    let started = std::time::Instant::now();
    let (sum,) = db.fetch_optional::<(i64,)>(&slow_sum(n)).await.unwrap().unwrap();
    let took = started.elapsed();
    let ticked = ticks.load(std::sync::atomic::Ordering::Relaxed);
    ticker.abort();
    assert_eq!(sum, n * (n + 1) / 2);
    assert!(took > std::time::Duration::from_millis(20), "the read must be long enough to tell ({took:?})");
    assert!(ticked >= 3, "the runtime thread was held by the read: {ticked} ticks in {took:?}");
    // A short read answers too.
    assert_eq!(db.fetch_optional::<(i64,)>(&slow_sum(10)).await.unwrap().unwrap().0, 55);
    let _ = std::fs::remove_file(path);
}

/// 100 concurrent inserts of about a page each (4 kB), numbered by `chunk`.
async fn write_page_sized_rows(db: &Db, chunk: usize) {
    write_rows(db, chunk, 4000).await;
}

/// 100 concurrent inserts of `bytes` each, numbered by `chunk`.
async fn write_rows(db: &Db, chunk: usize, bytes: usize) {
    let filler = "x".repeat(bytes);
    let mut tasks = Vec::new();
    for i in 0..100 {
        let db = db.clone();
        let v = format!("{chunk}-{i}-{filler}");
        tasks.push(tokio::spawn(async move { db.execute(&insert(&v)).await }));
    }
    for t in tasks {
        t.await.unwrap().unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wal_is_checkpointed_off_the_writer() {
    let (db, path) = temp_db().await;
    let main_file = || std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    let before = main_file();
    // About 3,000 pages of rows: past the WAL size that wakes the checkpointer. The writer's
    // own automatic checkpoints are off, so only the checkpointer moves them into the file.
    for chunk in 0..30 {
        write_page_sized_rows(&db, chunk).await;
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while main_file() < before + 8_000_000 && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(main_file() >= before + 8_000_000, "the database file holds {} bytes after 12 MB of writes", main_file());
    assert_eq!(count(&db).await, 3000);
    let _ = std::fs::remove_file(path);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wal_starts_over_under_steady_writes_and_reads() {
    let (db, path) = temp_db().await;
    let wal = path.with_file_name(format!("{}-wal", path.file_name().unwrap().to_string_lossy()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (db, stop) = (db.clone(), stop.clone());
        // Short reads, as the API makes them (a long one, which may hold the WAL as long as it
        // runs, is the next test's).
        let newest = Query::new("SELECT id FROM t ORDER BY id DESC LIMIT 1");
        tokio::spawn(async move {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                db.fetch_optional::<(i64,)>(&newest).await.unwrap();
            }
        })
    };
    // 48 MB of rows, 12 times the WAL size that wakes the checkpointer, written without a pause.
    // A WAL that never started over would hold all of it; this one starts over each time it
    // passes 16 MB. (It did not while the checkpointer was copying: the writer's own checkpoint
    // failed at once then, and with slow disk syncs or four CPU hogs on the two cores the WAL
    // reached 25-49 MB.)
    let mut largest_wal = 0;
    for chunk in 0..120 {
        write_page_sized_rows(&db, chunk).await;
        largest_wal = largest_wal.max(std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    reader.await.unwrap();
    assert_eq!(count(&db).await, 12000);
    assert!(largest_wal < 20_000_000, "the WAL grew to {largest_wal} bytes for 48 MB of writes");
    let _ = std::fs::remove_file(path);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wal_grown_behind_a_long_read_is_cut_back() {
    let (db, path) = temp_db().await;
    let wal = path.with_file_name(format!("{}-wal", path.file_name().unwrap().to_string_lossy()));
    let wal_size = || std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
    for chunk in 0..2 {
        write_page_sized_rows(&db, chunk).await;
    }
    // A stream read one row at a time and not drained holds its snapshot, and so the WAL.
    let mut held = db.stream::<(i64,), _>(Query::new("SELECT id FROM t"), 1, 1, ());
    held.recv().await.unwrap().unwrap();
    for chunk in 2..14 {
        write_rows(&db, chunk, 64_000).await;
    }
    let grown = wal_size();
    assert!(grown > 70_000_000, "the WAL held behind the read: {grown} bytes");
    drop(held);
    // Once the read is gone the WAL starts over, and its file is cut back to 64 MB.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut chunk = 14;
    while wal_size() > 64 * 1024 * 1024 && std::time::Instant::now() < deadline {
        write_page_sized_rows(&db, chunk).await;
        chunk += 1;
    }
    assert!(wal_size() <= 64 * 1024 * 1024, "the WAL file stayed at {} bytes", wal_size());
    let _ = std::fs::remove_file(path);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statements_read_together_see_one_snapshot() {
    use crate::db::Rows;
    let (db, path) = temp_db().await;
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (db, done) = (db.clone(), done.clone());
        tokio::spawn(async move {
            let mut i = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                db.execute(&insert(&format!("w{i}"))).await.unwrap();
                i += 1;
            }
        })
    };
    let counted = || Rows::<(i64,)>::of(Query::new("SELECT COUNT(*) FROM t"));
    // Milliseconds between the two counts, in which the writer commits again and again.
    let slow = || {
        Rows::<(i64,)>::of(Query::new(
            "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 300000) SELECT COUNT(*) FROM n",
        ))
    };
    let mut seen = Vec::new();
    for _ in 0..8 {
        let (before, _, after) = db.read_together((counted(), slow(), counted())).await.unwrap();
        assert_eq!(before, after, "a write committed between two statements read together");
        seen.push(before[0].0);
    }
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    writer.await.unwrap();
    seen.dedup();
    assert!(seen.len() > 2, "the reads ran beside the writes: {seen:?}");
    let _ = std::fs::remove_file(path);
}

/// SQLite undoes a whole transaction on some errors (a full disk, an I/O error): simulated here
/// by a write that ends the group's transaction itself. Every write answered Ok is stored, and
/// none answered with an error is: none may commit alone after the group's transaction is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_undone_under_the_group_fails_its_writes_and_commits_none_alone() {
    let (db, path) = temp_db().await;
    for round in 0..5 {
        let mut tasks = Vec::new();
        for i in 0..100 {
            let db = db.clone();
            let q = if i == 50 { Query::new("ROLLBACK") } else { insert(&format!("r{round}-{i}")) };
            tasks.push(tokio::spawn(async move { (i, db.execute(&q).await.is_ok()) }));
        }
        for t in tasks {
            let (i, ok) = t.await.unwrap();
            if i == 50 {
                continue;
            }
            let stored = db
                .fetch_optional::<(i64,)>(&Query::new("SELECT COUNT(*) FROM t WHERE v = $1").bind(format!("r{round}-{i}")))
                .await
                .unwrap()
                .unwrap()
                .0;
            assert_eq!(stored == 1, ok, "round {round}, write {i}: answered ok={ok}, stored {stored}");
        }
    }
    let _ = std::fs::remove_file(path);
}

/// The planner's statistics are read whole, never from a sample: a sample of a big table's
/// first index entries sees one company and one shop, and the plans that rest on it (QPSG)
/// pick indexes by wrong averages. A shutdown used to store such a sample.
#[tokio::test]
async fn statistics_stored_across_a_restart_are_read_whole() {
    let (db, path) = temp_db().await;
    db.migrate().await.unwrap();
    let Db::Sqlite(inner) = &db else { unreachable!() };
    inner
        .exclusive(|conn| {
            conn.execute_batch(
                "CREATE TABLE s (id INTEGER PRIMARY KEY, company INTEGER NOT NULL, shop INTEGER NOT NULL);
                 CREATE INDEX s_company_shop ON s (company, shop);
                 WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 10000)
                 INSERT INTO s (company, shop) SELECT 1, i % 2 FROM n;",
            )?;
            // A read through the index marks the table as used, which a plain `optimize` looks at.
            conn.query_row("SELECT COUNT(*) FROM s WHERE company = 1 AND shop = 1", [], |r| r.get::<_, i64>(0))?;
            Ok(())
        })
        .await
        .unwrap();
    db.close().await;
    drop(db);
    let reopened = Db::Sqlite(Arc::new(SqliteDb::open(&format!("sqlite://{}", path.display()), 1).unwrap()));
    reopened.migrate().await.unwrap();
    let stat: Option<(String,)> = reopened.fetch_optional(&Query::new("SELECT stat FROM sqlite_stat1 WHERE idx = 's_company_shop'")).await.unwrap();
    // 10,000 rows, all of company 1 (10,000 per value), half in each shop (5,000).
    assert_eq!(stat.map(|(s,)| s), Some("10000 10000 5000".to_owned()));
    reopened.close().await;
    let _ = std::fs::remove_file(path);
}
