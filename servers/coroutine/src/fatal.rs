//! A memory fault says so on stderr before the process dies.
//!
//! `may`'s stacks come from the `generator` crate, whose SIGSEGV/SIGBUS
//! handler tells a coroutine's stack overflow (a fault in a guard page)
//! from any other fault; for the others it captures a backtrace inside the
//! handler, on the thread's small signal stack, which overflows it: the
//! process died of a second SIGSEGV with nothing on stderr (the "silent
//! death" of a default compare). This handler goes in front of it: it
//! writes one line with only async-signal-safe calls (`write(2)`), then
//! hands the signal on to generator's handler, which still reports a stack
//! overflow as such. A signal sent by another process (`kill -SEGV`), which
//! generator's handler would swallow, is re-raised with the default action.

use std::sync::Once;

/// The handler that was installed before ours (generator's).
static mut PREVIOUS: [libc::sigaction; 2] = unsafe { std::mem::zeroed() };
const SIGNALS: [libc::c_int; 2] = [libc::SIGSEGV, libc::SIGBUS];

/// Installs the handler once. Call it after may has started a coroutine,
/// so that generator's handler is already in place to chain to.
pub fn report_memory_faults() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // generator installs its handler when it makes its first stack.
        let _ = may::go!(|| {}).join();
        for (i, &signal) in SIGNALS.iter().enumerate() {
            // SAFETY: sigaction with a zeroed struct, an extern "C" handler
            // of the SA_SIGINFO shape, and the previous action stored once,
            // before any fault can read it.
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = handler as *const () as libc::sighandler_t;
                action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
                libc::sigemptyset(&mut action.sa_mask);
                let previous = std::ptr::addr_of_mut!(PREVIOUS[i]);
                libc::sigaction(signal, &action, previous);
            }
        }
    });
}

/// Writes `line` to stderr with one `write(2)`.
fn write_stderr(line: &[u8]) {
    // SAFETY: write(2) on fd 2 from a valid buffer.
    unsafe { libc::write(libc::STDERR_FILENO, line.as_ptr().cast(), line.len()) };
}

/// Appends `x` in hex to `buf` at `at`; returns the new end.
fn put_hex(buf: &mut [u8], mut at: usize, x: usize) -> usize {
    let digits = b"0123456789abcdef";
    for b in b"0x" {
        buf[at] = *b;
        at += 1;
    }
    let mut started = false;
    for shift in (0..usize::BITS / 4).rev().map(|i| i * 4) {
        let d = (x >> shift) & 0xf;
        if d != 0 || started || shift == 0 {
            buf[at] = digits[d];
            at += 1;
            started = true;
        }
    }
    at
}

/// Appends `s` to `buf` at `at`; returns the new end.
fn put(buf: &mut [u8], at: usize, s: &[u8]) -> usize {
    buf[at..at + s.len()].copy_from_slice(s);
    at + s.len()
}

/// The line for `signal` at `addr` on thread `tid`.
fn line(buf: &mut [u8; 256], signal: libc::c_int, addr: usize, tid: usize) -> usize {
    let name: &[u8] = if signal == libc::SIGBUS {
        b"SIGBUS"
    } else {
        b"SIGSEGV"
    };
    let mut at = put(buf, 0, b"\ncoroutine: fatal ");
    at = put(buf, at, name);
    at = put(buf, at, b": a memory fault at address ");
    at = put_hex(buf, at, addr);
    at = put(buf, at, b" on thread ");
    at = put_hex(buf, at, tid);
    put(
        buf,
        at,
        b" (a coroutine stack overflow if generator says so next; else a bug: a core dump, where ulimit -c allows, has its backtrace)\n",
    )
}

extern "C" fn handler(signal: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let mut buf = [0u8; 256];
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    let (addr, code) = unsafe { ((*info).si_addr() as usize, (*info).si_code) };
    let tid = unsafe { libc::syscall(libc::SYS_gettid) } as usize;
    let n = line(&mut buf, signal, addr, tid);
    write_stderr(&buf[..n]);
    let i = usize::from(signal == libc::SIGBUS);
    // SAFETY: PREVIOUS was written once before this handler was installed.
    let previous = unsafe { std::ptr::addr_of!(PREVIOUS[i]).read() };
    let sent = code == libc::SI_USER || code == libc::SI_TKILL;
    let chains = previous.sa_flags & libc::SA_SIGINFO != 0
        && previous.sa_sigaction != libc::SIG_DFL
        && previous.sa_sigaction != libc::SIG_IGN;
    if chains && !sent {
        // SAFETY: generator's handler, with the arguments it was given.
        let previous: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
            unsafe { std::mem::transmute(previous.sa_sigaction) };
        previous(signal, info, ctx);
        return;
    }
    // Die of the signal, with its core: the default action, raised again.
    // SAFETY: resetting a handler and raising a signal are signal-safe.
    unsafe {
        libc::signal(signal, libc::SIG_DFL);
        libc::raise(signal);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_names_the_signal_address_and_thread() {
        let mut buf = [0u8; 256];
        let n = line(&mut buf, libc::SIGSEGV, 0x20, 0x1f6a);
        let text = std::str::from_utf8(&buf[..n]).unwrap();
        assert!(
            text.starts_with(
                "\ncoroutine: fatal SIGSEGV: a memory fault at address 0x20 on thread 0x1f6a ("
            ),
            "{text}"
        );
        assert!(text.ends_with(")\n"));
        let n = put_hex(&mut buf, 0, 0);
        assert_eq!(&buf[..n], b"0x0");
    }
}
