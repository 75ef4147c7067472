//! End-to-end tests: the real server on 127.0.0.1:0, driven over real sockets.
//!
//! One test binary for the whole crate (each `tests/*.rs` would link its own).

mod credentials;
mod fake_http;
mod support;

mod abuse;
mod agent_memory;
mod attachments;
mod auth;
mod binary;
mod binary_frames;
mod cancel;
mod chat;
mod client_tools;
mod close_rules;
mod config_errors;
mod config_files;
mod config_variables;
mod console;
mod crash;
mod demo;
mod docs;
mod drain;
mod examples;
mod faults;
mod gnosari;
mod gnosari_contract;
mod golden;
mod inbound_budget;
mod keepalive;
mod large_messages;
mod limits;
mod media;
mod media_out;
mod media_owner;
mod media_routes;
mod memory_bounds;
mod messages;
mod ops;
mod outages;
mod postgres;
mod replica_turns;
mod replicas;
mod runtime;
mod sessions;
mod sessions_api;
mod sqlite_stop;
mod teams;
mod traces;
mod turn_log;
mod upgrade;
mod voice;
mod voice_openai;
mod voice_park;
mod voice_tools;
