//! The OpenAPI document is the contract integrators generate clients from: its snapshot is
//! checked in (tests/api/snapshots/), so every change to it shows up in review. After an
//! intended change, accept the new document with
//! `INSTA_UPDATE=always cargo test --test api openapi::` (or `cargo insta review`).

#[test]
fn the_document_matches_its_snapshot() {
    let doc = autoshop::app::openapi_document();
    insta::assert_json_snapshot!("openapi", doc);
}
