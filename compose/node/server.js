'use strict';
// Node.js implementation of the benchmark contract (docs/ARCHITECTURE.md §2):
// one process, one event loop (the seed's setup), node:http, a mysql2 pool of
// DB_POOL (20) connections.
//
//   HOST (127.0.0.1) PORT (3000; 0 = any free port)
//   DB_HOST (127.0.0.1) DB_PORT (3306) DB_USER DB_PASSWORD DB_NAME (bench)
//   DB_POOL (20)
//   TLS_CERT, TLS_KEY (PEM files): serve HTTPS on the same HOST:PORT instead
//   of HTTP, HTTP/2 or HTTP/1.1 by ALPN (node:http2's secure server with
//   allowHTTP1, Node's OpenSSL); `harness compare --tls` gives the lab's
//   certificate
//   H2C_PORT (unset: none; 0 = any free port): also serve HTTP/2 by prior
//     knowledge (h2c) on this port, same routes. A port of its own because
//     node:http2's cleartext server has no HTTP/1.1 fallback (allowHTTP1 is
//     for its TLS server, which reads ALPN); it prints "h2c on HOST:PORT".
//
// Prints "listening on HOST:PORT" on stdout once it accepts connections.
// SIGTERM/SIGINT: stop accepting, finish in-flight requests, exit 0.
//
// Every response carries Content-Length (without it Node answers HTTP/1.0
// clients with a close, and `ab -k` never reuses a connection), Date (Node's
// own, refreshed every second) and Server.

const cluster = require('node:cluster');
const fs = require('node:fs');
const http = require('node:http');
const http2 = require('node:http2');
const inspector = require('node:inspector');
const workerThreads = require('node:worker_threads');
const mysql = require('mysql2');
const { WebSocketServer } = require('ws');

const HOST = process.env.HOST || '127.0.0.1';
const PORT = envInt('PORT', 3000);
const POOL_SIZE = envInt('DB_POOL', 20);
const H2C_PORT = process.env.H2C_PORT === undefined ? null : envInt('H2C_PORT', 0);
const CPU_N_DEFAULT = 1000;
const CPU_N_MAX = 10000000;
const SLEEP_MS_MAX = 10000;
const SERVER = 'node';
const TLS_CERT = process.env.TLS_CERT || '';
const TLS_KEY = process.env.TLS_KEY || '';
const TLS = TLS_CERT !== '' && TLS_KEY !== '';

const DB = {
  host: process.env.DB_HOST || '127.0.0.1',
  port: envInt('DB_PORT', 3306),
  user: process.env.DB_USER || 'bench',
  password: process.env.DB_PASSWORD || 'bench',
  database: process.env.DB_NAME || 'bench',
  // a dead database fails fast (503) instead of queueing requests
  connectTimeout: 2000,
};

const pool = mysql.createPool({
  ...DB,
  connectionLimit: POOL_SIZE,
  maxIdle: POOL_SIZE,
  waitForConnections: true,
  queueLimit: 0,
  enableKeepAlive: true,
});

function envInt(name, dflt) {
  const v = process.env[name];
  if (v === undefined || v === '') return dflt;
  if (!/^[0-9]+$/.test(v)) {
    console.error(`bad ${name}: ${v}`);
    process.exit(2);
  }
  return Number(v);
}

class BadRequest extends Error {}

// ---------------------------------------------------------------------------
// The contract: same routes, parsing rules and bodies as compose/php/contract.php.

function sqrtSum(n) {
  let s = 0.0;
  for (let i = 1; i <= n; i++) s += Math.sqrt(i);
  return s;
}

// Calls `fn` once at least `ms` of wall-clock time has passed, as the
// contract's /sleep promises. A timer counts from libuv's loop time, cached
// when the loop's iteration began, so on a busy loop it fired up to that
// iteration's age early (a compose check read 49.6 ms for /sleep?ms=50;
// with the machine busy, 4 of 200 /sleep?ms=20 came back in under 20 ms,
// and 0 of 400 since); it is re-armed for what is left.
function afterAtLeast(ms, fn) {
  const end = process.hrtime.bigint() + BigInt(ms) * 1000000n;
  const check = () => {
    const left = end - process.hrtime.bigint();
    if (left <= 0n) fn();
    else setTimeout(check, Math.ceil(Number(left) / 1e6));
  };
  setTimeout(check, ms);
}

