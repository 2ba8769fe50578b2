//! One MySQL connection over a `may` socket: the handshake and
//! authentication (mysql_native_password, caching_sha2_password), text
//! queries with a scalar result, ping, and the packet framing under them;
//! every read and write yields the coroutine, never the thread.
//!
//! Over 500 lines on purpose: one protocol state machine, read top to bottom.

use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::time::Duration;

use may::net::TcpStream;
use mysql_common::constants::{CapabilityFlags, Command, StatusFlags};
use mysql_common::io::ParseBuf;
use mysql_common::packets::{
    AuthPlugin, AuthSwitchRequest, CommonOkPacket, ErrPacket, HandshakePacket, HandshakeResponse,
    OkPacketDeserializer, OldEofPacket, ResultSetTerminator,
};
use mysql_common::proto::MySerialize;

use crate::auth::{encrypt_password, Plugin};
use crate::{Error, Opts};

/// Largest payload of one wire chunk; a payload this long continues in the next chunk.
const MAX_CHUNK: usize = 0xFF_FFFF;
/// Largest (reassembled) packet accepted, and announced as max_packet_size.
const MAX_PACKET: usize = 64 << 20;
const RBUF_INITIAL: usize = 8 << 10;
/// Buffers grown past this by a large packet are shrunk back after the command.
const BUF_KEEP: usize = 1 << 20;

/// What this client asks for; intersected with what the server offers.
const CLIENT_CAPS: CapabilityFlags = CapabilityFlags::CLIENT_LONG_PASSWORD
    .union(CapabilityFlags::CLIENT_LONG_FLAG)
    .union(CapabilityFlags::CLIENT_PROTOCOL_41)
    .union(CapabilityFlags::CLIENT_TRANSACTIONS)
    .union(CapabilityFlags::CLIENT_SECURE_CONNECTION)
    .union(CapabilityFlags::CLIENT_MULTI_RESULTS)
    .union(CapabilityFlags::CLIENT_PLUGIN_AUTH)
    .union(CapabilityFlags::CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA)
    .union(CapabilityFlags::CLIENT_DEPRECATE_EOF);

/// One connection to the server.
///
/// All socket I/O goes through `may::net::TcpStream`: inside a may coroutine
/// a read or write that would block parks the coroutine, not the worker
/// thread (outside a coroutine it parks the calling thread). Each read and
/// write is bounded by [`Opts::io_timeout`].
///
/// A command that fails with anything but [`Error::Server`] — or that is
/// interrupted (coroutine cancelled, panic) — leaves the connection
/// [broken](Conn::is_broken): further commands are refused.
pub struct Conn {
    /// Boxed so that it never moves while the connection lives, however
    /// the `Conn` is moved (into the pool and out of it on every query).
    /// may 0.3.51 reads the socket's state through a reference to it after
    /// it has published the parked coroutine to its event loop
    /// (`SocketRead::subscribe`): when another worker thread resumes that
    /// coroutine in between and it moves the `Conn` (back into the pool),
    /// the reference points at stale stack and the read faults. It killed
    /// the coroutine server with SIGSEGV under `/work` (two core dumps,
    /// docs/ARCHITECTURE.md §3); with the socket at a fixed address the
    /// reference stays valid for as long as the connection is open.
    stream: Box<TcpStream>,
    /// What was read and the packets framed in it.
    packets: Packets,
    /// Write buffer, reused for every command: 4-byte header + payload.
    wbuf: Vec<u8>,
    caps: CapabilityFlags,
    /// Set when a command starts, cleared when it completes cleanly.
    broken: bool,
    /// The timeout in force, for error messages.
    timeout: Duration,
    connection_id: u32,
    server_version: String,
}

impl Conn {
    /// Connects and authenticates (`mysql_native_password` or
    /// `caching_sha2_password`, following an auth switch request if the
    /// user's plugin differs).
    ///
    /// The TCP connect and each handshake step are bounded by
    /// `opts.connect_timeout`. A host name that is not an IP literal is
    /// resolved with the system resolver, which blocks the calling thread.
    pub fn connect(opts: &Opts) -> Result<Conn, Error> {
        Conn::connect_impl(opts, None)
    }

