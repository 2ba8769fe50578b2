//! Test support for the servers' integration tests: real processes, a real
//! MariaDB, real sockets.
//!
//! - [`db::shared_db`]: one private MariaDB per test binary, stopped at exit;
//!   [`db::private`]: one per test, to stop, restart or count connections of.
//! - [`process::ServerProcess`]: a server binary on a free port, stopped on drop.
//! - [`observe`]: what a running server is doing (CPU time, unread bytes,
//!   its threads' states), for tests that prove an order by state.
//! - [`client`]: the raw HTTP/1 client that shows exactly what a server sent
//!   (`workloads::probe`, which `harness verify` uses too).
//! - [`contract`] and [`contract_tests!`]: the contract suite (docs/ARCHITECTURE.md §2):
//!   every row of `workloads::contract`, then the database down, a stalled
//!   request and SIGTERM.
//! - [`faults`] and [`fault_tests!`]: faults while loaded (the database
//!   SIGKILLed, slow heads, resets, a connection flood) and the [`soak`],
//!   over the bounded client load of [`load`].

pub use workloads::probe as client;
pub mod contract;
pub mod db;
pub mod faults;
pub mod load;
pub mod observe;
pub mod process;
pub mod soak;

pub use process::ServerProcess;
