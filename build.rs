// PostgreSQL integration tests are compiled in only when a test server is configured, so a run
// without one reports them as ignored instead of passing silently.
fn main() {
    println!("cargo::rustc-check-cfg=cfg(autoshop_pg)");
    println!("cargo::rerun-if-env-changed=AUTOSHOP_TEST_POSTGRES_URL");
    if std::env::var("AUTOSHOP_TEST_POSTGRES_URL").is_ok_and(|v| !v.is_empty()) {
        println!("cargo::rustc-cfg=autoshop_pg");
    }
}