    /// As [`Conn::connect`], but first offers the named auth plugin instead
    /// of the server's default: tests use it to make the server send an
    /// auth switch request.
    #[doc(hidden)]
    pub fn connect_offering_plugin(opts: &Opts, plugin: &str) -> Result<Conn, Error> {
        Conn::connect_impl(opts, Some(plugin))
    }

    fn connect_impl(opts: &Opts, offer: Option<&str>) -> Result<Conn, Error> {
        let stream = Box::new(tcp_connect(opts)?);
        let mut conn = Conn {
            stream,
            packets: Packets::new(),
            wbuf: Vec::with_capacity(256),
            caps: CapabilityFlags::empty(),
            broken: true,
            timeout: opts.connect_timeout,
            connection_id: 0,
            server_version: String::new(),
        };
        conn.handshake(opts, offer)?;
        conn.set_timeouts(opts.io_timeout)?;
        conn.broken = false;
        Ok(conn)
    }

    /// Runs `sql` (COM_QUERY) and returns the first column of the first row
    /// as an integer: `None` when it is NULL or there are no rows (or the
    /// statement returns no result set). All rows and result sets are read,
    /// so the connection is ready for the next command.
    pub fn query_scalar_i64(&mut self, sql: &str) -> Result<Option<i64>, Error> {
        self.start_command(Command::COM_QUERY, sql.as_bytes())?;
        let outcome = scalar_result(&mut self.packets, &mut self.stream, self.timeout, self.caps)?;
        self.finish_command();
        outcome
    }

    /// COM_PING: a round trip that checks the connection.
    pub fn ping(&mut self) -> Result<(), Error> {
        self.start_command(Command::COM_PING, &[])?;
        let caps = self.caps;
        let pkt = self.read_packet()?;
        let outcome = match pkt.first() {
            Some(0x00) => Ok(()),
            Some(0xFF) => Err(server_error(pkt, caps)),
            _ => return Err(Error::Protocol("unexpected answer to COM_PING".into())),
        };
        self.finish_command();
        outcome
    }

    /// True once a command failed in a way that leaves the protocol state
    /// unknown (I/O error, timeout, protocol error, interruption).
    pub fn is_broken(&self) -> bool {
        self.broken
    }

    /// Marks the connection unusable: a pool closes it instead of reusing
    /// it, and it is closed without COM_QUIT.
    pub fn mark_broken(&mut self) {
        self.broken = true;
    }

    /// The server's thread id for this connection.
    pub fn connection_id(&self) -> u32 {
        self.connection_id
    }

    /// The server version string (MariaDB's `5.5.5-` prefix removed).
    pub fn server_version(&self) -> &str {
        &self.server_version
    }

    /// A cheap check, without a round trip, that an idle connection is still
    /// open: no pending error, no unread bytes, and a non-blocking peek finds
    /// neither EOF nor unsolicited data (such as the error packet a server
    /// sends before closing an idle connection).
    pub(crate) fn looks_alive(&self) -> bool {
        if self.broken || !self.packets.is_empty() {
            return false;
        }
        // may keeps the socket in non-blocking mode: this never waits.
        match self.stream.inner().peek(&mut [0u8; 1]) {
            Err(e) => e.kind() == io::ErrorKind::WouldBlock,
            Ok(_) => false,
        }
    }

    fn set_timeouts(&mut self, timeout: Duration) -> Result<(), Error> {
        self.stream
            .set_read_timeout(Some(timeout))
            .and_then(|()| self.stream.set_write_timeout(Some(timeout)))
            .map_err(|source| Error::Io {
                context: "setting socket timeouts".into(),
                source,
            })?;
        self.timeout = timeout;
        Ok(())
    }