function sleepSql(ms) {
  return `SELECT 1 FROM (SELECT SLEEP(${Math.floor(ms / 1000)}.${String(ms % 1000).padStart(3, '0')})) t`;
}

function parseQuery(query) {
  const out = new Map();
  if (!query) return out;
  for (const pair of query.split('&')) {
    if (pair === '') continue;
    const eq = pair.indexOf('=');
    const k = eq < 0 ? pair : pair.slice(0, eq);
    const v = eq < 0 ? '' : pair.slice(eq + 1);
    out.set(decode(k), decode(v));
  }
  return out;
}

function decode(s) {
  try {
    return decodeURIComponent(s.replace(/\+/g, ' '));
  } catch {
    return s; // malformed escape: kept as is, rejected as a value later
  }
}

function intParam(params, name, min, max, dflt) {
  if (!params.has(name)) return dflt;
  const v = params.get(name);
  if (!/^[0-9]{1,18}$/.test(v)) throw new BadRequest(`bad ${name}: must be an integer in ${min}..=${max}`);
  const i = Number(v);
  if (i < min || i > max) throw new BadRequest(`bad ${name}: must be an integer in ${min}..=${max}`);
  return i;
}

function connParam(params) {
  const c = params.has('conn') ? params.get('conn') : 'pool';
  if (c === 'new') return true;
  if (c === 'pool') return false;
  throw new BadRequest('bad conn: must be new or pool');
}

// Runs sql, calls back with (err, firstColumnOfFirstRow). fresh: a connection
// opened for this request and closed after it (`conn=new`).
function dbQuery(sql, fresh, cb) {
  const opts = { sql, rowsAsArray: true };
  const done = (err, rows) => {
    if (err) return cb(err);
    if (!rows || rows.length === 0) return cb(new Error('no row'));
    cb(null, Number(rows[0][0]));
  };
  if (!fresh) {
    pool.query(opts, done);
    return;
  }
  const conn = mysql.createConnection(DB);
  // without a listener a connection error would crash the process
  conn.on('error', () => {});
  conn.query(opts, (err, rows) => {
    if (err) conn.destroy();
    else conn.end(() => {});
    done(err, rows);
  });
}

// /config: what this process runs, read from it. `source` says how each
// field was obtained; `configured` lists what could only be configured.
function configJson() {
  // Processes answering requests: this one, unless it is a cluster primary
  // that forked workers (then they answer, and are counted); a cluster
  // worker cannot see its siblings.
  const forked = cluster.isPrimary ? Object.values(cluster.workers || {}).filter((w) => !w.isDead()).length : 0;
  const workers = cluster.isPrimary ? (forked > 0 ? forked : 1) : null;
  // --jitless (V8 interprets only) also removes WebAssembly from the global
  // scope: its absence is the runtime's own answer, whatever set the flag.
  const jitless = typeof WebAssembly === 'undefined';
  const nodeOptions = (process.env.NODE_OPTIONS || '').split(/\s+/).filter((f) => f !== '');
  return JSON.stringify({
    server: SERVER,
    model: 'event-loop',
    runtime: `node ${process.version}`,
    workers,
    db_pool: pool.config.connectionLimit,
    opcache: null,
    jit: jitless ? 'off' : 'v8',
    debug: inspector.url() !== undefined,
    // absent over plain HTTP, as the other servers' documents
    tls: TLS ? `node:http2 secure server, allowHTTP1 (OpenSSL ${process.versions.openssl}): TLS 1.3, 1.2; ALPN h2, http/1.1; resumption` : undefined,
    node: {
      pid: process.pid,
      cluster: cluster.isPrimary ? 'primary' : 'worker',
      cluster_workers: forked,
      main_thread: workerThreads.isMainThread,
      v8_flags: [...process.execArgv, ...nodeOptions],
      uv_threadpool_size: Number(process.env.UV_THREADPOOL_SIZE || 4),
    },
    source: {
      workers: 'read: node:cluster (a primary without live cluster workers serves alone)',
      db_pool: "read: the mysql2 pool's connectionLimit",
      jit: 'read: typeof WebAssembly (--jitless removes it)',
      debug: 'read: inspector.url() (an inspector is listening)',
      runtime: 'read: process.version',
      'node.v8_flags': 'read: process.execArgv and NODE_OPTIONS',
      'node.uv_threadpool_size': 'configured: UV_THREADPOOL_SIZE (default 4); libuv has no getter',
    },
    configured: ['node.uv_threadpool_size'],
    protocols: TLS
      ? ['http/1.1', 'h2']
      : h2cServer && h2cServer.listening
        ? ['http/1.1', `h2c on ${h2cServer.address().address}:${h2cServer.address().port}`]
        : ['http/1.1'],
    websocket: {
      connection: "a ws WebSocket on the process's one event loop (npm ws, noServer, upgraded from node:http)",
      rooms: 'per-process',
      // one process holds every member; cluster workers would each hold their own
      room_spans_workers: !cluster.isWorker,
    },
  });
}

