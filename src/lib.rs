//! autoshop: a shop-management API server for automotive service locations.

// Lets `#[derive(FromRow)]` name `::autoshop::db` inside this crate too.
extern crate self as autoshop;

pub mod api_keys;
pub mod app;
pub mod appointments;
pub mod auth;
pub mod availability;
pub mod bays;
pub mod board;
pub mod body;
pub mod change;
pub mod conditional;
pub mod config;
pub mod csv;
pub mod customers;
pub mod db;
pub mod demo;
pub mod error;
pub mod events;
pub mod export;
pub mod extract;
pub mod hex;
pub mod holds;
pub mod http_metrics;
pub mod idempotency;
pub mod listing;
pub mod openapi;
pub mod openapi_public;
pub mod rate_limit;
pub mod receivables;
pub mod request_id;
pub mod respond;
pub mod schemas;
pub mod scope;
pub mod server;
pub mod ship_tos;
pub mod shop_hours;
pub mod shops;
pub mod sources;
pub mod state;
pub mod time;
pub mod validate;
pub mod webhooks;