    fn handshake(&mut self, opts: &Opts, offer: Option<&str>) -> Result<(), Error> {
        let pkt = self.read_packet()?;
        if pkt.first() == Some(&0xFF) {
            // e.g. "Too many connections", "Host is blocked".
            return Err(server_error(pkt, CapabilityFlags::CLIENT_PROTOCOL_41));
        }
        let hs: HandshakePacket<'_> = ParseBuf(pkt)
            .parse(())
            .map_err(|e| Error::Protocol(format!("bad initial handshake packet: {e}")))?;
        if hs.protocol_version() != 10 {
            return Err(Error::Protocol(format!(
                "unsupported protocol version {}",
                hs.protocol_version()
            )));
        }
        let required =
            CapabilityFlags::CLIENT_PROTOCOL_41 | CapabilityFlags::CLIENT_SECURE_CONNECTION;
        if !hs.capabilities().contains(required) {
            return Err(Error::Protocol(
                "the server does not speak protocol 4.1 with secure connection".into(),
            ));
        }
        let mut caps = CLIENT_CAPS & hs.capabilities();
        if opts.db.is_some() {
            caps |= CapabilityFlags::CLIENT_CONNECT_WITH_DB;
        }
        // Not `server_version_parsed()`: its regex, compiled on first use,
        // needs more stack than a small coroutine has.
        let version = parse_version(hs.server_version_ref()).unwrap_or((5, 5, 5));
        let server_version = hs.server_version_str();
        let server_version = server_version
            .strip_prefix("5.5.5-")
            .unwrap_or(&server_version)
            .to_owned();
        let connection_id = hs.connection_id();
        let mut nonce = hs.nonce();
        let server_plugin = hs
            .auth_plugin()
            .and_then(|p| Plugin::from_auth_plugin(&p).ok());
        self.server_version = server_version;
        self.connection_id = connection_id;

        // Unknown default plugin: answer as mysql_native_password; the server
        // sends an auth switch request if the user needs another plugin.
        let mut plugin = server_plugin.unwrap_or(Plugin::Native);
        let offered_name = match offer {
            Some(name) => {
                if let Ok(p) = Plugin::from_auth_plugin(&AuthPlugin::from_bytes(name.as_bytes())) {
                    plugin = p;
                }
                name.as_bytes()
            }
            None => plugin.name(),
        };
        let data = plugin.scramble(&opts.password, &nonce);
        let response = HandshakeResponse::new(
            Some(&data[..]),
            version,
            Some(opts.user.as_bytes()),
            opts.db.as_deref().map(str::as_bytes),
            Some(AuthPlugin::from_bytes(offered_name)),
            caps,
            None,
            MAX_PACKET as u32,
        );
        self.begin_packet();
        response.serialize(&mut self.wbuf);
        self.send()?;
        self.caps = caps;

        let mut switched = false;
        loop {
            let pkt = self.read_packet()?;
            match pkt.first() {
                Some(0x00) => return Ok(()),
                Some(0xFF) => return Err(server_error(pkt, caps)),
                Some(0xFE) if !switched => {
                    switched = true;
                    if pkt.len() == 1 {
                        return Err(Error::Auth(
                            "the server asks for mysql_old_password, which is not supported".into(),
                        ));
                    }
                    let req: AuthSwitchRequest<'_> = ParseBuf(pkt)
                        .parse(())
                        .map_err(|e| Error::Protocol(format!("bad auth switch request: {e}")))?;
                    plugin = Plugin::from_auth_plugin(&req.auth_plugin())?;
                    nonce = req.plugin_data().to_vec();
                    let data = plugin.scramble(&opts.password, &nonce);
                    self.write_packet(&data)?;
                }
                Some(0x01) if plugin == Plugin::CachingSha2 => match pkt.get(1) {
                    // Fast authentication succeeded; an OK packet follows.
                    Some(0x03) => {}
                    // Full authentication: the password must travel encrypted.
                    // Without TLS, ask for the server's RSA public key.
                    Some(0x04) => {
                        self.write_packet(&[0x02])?;
                        let pkt = self.read_packet()?;
                        let pem =
                            match pkt.split_first() {
                                Some((0x01, pem)) => pem.to_vec(),
                                Some((0xFF, _)) => return Err(server_error(pkt, caps)),
                                _ => return Err(Error::Auth(
                                    "caching_sha2_password full authentication: the server did \
                                     not send its RSA public key (full authentication needs TLS, \
                                     an RSA key, or a password already cached by the server)"
                                        .into(),
                                )),
                            };
                        let encrypted = encrypt_password(&opts.password, &nonce, &pem)?;
                        self.write_packet(&encrypted)?;
                    }
                    _ => {
                        return Err(Error::Protocol(
                            "unexpected caching_sha2_password auth data".into(),
                        ))
                    }
                },
                first => {
                    return Err(Error::Protocol(format!(
                        "unexpected packet during authentication (first byte {first:02x?})"
                    )))
                }
            }
        }
    }

