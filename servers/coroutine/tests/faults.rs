//! Faults while loaded and the soak (testkit::faults, testkit::soak)
//! against both engines of the coroutine server: the default one and
//! may_minihttp (which has no read timeout, as its /config says: the
//! slow-head test holds it to that).

testkit::fault_tests!(env!("CARGO_BIN_EXE_coroutine"), "--workers", "2");

mod minihttp {
    testkit::fault_tests!(
        env!("CARGO_BIN_EXE_coroutine"),
        "--workers",
        "2",
        "--engine",
        "minihttp"
    );
}
