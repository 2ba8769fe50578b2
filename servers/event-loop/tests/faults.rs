//! Faults while loaded and the soak (testkit::faults, testkit::soak)
//! against one event loop, the shape the contract's default tests run.

testkit::fault_tests!(env!("CARGO_BIN_EXE_event-loop"));
