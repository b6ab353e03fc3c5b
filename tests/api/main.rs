//! HTTP tests: every behaviour driven through the real router on SQLite and PostgreSQL.

mod raw;
mod support;

mod api_keys;
mod appointments;
mod appointments_delete;
mod appointments_list;
mod appointments_tz;
mod bays;
mod board;
mod booking;
mod conditional;
mod customer_search;
mod customers;
mod errors;
mod events_feed;
mod events_recorded;
mod events_stream;
mod export_import;
mod idempotency;
mod isolation;
mod openapi;
mod receiver;
mod receivables;
mod schema;
mod settings;
mod ship_tos;
mod shop_changes;
mod shops;
mod tenancy;
mod transport;
mod transport_limits;
mod webhooks;
