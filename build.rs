// PostgreSQL integration tests are compiled in only when a test server is configured, so a run
// without one reports them as ignored instead of passing silently.
//
// SQLite migrations are embedded from `migrations/sqlite` (the PostgreSQL ones through sqlx's
// `migrate!`): the list is generated here so a new file needs no code change.
use std::{env, fs, path::Path};

fn main() {
    println!("cargo::rustc-check-cfg=cfg(autoshop_pg)");
    println!("cargo::rerun-if-env-changed=AUTOSHOP_TEST_POSTGRES_URL");
    if env::var("AUTOSHOP_TEST_POSTGRES_URL").is_ok_and(|v| !v.is_empty()) {
        println!("cargo::rustc-cfg=autoshop_pg");
    }
    embed_sqlite_migrations();
}

fn embed_sqlite_migrations() {
    let dir = Path::new(&env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR")).join("migrations/sqlite");
    println!("cargo::rerun-if-changed={}", dir.display());
    let mut files: Vec<(i64, String)> = fs::read_dir(&dir)
        .expect("migrations/sqlite exists")
        .filter_map(|entry| {
            let name = entry.ok()?.file_name().into_string().ok()?;
            let version = name.strip_suffix(".sql")?.split('_').next()?.parse().ok()?;
            Some((version, name))
        })
        .collect();
    files.sort();
    let mut out = String::from("&[\n");
    for (version, name) in &files {
        let path = dir.join(name);
        out.push_str(&format!("    ({version}, {name:?}, include_str!({:?})),\n", path.display().to_string()));
    }
    out.push(']');
    fs::write(Path::new(&env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("sqlite_migrations.rs"), out)
        .expect("write the migration list");
}