    fn start_command(&mut self, cmd: Command, arg: &[u8]) -> Result<(), Error> {
        if self.broken {
            return Err(Error::Protocol(
                "connection unusable after an earlier error".into(),
            ));
        }
        if !self.packets.is_empty() {
            self.broken = true;
            return Err(Error::Protocol(
                "unexpected data from the server between commands".into(),
            ));
        }
        self.broken = true;
        self.packets.seq = 0;
        self.begin_packet();
        self.wbuf.push(cmd as u8);
        self.wbuf.extend_from_slice(arg);
        self.send()
    }

    fn finish_command(&mut self) {
        self.broken = false;
        self.packets.shrink();
        if self.wbuf.capacity() > BUF_KEEP {
            self.wbuf = Vec::with_capacity(256);
        }
    }

    fn write_packet(&mut self, payload: &[u8]) -> Result<(), Error> {
        self.begin_packet();
        self.wbuf.extend_from_slice(payload);
        self.send()
    }

    /// Starts a packet in `wbuf`: room for the header, payload appended after.
    fn begin_packet(&mut self) {
        self.wbuf.clear();
        self.wbuf.extend_from_slice(&[0; 4]);
    }

    /// Frames the payload in `wbuf` (splitting it into 16 MiB chunks if
    /// needed) and writes it.
    fn send(&mut self) -> Result<(), Error> {
        let len = self.wbuf.len() - 4;
        if len < MAX_CHUNK {
            self.wbuf[..4].copy_from_slice(&header(len, self.packets.seq));
            self.packets.seq = self.packets.seq.wrapping_add(1);
        } else {
            let payload = &self.wbuf[4..];
            let mut framed = Vec::with_capacity(len + 4 * (len / MAX_CHUNK + 2));
            let mut chunks = payload.chunks(MAX_CHUNK).peekable();
            while let Some(chunk) = chunks.next() {
                framed.extend_from_slice(&header(chunk.len(), self.packets.seq));
                framed.extend_from_slice(chunk);
                self.packets.seq = self.packets.seq.wrapping_add(1);
                if chunks.peek().is_none() && chunk.len() == MAX_CHUNK {
                    framed.extend_from_slice(&header(0, self.packets.seq));
                    self.packets.seq = self.packets.seq.wrapping_add(1);
                }
            }
            self.wbuf = framed;
        }
        let timeout = self.timeout;
        self.stream
            .write_all(&self.wbuf)
            .map_err(|e| Error::io("writing to the server", timeout, e))
    }

    /// Reads one packet and checks its sequence id.
    fn read_packet(&mut self) -> Result<&[u8], Error> {
        self.packets.read(&mut self.stream, self.timeout)
    }
}

/// The read side of a connection: what was received, and the packets
/// framed in it (a 3-byte length and a sequence id before each payload).
#[derive(Debug)]
pub(crate) struct Packets {
    /// Read buffer: `rbuf[rpos..rend]` is received but not yet consumed.
    rbuf: Vec<u8>,
    rpos: usize,
    rend: usize,
    /// Reassembly buffer for packets split over several chunks (>= 16 MiB).
    big: Vec<u8>,
    /// The sequence id of the next packet, read or written.
    pub(crate) seq: u8,
}