// ---------------------------------------------------------------------------
// HTTP

function send(req, res, status, type, body, extra) {
  const headers = {
    'Content-Type': type,
    'Content-Length': Buffer.byteLength(body),
    Server: SERVER,
  };
  if (extra) Object.assign(headers, extra);
  // HTTP/2 forbids connection-specific fields (RFC 9113 §8.2.2): a 413
  // there ends the stream, not the connection.
  if (req.httpVersionMajor === 2) delete headers.Connection;
  res.writeHead(status, headers);
  // HEAD: same headers (Content-Length of the GET body), no body
  res.end(req.method === 'HEAD' ? undefined : body);
}

const ROUTES = new Set(['/', '/hello', '/cpu', '/db', '/work', '/sleep', '/config', '/echo']);

// POST /echo: the body (Content-Length or chunked, framed by node:http)
// answered back as application/octet-stream; over 1 MiB, 413 and close.
const ECHO_MAX_BYTES = 1 << 20;

function echo(req, res) {
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > ECHO_MAX_BYTES) return echoTooLarge(req, res);
  const chunks = [];
  let size = 0;
  let refused = false;
  req.on('data', (chunk) => {
    if (refused) return;
    size += chunk.length;
    if (size > ECHO_MAX_BYTES) {
      refused = true;
      echoTooLarge(req, res);
      return;
    }
    chunks.push(chunk);
  });
  req.on('end', () => {
    if (!refused) send(req, res, 200, 'application/octet-stream', Buffer.concat(chunks, size));
  });
}

function echoTooLarge(req, res) {
  send(req, res, 413, 'text/plain', 'request body over 1 MiB', { Connection: 'close' });
  // Read the rest and drop it: a close with input unread resets the
  // connection, which can destroy the answer before the client reads it.
  req.resume();
}

// A target in absolute-form (http://host/hello) routes by its path: a
// server MUST accept that form (RFC 9112 §3.2.2).
function originForm(target) {
  const m = /^https?:\/\/[^/?]*/i.exec(target);
  if (!m) return target;
  const rest = target.slice(m[0].length);
  return rest.startsWith('/') ? rest : '/';
}

