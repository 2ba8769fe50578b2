//! The `Date` header value, formatted at most once a second per thread.

use std::cell::RefCell;

/// Length of an IMF-fixdate: `Mon, 30 Nov 2026 01:57:30 GMT`.
pub const DATE_LEN: usize = 29;

struct Cached {
    second: i64,
    value: [u8; DATE_LEN],
}

thread_local! {
    static CACHE: RefCell<Cached> = const { RefCell::new(Cached { second: -1, value: [0; DATE_LEN] }) };
}

/// Seconds since the epoch from the coarse real-time clock: a vDSO read
/// without a syscall, precise to a few ms, which is all a `Date` needs.
fn now_seconds() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME_COARSE, &mut ts) };
    ts.tv_sec
}

/// Calls `f` with the current `Date` value (refreshed when the second changes).
pub fn with_date<R>(f: impl FnOnce(&[u8; DATE_LEN]) -> R) -> R {
    let second = now_seconds();
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if c.second != second {
            let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(second.max(0) as u64);
            let s = httpdate::fmt_http_date(t);
            c.value.copy_from_slice(&s.as_bytes()[..DATE_LEN]);
            c.second = second;
        }
        f(&c.value)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn date_parses_and_is_current() {
        let v = with_date(|d| String::from_utf8(d.to_vec()).unwrap());
        let t = httpdate::parse_http_date(&v).unwrap();
        let age = std::time::SystemTime::now()
            .duration_since(t)
            .unwrap_or_default();
        assert!(age.as_secs() <= 2, "{v} is {age:?} old");
    }
}