impl Packets {
    pub(crate) fn new() -> Packets {
        Packets {
            rbuf: vec![0; RBUF_INITIAL],
            rpos: 0,
            rend: 0,
            big: Vec::new(),
            seq: 0,
        }
    }

    /// No byte received and not consumed by a packet.
    pub(crate) fn is_empty(&self) -> bool {
        self.rpos == self.rend
    }

    /// Bytes received and not consumed by a packet.
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn unread(&self) -> usize {
        self.rend - self.rpos
    }

    /// After a command: buffers grown by a large packet go back to their size.
    fn shrink(&mut self) {
        if self.rbuf.len() > BUF_KEEP && self.rpos == self.rend {
            self.rbuf = vec![0; RBUF_INITIAL];
            self.rpos = 0;
            self.rend = 0;
        }
        if self.big.capacity() > BUF_KEEP {
            self.big = Vec::new();
        }
    }

    /// Reads one packet from `src` and checks its sequence id. The returned
    /// payload borrows the read buffer (no copy) unless it spanned several
    /// chunks. `timeout` is the one in force, for error messages.
    pub(crate) fn read(&mut self, src: &mut impl Read, timeout: Duration) -> Result<&[u8], Error> {
        let mut chunked = false;
        loop {
            let avail = self.rend - self.rpos;
            if avail < 4 {
                self.fill(src, timeout, 4)?;
                continue;
            }
            let h = &self.rbuf[self.rpos..self.rpos + 4];
            let len = usize::from(h[0]) | usize::from(h[1]) << 8 | usize::from(h[2]) << 16;
            let seq = h[3];
            if avail < 4 + len {
                self.fill(src, timeout, 4 + len)?;
                continue;
            }
            if seq != self.seq {
                return Err(Error::Protocol(format!(
                    "packet out of order: expected sequence id {}, got {seq}",
                    self.seq
                )));
            }
            self.seq = self.seq.wrapping_add(1);
            let start = self.rpos + 4;
            self.rpos = start + len;
            if !chunked && len < MAX_CHUNK {
                return Ok(&self.rbuf[start..start + len]);
            }
            if !chunked {
                chunked = true;
                self.big.clear();
            }
            if self.big.len() + len > MAX_PACKET {
                return Err(Error::Protocol(format!(
                    "packet larger than {MAX_PACKET} bytes"
                )));
            }
            self.big.extend_from_slice(&self.rbuf[start..start + len]);
            if len < MAX_CHUNK {
                return Ok(&self.big);
            }
        }
    }

    /// Reads until `rbuf[rpos..rend]` holds at least `need` bytes.
    fn fill(&mut self, src: &mut impl Read, timeout: Duration, need: usize) -> Result<(), Error> {
        if self.rpos == self.rend {
            self.rpos = 0;
            self.rend = 0;
        }
        if self.rpos + need > self.rbuf.len() {
            self.rbuf.copy_within(self.rpos..self.rend, 0);
            self.rend -= self.rpos;
            self.rpos = 0;
            if need > self.rbuf.len() {
                let size = need.max(self.rbuf.len() * 2);
                self.rbuf.resize(size, 0);
            }
        }
        while self.rend - self.rpos < need {
            let n = match src.read(&mut self.rbuf[self.rend..]) {
                Ok(0) => {
                    return Err(Error::Io {
                        context: "reading from the server".into(),
                        source: io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "the server closed the connection",
                        ),
                    })
                }
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Error::io("reading from the server", timeout, e)),
            };
            self.rend += n;
        }
        Ok(())
    }
}

impl Drop for Conn {
    /// A healthy connection says COM_QUIT (one non-blocking write, best
    /// effort), so that the server does not count it as aborted.
    fn drop(&mut self) {
        if !self.broken {
            let quit = [1, 0, 0, 0, Command::COM_QUIT as u8];
            let mut sock: &std::net::TcpStream = self.stream.inner();
            let _ = sock.write(&quit);
        }
    }
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn")
            .field("peer", &self.stream.peer_addr().ok())
            .field("connection_id", &self.connection_id)
            .field("server_version", &self.server_version)
            .field("broken", &self.broken)
            .finish_non_exhaustive()
    }
}

