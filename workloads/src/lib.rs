//! The HTTP contract every benchmarked server implements (docs/ARCHITECTURE.md §2).
//!
//! One place for the routes, the validation of query values, the business
//! logic (the sqrt loop, the SQL), the exact response bodies and content
//! types, and [`verify`], which judges a response from any server in any
//! language. Servers are adapters: they parse HTTP, call [`route`] and
//! [`start`], run the [`Action`] in their own runtime (a database query, a
//! timer) and encode the [`Response`].
//!
//! [`contract`] is the one list of the contract's rows (each a request or
//! short exchange, its expected answer, and why), which `harness verify` and
//! every Rust server's `testkit::contract_tests!` run. Adding a route
//! touches this crate (the path in [`PATHS`] and [`route`], [`start`],
//! [`expect`], a row in [`contract::rows`]) and the servers, nothing else:
//! see [`contract`].
//!
//! ```
//! use workloads::{route, start, Action};
//! let r = route("GET", "/cpu?n=1000").unwrap();
//! match start(r.endpoint, b"{}") {
//!     Action::Respond(resp) => assert_eq!(resp.body.as_bytes(), b"21097.455887"),
//!     _ => unreachable!(),
//! }
//! ```

mod config;
pub mod conformance;
pub mod contract;
pub mod echo;
mod endpoint;
#[cfg(feature = "h2")]
pub mod h2rows;
pub mod probe;
mod response;
mod verify;
pub mod ws;

pub use config::{RoomScope, ServerConfig, WebSocketHolding};
pub use endpoint::{
    allow, route, ConnMode, Endpoint, Rejection, Route, ALLOW, CPU_N_DEFAULT, CPU_N_MAX, PATHS,
    SLEEP_MS_MAX,
};
pub use response::{finish, slept, start, Action, AfterQuery, Body, Query, Response};
pub use verify::{expect, verify, verify_headers, Expected, ExpectedBody, Mismatch};

/// The sum of `sqrt(i)` for `i = 1..=n`, added in order (as PHP and Node.js do,
/// so all languages agree on the 6 printed decimals).
#[inline(never)]
pub fn sqrt_sum(n: u32) -> f64 {
    let n = std::hint::black_box(n);
    let mut sum = 0.0f64;
    for i in 1..=n {
        sum += f64::from(i).sqrt();
    }
    sum
}

/// Parses an HTTP `Date` value (IMF-fixdate and the obsolete formats).
pub fn parse_http_date(value: &str) -> Option<std::time::SystemTime> {
    httpdate::parse_http_date(value).ok()
}

/// `sqrt_sum(n)` as the contract prints it: exactly 6 decimals.
pub fn format_sum(sum: f64) -> String {
    format!("{sum:.6}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqrt_sum_of_1000_prints_the_contract_value() {
        assert_eq!(format_sum(sqrt_sum(1000)), "21097.455887");
    }

    #[test]
    fn sqrt_sum_small_values() {
        assert_eq!(format_sum(sqrt_sum(1)), "1.000000");
        assert_eq!(format_sum(sqrt_sum(4)), "6.146264");
    }
}