function handle(req, res) {
  // What llhttp lets through and no route makes right (RFC 9112 §3.2,
  // §3.2.4; RFC 9110 §4.2.1): 400, as the Rust servers answer.
  if (req.url === '*' && req.method !== 'OPTIONS') {
    return send(req, res, 400, 'text/plain', 'the asterisk-form target is for OPTIONS only');
  }
  if (req.headers.host === '') {
    return send(req, res, 400, 'text/plain', 'Host missing, repeated or invalid');
  }
  const target = originForm(req.url);
  const q = target.indexOf('?');
  const path = q < 0 ? target : target.slice(0, q);
  if (!ROUTES.has(path)) return send(req, res, 404, 'text/plain', 'not found');
  if (path === '/echo') {
    if (req.method === 'POST') return echo(req, res);
    return send(req, res, 405, 'text/plain', 'method not allowed', { Allow: 'POST' });
  }
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    return send(req, res, 405, 'text/plain', 'method not allowed', { Allow: 'GET, HEAD' });
  }
  try {
    const params = parseQuery(q < 0 ? '' : target.slice(q + 1));
    switch (path) {
      case '/':
      case '/hello':
        return send(req, res, 200, 'text/plain', 'Hello World');
      case '/cpu': {
        const n = intParam(params, 'n', 1, CPU_N_MAX, CPU_N_DEFAULT);
        return send(req, res, 200, 'text/plain', sqrtSum(n).toFixed(6));
      }
      case '/db': {
        const sleepMs = intParam(params, 'sleep_ms', 0, SLEEP_MS_MAX, null);
        const fresh = connParam(params);
        const sql = sleepMs === null ? 'SELECT 1' : sleepSql(sleepMs);
        return dbQuery(sql, fresh, (err, v) => {
          if (err) return send(req, res, 503, 'text/plain', 'db unavailable');
          send(req, res, 200, 'text/plain', String(v));
        });
      }
      case '/work': {
        const n = intParam(params, 'n', 1, CPU_N_MAX, CPU_N_DEFAULT);
        const fresh = connParam(params);
        const sum = sqrtSum(n).toFixed(6); // on the event loop, as in the seed
        return dbQuery('SELECT 1', fresh, (err, v) => {
          if (err) return send(req, res, 503, 'text/plain', 'db unavailable');
          send(req, res, 200, 'application/json', `{"sum":${sum},"db":${v}}`);
        });
      }
      case '/sleep': {
        const ms = intParam(params, 'ms', 0, SLEEP_MS_MAX, null);
        if (ms === null) throw new BadRequest('missing query parameter ms');
        return afterAtLeast(ms, () => send(req, res, 200, 'text/plain', `slept ${ms}`));
      }
      case '/config':
        return send(req, res, 200, 'application/json', configJson());
    }
  } catch (e) {
    if (e instanceof BadRequest) return send(req, res, 400, 'text/plain', e.message);
    throw e;
  }
  return undefined;
}

const serverOptions = {
  // contract: headers over 8 KiB -> 431 (Node 20's default limit is 16 KiB)
  maxHeaderSize: 8192,
};
if (TLS) {
  Object.assign(serverOptions, {
    cert: fs.readFileSync(TLS_CERT),
    key: fs.readFileSync(TLS_KEY),
    minVersion: 'TLSv1.2',
    // h2 or http/1.1 by ALPN on the one port: an HTTP/1.1 connection goes
    // through node:http's own connection handling (requests, upgrades,
    // clientError on this server), an h2 one through node:http2's
    // compatibility API, the same handler either way.
    allowHTTP1: true,
  });
}
const server = TLS ? http2.createSecureServer(serverOptions, handle) : http.createServer(serverOptions, handle);
// node:http2's secure server takes node:http's settings for its HTTP/1.1
// connections from these properties, not from its options (node:http sets
// them from its own: 400 for an HTTP/1.1 request without Host).
server.maxHeaderSize = 8192;
server.requireHostHeader = true;
// Keep idle benchmark connections open between runs and phases.
server.keepAliveTimeout = 65000;
server.headersTimeout = 66000;

// Malformed requests: answer with a complete response (Content-Length, Date,
// Server), then close. Node's default reply has none of these headers.
const REASONS = { 400: 'Bad Request', 408: 'Request Timeout', 431: 'Request Header Fields Too Large' };
server.on('clientError', (err, socket) => {
  if (err.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy();
    return;
  }
  let status = 400;
  if (err.code === 'HPE_HEADER_OVERFLOW') status = 431;
  else if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') status = 408;
  const body = REASONS[status].toLowerCase();
  socket.end(
    `HTTP/1.1 ${status} ${REASONS[status]}\r\n` +
      `Date: ${new Date().toUTCString()}\r\n` +
      `Server: ${SERVER}\r\n` +
      'Content-Type: text/plain\r\n' +
      `Content-Length: ${body.length}\r\n` +
      'Connection: close\r\n\r\n' +
      body,
  );
});