/// Reads the answer to a COM_QUERY from `src`: the first column of the
/// first row as an integer (see [`Conn::query_scalar_i64`]). The outer
/// `Err`: the protocol state is lost (the connection stays broken); the
/// inner one: the query failed, every packet of the answer was read (a
/// server's error, a first column that is not an integer).
pub(crate) fn scalar_result(
    packets: &mut Packets,
    src: &mut impl Read,
    timeout: Duration,
    caps: CapabilityFlags,
) -> Result<Result<Option<i64>, Error>, Error> {
    let deprecate_eof = caps.contains(CapabilityFlags::CLIENT_DEPRECATE_EOF);
    let mut outcome: Result<Option<i64>, Error> = Ok(None);
    let mut got_row = false;
    'results: loop {
        let pkt = packets.read(src, timeout)?;
        let columns = match pkt.first() {
            Some(0x00) => {
                let ok: OkPacketDeserializer<'_, CommonOkPacket> = parse(pkt, caps, "OK packet")?;
                if more_results(ok.into_inner().status_flags()) {
                    continue;
                }
                break;
            }
            Some(0xFF) => {
                outcome = Err(server_error(pkt, caps));
                break;
            }
            Some(0xFB) => {
                return Err(Error::Protocol(
                    "the server asked for a LOCAL INFILE upload, which is not supported".into(),
                ))
            }
            _ => ParseBuf(pkt)
                .checked_eat_lenenc_int()
                .filter(|&n| n > 0)
                .ok_or_else(|| Error::Protocol("bad column count packet".into()))?,
        };
        for _ in 0..columns {
            let pkt = packets.read(src, timeout)?;
            if pkt.first() == Some(&0xFF) {
                return Err(Error::Protocol(
                    "error packet among column definitions".into(),
                ));
            }
        }
        if !deprecate_eof {
            let pkt = packets.read(src, timeout)?;
            if !is_eof(pkt, false) {
                return Err(Error::Protocol(
                    "missing EOF after column definitions".into(),
                ));
            }
        }
        loop {
            let pkt = packets.read(src, timeout)?;
            if is_eof(pkt, deprecate_eof) {
                let flags = if deprecate_eof {
                    let ok: OkPacketDeserializer<'_, ResultSetTerminator> =
                        parse(pkt, caps, "result set terminator")?;
                    ok.into_inner().status_flags()
                } else {
                    let ok: OkPacketDeserializer<'_, OldEofPacket> =
                        parse(pkt, caps, "EOF packet")?;
                    ok.into_inner().status_flags()
                };
                if more_results(flags) {
                    continue 'results;
                }
                break 'results;
            }
            if pkt.first() == Some(&0xFF) {
                // The statement failed while sending rows (e.g. killed).
                outcome = Err(server_error(pkt, caps));
                break 'results;
            }
            if !got_row {
                got_row = true;
                outcome = first_column_i64(pkt);
            }
        }
    }
    Ok(outcome)
}

fn tcp_connect(opts: &Opts) -> Result<TcpStream, Error> {
    let addrs: Vec<SocketAddr> = match opts.host.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, opts.port)],
        Err(_) => (opts.host.as_str(), opts.port)
            .to_socket_addrs()
            .map_err(|source| Error::Io {
                context: format!("resolving {}", opts.host),
                source,
            })?
            .collect(),
    };
    let mut last = None;
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, opts.connect_timeout) {
            Ok(stream) => {
                let configured = stream
                    .set_nodelay(true)
                    .and_then(|()| stream.set_read_timeout(Some(opts.connect_timeout)))
                    .and_then(|()| stream.set_write_timeout(Some(opts.connect_timeout)));
                return match configured {
                    Ok(()) => Ok(stream),
                    Err(source) => Err(Error::Io {
                        context: format!("configuring the socket to {addr}"),
                        source,
                    }),
                };
            }
            Err(e) => {
                last = Some(match Error::io("connecting", opts.connect_timeout, e) {
                    Error::Io { source, .. } => Error::Io {
                        context: format!("connecting to {addr}"),
                        source,
                    },
                    timeout => timeout,
                })
            }
        }
    }
    Err(last.unwrap_or_else(|| Error::Io {
        context: format!("resolving {}", opts.host),
        source: io::Error::new(io::ErrorKind::NotFound, "no addresses"),
    }))
}

