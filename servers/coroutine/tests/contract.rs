//! The contract suite (testkit) against the coroutine server's default
//! engine. The `minihttp` engine is may_minihttp itself and deviates from
//! the contract by design (see src/minihttp.rs); tests/model.rs covers it.

testkit::contract_tests!(env!("CARGO_BIN_EXE_coroutine"), "--workers", "2");
