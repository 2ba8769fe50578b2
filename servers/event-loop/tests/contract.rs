//! The contract suite (testkit) against one event loop (Node.js style) and
//! two loops sharing the port (Node cluster style).

testkit::contract_tests!(env!("CARGO_BIN_EXE_event-loop"));

mod two_loops {
    testkit::contract_tests!(env!("CARGO_BIN_EXE_event-loop"), "--workers", "2");
}