/// `"10.11.6-MariaDB..."` -> `(10, 11, 6)`.
fn parse_version(version: &[u8]) -> Option<(u16, u16, u16)> {
    let mut parts = version.splitn(3, |&b| b == b'.').map(|part| {
        let digits = part.iter().take_while(|b| b.is_ascii_digit()).count();
        std::str::from_utf8(&part[..digits])
            .ok()?
            .parse::<u16>()
            .ok()
    });
    Some((parts.next()??, parts.next()??, parts.next()??))
}

fn header(len: usize, seq: u8) -> [u8; 4] {
    [len as u8, (len >> 8) as u8, (len >> 16) as u8, seq]
}

/// A result set ends with EOF (0xFE, < 9 bytes) or, with DEPRECATE_EOF, an
/// OK packet whose header is 0xFE (any length below one full chunk: a row
/// starting with 0xFE would be a value of at least 16 MiB).
fn is_eof(pkt: &[u8], deprecate_eof: bool) -> bool {
    pkt.first() == Some(&0xFE) && pkt.len() < if deprecate_eof { MAX_CHUNK } else { 9 }
}

fn more_results(flags: StatusFlags) -> bool {
    flags.contains(StatusFlags::SERVER_MORE_RESULTS_EXISTS)
}

fn parse<'a, T>(pkt: &'a [u8], caps: CapabilityFlags, what: &str) -> Result<T, Error>
where
    T: mysql_common::proto::MyDeserialize<'a, Ctx = CapabilityFlags>,
{
    ParseBuf(pkt)
        .parse(caps)
        .map_err(|e| Error::Protocol(format!("bad {what}: {e}")))
}

fn server_error(pkt: &[u8], caps: CapabilityFlags) -> Error {
    match ParseBuf(pkt).parse::<ErrPacket<'_>>(caps) {
        Ok(ErrPacket::Error(e)) => Error::Server {
            code: e.error_code(),
            state: e
                .sql_state_ref()
                .map_or_else(|| "HY000".to_owned(), |s| s.as_str().into_owned()),
            message: e.message_str().into_owned(),
        },
        Ok(ErrPacket::Progress(_)) => Error::Protocol("unexpected progress report".into()),
        Err(e) => Error::Protocol(format!("bad error packet: {e}")),
    }
}

