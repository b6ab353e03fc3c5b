# The twenty-fifth session's experiment (bench/RESULTS.md): rebuilds, in a COPY of a bench
# database, the appointments table as a WITHOUT ROWID table keyed (company_id, shop_id,
# start_at, id), with the same secondary indexes ((company_id, id) made unique) and triggers.
#
#   cp bench/data/sqlite-main.db.pristine /tmp/clustered.db
#   python3 bench/cluster_appointments.py /tmp/clustered.db
#
# Serve it with a build whose range page is a plain `LIMIT 10` (in appointments/store.rs
# `list_statements`, leave `f.range` out of `by_index_then_sorted`). Reads only: such a table
# has no rowid to number new appointments.
import re, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("PRAGMA foreign_keys=OFF")
table_sql = db.execute("SELECT sql FROM sqlite_master WHERE type='table' AND name='appointments'").fetchone()[0]
others = db.execute("SELECT type, name, sql FROM sqlite_master WHERE (tbl_name='appointments' AND type IN ('index','trigger') OR type='trigger' AND sql LIKE '%appointments%') AND sql IS NOT NULL").fetchall()
cols = [r[1] for r in db.execute("PRAGMA table_info(appointments)")]
new_sql = re.sub(r"\bid\s+INTEGER PRIMARY KEY( AUTOINCREMENT)?", "id INTEGER NOT NULL", table_sql, count=1)
new_sql = new_sql.replace("CREATE TABLE appointments", "CREATE TABLE appointments_c", 1)
new_sql = new_sql.rstrip().rstrip(")") + ",\n    PRIMARY KEY (company_id, shop_id, start_at, id)\n) WITHOUT ROWID"
print(new_sql)
db.execute("BEGIN")
db.execute(new_sql)
c = ", ".join(cols)
db.execute(f"INSERT INTO appointments_c ({c}) SELECT {c} FROM appointments ORDER BY company_id, shop_id, start_at, id")
for kind, name, sql in others:
    if kind == 'trigger': db.execute(f"DROP TRIGGER IF EXISTS {name}")
db.execute("DROP TABLE appointments")
db.execute("ALTER TABLE appointments_c RENAME TO appointments")
for kind, name, sql in others:
    if name == "appointments_company":
        sql = "CREATE UNIQUE INDEX appointments_company ON appointments (company_id, id)"
    print(sql.splitlines()[0])
    db.execute(sql)
db.execute("COMMIT")
db.execute("ANALYZE")
db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
print(db.execute("SELECT count(*) FROM appointments").fetchone())
