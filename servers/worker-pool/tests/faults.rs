//! Faults while loaded and the soak (testkit::faults, testkit::soak)
//! against the worker pool's front + workers shape. (The per-connection
//! shape gives each slow head a worker by design, as Apache prefork does:
//! a slowloris starves it, which is its model, not a defect to test away.)

// The soak is ignored in CI (#20, open): RSS grows about 30 bytes a
// request until it levels off near 43 MiB after about 1.2 million requests
// (seen twice at 16–23k req/s); on a slow machine CI's stretch judges it
// before the plateau. Run it with `cargo test -p worker-pool --test faults
// -- --ignored` and a long BENCHLAB_SOAK_SECS.
testkit::fault_tests!(
    env!("CARGO_BIN_EXE_worker-pool"),
    "--workers",
    "8";
    soak_ignored = "RSS levels off only after ~1.2M requests (#20): run with --ignored and a long BENCHLAB_SOAK_SECS"
);