// CONNECT: node:http hands it to 'connect' listeners and, with none,
// destroys the socket without a word. An origin that is not a proxy
// answers 501 (RFC 9110 §9.3.6, §15.6.2), then closes.
if (!TLS) {
  server.on('connect', (req, socket) => {
    socket.on('error', () => {});
    const body = 'method not implemented';
    socket.end(
      `HTTP/1.1 501 Not Implemented\r\nDate: ${new Date().toUTCString()}\r\nServer: ${SERVER}\r\n` +
        `Content-Type: text/plain\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
    );
  });
}

// ---------------------------------------------------------------------------
// WebSocket (docs/ARCHITECTURE.md §2): GET /ws echoes, GET /ws/room?name=R
// fans every member's message out to every member. npm `ws` does the
// handshake (400 for a bad one), framing, ping/pong, the close handshake and
// the 64 KiB limit (close 1009). One process, one loop: a room is one Set,
// and a message is sent to every member before the next is read.

const WS_MAX_MESSAGE = 64 * 1024;
const ROOM_NAME = /^[A-Za-z0-9_-]{1,64}$/;
const wss = new WebSocketServer({ noServer: true, maxPayload: WS_MAX_MESSAGE, perMessageDeflate: false });
const rooms = new Map();

function wsRoute(target) {
  const q = target.indexOf('?');
  const path = q < 0 ? target : target.slice(0, q);
  if (path === '/ws') return { echo: true };
  if (path !== '/ws/room') return null;
  const name = parseQuery(q < 0 ? '' : target.slice(q + 1)).get('name');
  if (name === undefined || !ROOM_NAME.test(name)) return { error: "name must be 1 to 64 letters, digits, '-' or '_'" };
  return { room: name };
}

function refuse(socket, status, reason) {
  socket.end(
    `HTTP/1.1 ${status} Bad Request\r\nDate: ${new Date().toUTCString()}\r\nServer: ${SERVER}\r\n` +
      `Content-Type: text/plain\r\nContent-Length: ${Buffer.byteLength(reason)}\r\nConnection: close\r\n\r\n${reason}`,
  );
}

server.on('upgrade', (req, socket, head) => {
  socket.on('error', () => {});
  const route = wsRoute(originForm(req.url));
  if (route === null) {
    // Upgrade on another path is ignored (RFC 9110 §7.8): answered as a
    // plain request, then closed (what follows is not HTTP).
    const res = new http.ServerResponse(req);
    res.shouldKeepAlive = false;
    res.assignSocket(socket);
    res.on('finish', () => {
      res.detachSocket(socket);
      socket.end();
    });
    return handle(req, res);
  }
  if (route.error) return refuse(socket, 400, route.error);
  wss.handleUpgrade(req, socket, head, (ws) => {
    ws.on('error', () => {});
    if (route.echo) {
      ws.on('message', (data, isBinary) => ws.send(data, { binary: isBinary }));
      return;
    }
    // Joined before anything else runs: the 101 is out, and every message
    // from now on reaches this member.
    let members = rooms.get(route.room);
    if (!members) rooms.set(route.room, (members = new Set()));
    members.add(ws);
    ws.on('message', (data, isBinary) => {
      for (const m of members) m.send(data, { binary: isBinary });
    });
    ws.on('close', () => {
      members.delete(ws);
      if (members.size === 0 && rooms.get(route.room) === members) rooms.delete(route.room);
    });
  });
});

// H2C_PORT: the same handler through node:http2's compatibility API
// (req.url, res.writeHead, res.end; it adds Date as node:http does).
const h2cServer = H2C_PORT === null ? null : http2.createServer({}, handle);
if (h2cServer) {
  h2cServer.listen(H2C_PORT, HOST, () => {
    const a = h2cServer.address();
    process.stdout.write(`h2c on ${a.address}:${a.port}\n`);
  });
}

server.listen(PORT, HOST, () => {
  const a = server.address();
  process.stdout.write(`listening on ${a.address}:${a.port}\n`);
});

let stopping = false;
function shutdown() {
  if (stopping) return;
  stopping = true;
  server.close(() => {
    // every response is out; closing the pool politely must not hold the
    // exit (with the database gone, pool.end() may never call back)
    setTimeout(() => process.exit(0), 500).unref();
    pool.end(() => process.exit(0));
  });
  // node:http2's secure server has no closeIdleConnections
  if (server.closeIdleConnections) server.closeIdleConnections();
  if (h2cServer) h2cServer.close();
  for (const c of wss.clients) c.close(1001, 'server shutting down');
  // in-flight requests get 10 s; then exit anyway
  setTimeout(() => process.exit(0), 10000).unref();
}
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);
