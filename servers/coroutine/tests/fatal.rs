//! A coroutine server that dies of a memory fault says so on stderr (it
//! used to die of SIGSEGV with only `listening on` in its log: generator's
//! handler overflowed its signal stack capturing a backtrace).

use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use testkit::ServerProcess;

const BIN: &str = env!("CARGO_BIN_EXE_coroutine");

/// How long a dying server may take to exit (a bound for a hang, not an
/// expected time: the exit is what is waited for).
const EXIT_BOUND: Duration = Duration::from_secs(60);

#[test]
fn a_memory_fault_in_a_coroutine_is_named_on_stderr() {
    let mut server = ServerProcess::start(BIN, &["--fault-in-coroutine"]);
    let status = server
        .wait_exit(EXIT_BOUND)
        .expect("the server did not die of its fault");
    assert_eq!(status.signal(), Some(libc::SIGSEGV), "{status:?}");
    let stderr = server.stderr();
    assert!(
        stderr.contains("coroutine: fatal SIGSEGV: a memory fault at address 0x20 on thread"),
        "{stderr}"
    );
    assert!(!stderr.contains("no fault"), "{stderr}");
}

#[test]
fn a_sigsegv_sent_by_another_process_kills_it_and_is_named() {
    let mut server = ServerProcess::start(BIN, &[]);
    server.signal(libc::SIGSEGV);
    let status = server
        .wait_exit(EXIT_BOUND)
        .expect("the server lived on after SIGSEGV");
    assert_eq!(status.signal(), Some(libc::SIGSEGV), "{status:?}");
    assert!(
        server.stderr().contains("coroutine: fatal SIGSEGV"),
        "{}",
        server.stderr()
    );
}
