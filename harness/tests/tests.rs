//! The harness's integration tests, one binary (as ripgrep's tests/tests.rs):
//! real sockets everywhere.

mod bodies;
mod cli;
mod compare;
mod compose_stacks;
mod diff;
mod docker;
mod engine;
mod env;
mod faults;
mod h2_codec;
mod h2_engine;
mod h2_verify;
mod h3_run;
mod h3_verify;
mod layers;
mod mix;
mod models;
mod pipeline;
mod rates;
mod reference;
mod reproduce;
mod series;
mod tls;
mod util;
mod verify;
mod websocket;