/// The first value of a text-protocol row, as an integer.
fn first_column_i64(row: &[u8]) -> Result<Option<i64>, Error> {
    if row.first() == Some(&0xFB) {
        return Ok(None);
    }
    let value = ParseBuf(row)
        .checked_eat_lenenc_str()
        .ok_or_else(|| Error::Protocol("truncated row".into()))?;
    std::str::from_utf8(value)
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .map(Some)
        .ok_or_else(|| {
            Error::Protocol(format!(
                "the first column is not an integer: {:?}",
                String::from_utf8_lossy(&value[..value.len().min(64)])
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where the connection's socket is (the memory may reads through a
    /// reference while a read parks).
    fn socket_address(conn: &Conn) -> *const TcpStream {
        let socket: &TcpStream = &conn.stream;
        socket
    }

    /// The pool moves a `Conn` out and back in on every query; the socket
    /// must not move with it (see [`Conn`]'s `stream`).
    #[test]
    fn the_socket_stays_put_when_the_connection_moves() {
        let url = testkit::db::shared();
        let conn = Conn::connect(&Opts::from_url(url).unwrap()).unwrap();
        let at = socket_address(&conn);
        // Moved into a Vec (as into the pool's idle list) and out again.
        let mut idle = vec![conn];
        let conn = idle.pop().unwrap();
        assert_eq!(socket_address(&conn), at);
        let moved = Box::new(conn);
        assert_eq!(socket_address(&moved), at);
    }

    #[test]
    fn first_column_values() {
        assert_eq!(first_column_i64(b"\x011").unwrap(), Some(1));
        assert_eq!(first_column_i64(b"\x02-7\x01x").unwrap(), Some(-7));
        assert_eq!(first_column_i64(b"\xfb\x011").unwrap(), None);
        assert!(matches!(
            first_column_i64(b"\x031.5"),
            Err(Error::Protocol(_))
        ));
        assert!(matches!(
            first_column_i64(b"\x05ab"),
            Err(Error::Protocol(_))
        ));
    }

    #[test]
    fn eof_detection() {
        assert!(is_eof(&[0xFE, 0, 0, 2, 0], false));
        assert!(is_eof(&[0xFE, 0, 0, 2, 0, 0, 0], true));
        assert!(!is_eof(&[0xFE, 0, 0, 0, 0, 0, 0, 0, 0, 0], false));
        assert!(!is_eof(&[0x01, 0x31], true));
    }

    #[test]
    fn versions() {
        assert_eq!(
            parse_version(b"5.5.5-10.11.19-MariaDB-0+deb12u1"),
            Some((5, 5, 5))
        );
        assert_eq!(parse_version(b"8.0.36"), Some((8, 0, 36)));
        assert_eq!(parse_version(b"8.4"), None);
    }

    #[test]
    fn header_layout() {
        assert_eq!(header(0x01_0203, 7), [0x03, 0x02, 0x01, 7]);
    }

    /// Hands out its bytes `n` at a time.
    struct Trickle<'a>(&'a [u8], usize);

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.1.min(buf.len()).min(self.0.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    #[test]
    fn packets_are_framed_whatever_the_reads() {
        let stream = b"\x01\x00\x00\x00a\x00\x00\x00\x01\x02\x00\x00\x02bc\x01\x00\x00\x07d";
        for n in [1, 2, 3, 5, 64] {
            let mut src = Trickle(stream, n);
            let mut p = Packets::new();
            assert_eq!(p.read(&mut src, Duration::ZERO).unwrap(), b"a");
            assert_eq!(
                p.read(&mut src, Duration::ZERO).unwrap(),
                b"",
                "an empty packet"
            );
            assert_eq!(p.read(&mut src, Duration::ZERO).unwrap(), b"bc");
            let e = p.read(&mut src, Duration::ZERO).unwrap_err().to_string();
            assert!(e.contains("expected sequence id 3, got 7"), "{e}");
            assert!(p.unread() <= 5, "never more than was sent");
            // Part of a header, then the end of input: the server closed.
            let mut p = Packets::new();
            let e = p.read(&mut Trickle(&stream[..3], n), Duration::ZERO);
            assert!(e.unwrap_err().to_string().contains("closed"));
        }
    }

    #[test]
    fn the_answer_to_a_query_is_read_whatever_the_reads() {
        let caps = CapabilityFlags::CLIENT_PROTOCOL_41 | CapabilityFlags::CLIENT_DEPRECATE_EOF;
        // Column count, one column definition, the row "1", the terminator.
        let answer = b"\x01\x00\x00\x01\x01\x03\x00\x00\x02def\x02\x00\x00\x03\x011\x07\x00\x00\x04\xfe\x00\x00\x02\x00\x00\x00";
        for n in [1, 3, 64] {
            let mut p = Packets::new();
            p.seq = 1;
            let got = scalar_result(&mut p, &mut Trickle(answer, n), Duration::ZERO, caps);
            assert_eq!(got.unwrap().unwrap(), Some(1));
            assert!(p.is_empty());
        }
    }
}
