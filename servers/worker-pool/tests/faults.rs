//! Faults while loaded and the soak (testkit::faults, testkit::soak)
//! against the worker pool's front + workers shape. (The per-connection
//! shape gives each slow head a worker by design, as Apache prefork does:
//! a slowloris starves it, which is its model, not a defect to test away.)

testkit::fault_tests!(env!("CARGO_BIN_EXE_worker-pool"), "--workers", "8");
