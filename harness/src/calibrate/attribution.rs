//! What a profile says a row's server CPU went to: TLS and crypto code,
//! handshakes, and the processes put in front of the server. Read from the
//! server's folded stacks (`comm-PID;frame;…;leaf ns`, [`crate::lab::profile`]),
//! whose counts are ns of CPU.
//!
//! - **TLS and crypto**: a stack whose leaf frame is in rustls, ring,
//!   aws-lc (by symbol: the Rust servers link them statically) or in
//!   OpenSSL's libssl and libcrypto (nginx, node and php-fpm's nginx load
//!   them; Debian strips their static symbols, so inferno names such a
//!   frame by its binary, `[libcrypto.so.3]`, and an exported one by its
//!   prefix). By leaf: the time is the crypto code's own, not its callers'.
//! - **Handshakes**: a stack with a handshake frame anywhere (a state
//!   machine's, or the key exchange and signature a handshake alone does).
//!   Debian's C programs are built without frame pointers, so their stacks
//!   are often cut short: a lower bound there.
//! - **Front**: the samples of the pids given (tls-proxy's nginx).

/// One profile's shares, ns of CPU.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Shares {
    pub total_ns: u64,
    pub tls_ns: u64,
    pub handshake_ns: u64,
    pub front_ns: u64,
}

impl Shares {
    /// `x` as % of the total.
    pub fn pct(&self, x: u64) -> f64 {
        if self.total_ns == 0 {
            0.0
        } else {
            100.0 * x as f64 / self.total_ns as f64
        }
    }
}

/// Leaf frames in TLS or crypto code, by symbol or binary (lower case).
const TLS_LEAF: &[&str] = &[
    "rustls::",
    "tokio_rustls::",
    "ring::",
    "ring_core_",
    "aws_lc",
    "libcrypto.so",
    "libssl.so",
    "evp_",
    "ossl_",
    "ssl_",
    "ssl3_",
    "tls1_",
    "tls13_",
    "tls_",
    "aesni_",
    "aes_gcm",
    "gcm_",
    "chacha20",
    "poly1305",
    "sha256_block",
    "sha512_block",
    "ecp_nistz256",
    "x25519",
    "bn_",
];

/// Frames only a handshake runs (lower case).
const HANDSHAKE: &[&str] = &[
    "handshake",
    "statem",
    "client_hello",
    "clienthello",
    "server_hello",
    "expectclienthello",
    "expectfinished",
    "x25519",
    "ecdsa",
    "ecp_nistz256",
    "p256_",
    "hkdf",
    "keyschedule",
    "key_schedule",
    "tls13_generate",
    "tls13_change_cipher_state",
];

fn matches(frame: &str, patterns: &[&str]) -> bool {
    let f = frame.to_ascii_lowercase();
    patterns.iter().any(|p| f.contains(p))
}

/// The pid, frames and count of a folded line; None if it does not parse.
fn parse(line: &str) -> Option<(u32, Vec<&str>, u64)> {
    let (stack, count) = line.rsplit_once(' ')?;
    let count = count.trim().parse().ok()?;
    let mut frames = stack.split(';');
    let first = frames.next()?;
    let pid = first.rsplit_once('-')?.1.parse().ok()?;
    Some((pid, frames.collect(), count))
}

/// The shares of the folded `lines`; `front`: the pids in front of the server.
pub fn shares<'a>(lines: impl IntoIterator<Item = &'a str>, front: &[u32]) -> Shares {
    let mut s = Shares::default();
    for (pid, frames, ns) in lines.into_iter().filter_map(parse) {
        s.total_ns += ns;
        if front.contains(&pid) {
            s.front_ns += ns;
        }
        if frames.last().is_some_and(|leaf| matches(leaf, TLS_LEAF)) {
            s.tls_ns += ns;
        }
        if frames.iter().any(|f| matches(f, HANDSHAKE)) {
            s.handshake_ns += ns;
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_handshakes_and_the_front_are_told_apart() {
        let lines = [
            // The Rust server: record encryption by ring, a handshake's
            // key exchange, the HTTP code.
            "event-loop-10;main;rustls::conn::ConnectionCommon::write;ring_core_0_17_8_aes_gcm_enc 300",
            "event-loop-10;main;rustls::server::hs::ExpectClientHello::handle;x25519_scalar_mult 200",
            "event-loop-10;main;hyper::proto::h1::role::parse 400",
            // nginx in front: libcrypto by binary, under a handshake.
            "nginx-20;ngx_ssl_handshake;SSL_do_handshake;[libcrypto.so.3] 50",
            "nginx-20;ngx_http_process_request;[unknown] 50",
            "not a folded line",
        ];
        let s = shares(lines, &[20]);
        assert_eq!(s.total_ns, 1000);
        assert_eq!(s.tls_ns, 550);
        assert_eq!(s.handshake_ns, 250);
        assert_eq!(s.front_ns, 100);
        assert_eq!(s.pct(s.tls_ns), 55.0);
        assert_eq!(Shares::default().pct(0), 0.0);
    }

    #[test]
    fn a_comm_with_dashes_keeps_its_pid() {
        let (pid, frames, n) = parse("tokio-rt-worker-77;a;b 5").unwrap();
        assert_eq!((pid, frames, n), (77, vec!["a", "b"], 5));
    }
}
