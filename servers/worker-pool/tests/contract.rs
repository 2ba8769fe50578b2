//! The contract suite (testkit) against the worker pool in both shapes.

testkit::contract_tests!(env!("CARGO_BIN_EXE_worker-pool"), "--workers", "8");

mod per_connection {
    testkit::contract_tests!(
        env!("CARGO_BIN_EXE_worker-pool"),
        "--workers",
        "8",
        "--per-connection"
    );
}
