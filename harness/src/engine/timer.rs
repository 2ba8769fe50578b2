//! Wake-ups finer than `epoll_wait`'s millisecond timeout, for the `--rate`
//! schedule: a timerfd in the poll set, re-armed when the earliest due time
//! changes. Without it every paced request could leave up to 1 ms late, and
//! that lateness — the generator's, not the server's — would show in the
//! corrected latency.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};

/// The timer's token: no connection has it.
pub(crate) const TIMER: Token = Token(usize::MAX);

pub(crate) struct Timer {
    fd: OwnedFd,
    /// The due time it is armed for (the run's clock), `u64::MAX` if none.
    armed_ns: u64,
}

impl Timer {
    pub(crate) fn new(registry: &Registry) -> io::Result<Timer> {
        // SAFETY: plain syscall; the fd is owned from here on.
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh fd nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        registry.register(&mut SourceFd(&fd.as_raw_fd()), TIMER, Interest::READABLE)?;
        Ok(Timer {
            fd,
            armed_ns: u64::MAX,
        })
    }

    /// Makes the poll wake at `at_ns`; a no-op if already armed for it.
    /// Arming resets the timer, so its expiry raises a new edge each time.
    pub(crate) fn arm(&mut self, at_ns: u64, now_ns: u64) {
        if at_ns == self.armed_ns && now_ns < at_ns {
            return;
        }
        let d = at_ns.saturating_sub(now_ns).max(1);
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: (d / 1_000_000_000) as libc::time_t,
                tv_nsec: (d % 1_000_000_000) as libc::c_long,
            },
        };
        // SAFETY: a valid timerfd and a valid itimerspec.
        let rc =
            unsafe { libc::timerfd_settime(self.fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
        self.armed_ns = if rc == 0 { at_ns } else { u64::MAX };
    }
}

/// Lets this thread's timers (and poll timeouts) fire on time instead of
/// within the default 50 µs slack.
pub(crate) fn precise_timers() {
    // SAFETY: plain prctl on the calling thread.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}
