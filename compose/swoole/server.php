<?php

/**
 * Swoole implementation of the benchmark contract around compose/php/contract.php.
 *
 *   HOST (0.0.0.0) PORT (9501) SWOOLE_WORKERS (20, the seed's worker_num)
 *   DB_POOL (20): total pooled connections; each worker gets
 *                 ceil(DB_POOL / SWOOLE_WORKERS) (1 with the defaults), so the
 *                 whole server holds DB_POOL connections like the other stacks.
 *   DB_HOST DB_PORT DB_USER DB_PASSWORD DB_NAME
 *
 * Model: coroutines. Every request runs in its own coroutine; the runtime
 * hooks make PDO's socket I/O (mysqlnd streams: SWOOLE_HOOK_TCP/UNIX) and
 * usleep() yield instead of blocking the worker; the sqrt loop blocks its
 * worker, as PHP code does.
 *
 * /config is read in the worker that answers: live workers (their pids in
 * /proc), this worker's pool capacity, OPcache/JIT by opcache_get_status(),
 * the server's mode; `source` says how each field was obtained and
 * `configured` lists what Swoole gives no way to read back (the log level).
 *
 * Swoole 6.2.2's core and the contract (harness/tests/compose_stacks.rs pins
 * these, and fails when one disappears):
 *   - it sends a body on HEAD unless the app omits it: we omit it and set
 *     Content-Length ourselves (fixed here);
 *   - it does not answer a malformed request line: the reactor cannot tell
 *     it from an incomplete one and waits for more bytes (up to 64 KiB);
 *   - its own 400 (bad header line, unknown HTTP version) is the bare
 *     "HTTP/1.1 400 Bad Request\r\n\r\n" with no Server, Date or body,
 *     written by the reactor before any PHP runs;
 *   - it has no 431: a head over 8 KiB is served (up to its buffer);
 *   - pipelined requests run as concurrent coroutines and are answered in
 *     the order they finish, not the order they came.
 *
 * WebSocket (GET /ws, GET /ws/room?name=R): Swoole\WebSocket\Server, whose
 * core frames messages, reassembles fragments, answers pings and completes
 * the close handshake. The handshake is ours (onHandshake), validated by the
 * contract's Bench\ws_accept so that a bad one gets the same 400 and reason
 * as every other server. In SWOOLE_BASE a connection lives in the worker
 * that accepted it, so a room spans workers through Rooms below: each room
 * has one owner worker that puts its messages in one order and hands each
 * to the workers holding members, over Swoole's worker pipes.
 */

declare(strict_types=1);

require_once __DIR__ . '/../php/contract.php';

use Swoole\Database\PDOConfig;
use Swoole\Database\PDOPool;
use Swoole\Coroutine\Channel;
use Swoole\Http\Request;
use Swoole\Http\Response;
use Swoole\WebSocket\Frame;
use Swoole\WebSocket\Server;

$envInt = static function (string $k, int $default): int {
    $v = getenv($k);
    return ($v === false || $v === '') ? $default : (int) $v;
};
$host = getenv('HOST') ?: '0.0.0.0';
$port = $envInt('PORT', 9501);
$workers = max(1, $envInt('SWOOLE_WORKERS', 20));
$perWorker = max(1, intdiv(max(1, $envInt('DB_POOL', 20)) + $workers - 1, $workers));
// a request waits this long for a pooled connection, then answers 503
const POOL_WAIT_SECONDS = 30.0;

// Swoole's own PHP library (PDOProxy, on a failed query) calls mb_strpos:
// without mbstring the first database failure would kill a worker with a
// fatal error instead of answering 503. Refuse to start instead.
if (!extension_loaded('mbstring')) {
    fwrite(STDERR, "swoole/server.php: the mbstring extension is missing (apt-get install php8.2-mbstring)\n");
    exit(1);
}

// Every hook, except curl's when the curl extension is not loaded (Swoole
// would warn at start for each curl_* function it cannot find).
$hooks = SWOOLE_HOOK_ALL;
if (!extension_loaded('curl')) {
    $hooks &= ~(SWOOLE_HOOK_CURL | SWOOLE_HOOK_NATIVE_CURL);
}
Swoole\Runtime::enableCoroutine($hooks);

// TLS_CERT and TLS_KEY (PEM files; `harness compare --tls` gives the lab's):
// the listener is SWOOLE_SSL, terminated by Swoole itself (its OpenSSL).
$tlsCert = getenv('TLS_CERT') ?: '';
$tlsKey = getenv('TLS_KEY') ?: '';
$tls = $tlsCert !== '' && $tlsKey !== '';
if ($tls && !defined('SWOOLE_SSL')) {
    fwrite(STDERR, "swoole/server.php: TLS_CERT is set, but this Swoole module was built without OpenSSL (no SWOOLE_SSL)\n");
    exit(1);
}

// SWOOLE_BASE is Swoole 5+'s default mode; spelled out so that it is visible.
// Swoole\WebSocket\Server is its HTTP server that also takes upgrades: every
// plain request still goes to onRequest.
$server = new Server($host, $port, SWOOLE_BASE, $tls ? SWOOLE_SOCK_TCP | SWOOLE_SSL : SWOOLE_SOCK_TCP);
$server->set(($tls ? [
    'ssl_cert_file' => $tlsCert,
    'ssl_key_file' => $tlsKey,
] : []) + [
    'worker_num' => $workers,
    'enable_coroutine' => true,
    'hook_flags' => $hooks,
    'max_coroutine' => 100000,
    'backlog' => 4096,
    'http_compression' => false,
    // HTTP/2 by prior knowledge (h2c) on the same port as HTTP/1.1: Swoole
    // tells them apart by the connection preface.
    'open_http2_protocol' => true,
    'http2_max_concurrent_streams' => 128,
    // The largest request or WebSocket frame read whole (Swoole's default,
    // spelled out): a 1 MiB POST /echo body, and a frame over the contract's
    // 64 KiB message limit, which is read to its end and closed with 1009.
    'package_max_length' => 2 * 1024 * 1024,
    // Pings answered and close frames completed by Swoole's core, fragments
    // reassembled into one onMessage (the defaults, spelled out).
    'open_websocket_ping_frame' => false,
    'open_websocket_close_frame' => false,
    'websocket_compression' => false,
    'log_level' => SWOOLE_LOG_WARNING,
]);

/**
 * A PDOPool that tells its capacity (ConnectionPool keeps it protected) and
 * does not let its waiters outwait a failed connect.
 *
 * ConnectionPool::get() makes a connection only while fewer than `size`
 * exist (1 per worker here, counted from the moment a connect starts); every
 * other coroutine of the worker waits on the channel. When that connect
 * fails, nothing is pushed: against a database that refuses, the failure is
 * immediate and nobody waits, but against one that does not answer (a
 * stopped container on a bridge, a host dropping packets) the connect hangs
 * for its timeout (2 s, ATTR_TIMEOUT) and the waiters then sat out the
 * pool's whole wait (30 s) before their 503. take() waits in short slices
 * and gives up as soon as a connect made while it waited has failed, so
 * every request answers 503 within the connect timeout, as our servers do.
 * Only new methods, on the library's protected members (pool, num, size,
 * make()), so that no signature of the library's own is overridden.
 */
final class BenchPool extends PDOPool
{
    /** How often a waiter looks whether the connect under way failed. */
    private const WAIT_SLICE_SECONDS = 0.2;

    /** When a connect last failed (microtime(true)); 0: never. */
    private float $failedAt = 0.0;

    public function capacity(): int
    {
        return $this->size;
    }

    /**
     * A connection within $timeout seconds, false when none came in time;
     * throws when a connect (its own, or one it waited on) failed.
     */
    public function take(float $timeout)
    {
        $start = microtime(true);
        $deadline = $start + $timeout;
        while (true) {
            if ($this->pool === null) {
                throw new Bench\DbUnavailable('the pool is closed');
            }
            if ($this->pool->isEmpty() && $this->num < $this->size) {
                $this->makeOrRecord();
            }
            $left = $deadline - microtime(true);
            if ($left <= 0) {
                return false;
            }
            $connection = $this->pool->pop(min(self::WAIT_SLICE_SECONDS, $left));
            if ($connection !== false) {
                return $connection;
            }
            if ($this->failedAt >= $start) {
                throw new Bench\DbUnavailable('the connect this request waited for failed');
            }
        }
    }

    /** Drops a broken connection and makes its replacement (ConnectionPool::put(null)). */
    public function discard(): void
    {
        $this->num -= 1;
        $this->makeOrRecord();
    }

    private function makeOrRecord(): void
    {
        try {
            $this->make();
        } catch (\Throwable $e) {
            $this->failedAt = microtime(true);
            throw $e;
        }
    }
}

/** How long a handshake waits for its room's owner to register it: then 503. */
const ROOM_JOIN_WAIT_SECONDS = 5.0;

/**
 * WebSocket rooms across SWOOLE_BASE workers.
 *
 * A connection lives in the worker that accepted it, and Swoole's
 * sendMessage() is a pipe from one worker to another (FIFO per pair). So
 * each room has one owner, worker crc32(name) mod worker_num, which keeps
 * the room's members (session id => the worker holding it). Every message
 * sent in the room goes to the owner, which receives the room's messages in
 * one order and hands each, in that order, to every worker holding members
 * (one pipe message per worker). Each worker pushes it to its own members.
 * Every member thus receives the room's messages in the one order the owner
 * received them, the sender too.
 *
 * A member is in the room once its 101 is sent: the handshake waits for the
 * owner's acknowledgement of its join before answering 101.
 */
final class Rooms
{
    /** @var array<string, array<int, int>> rooms this worker owns: name => [fd => worker id] */
    private array $owned = [];
    /** @var array<int, string> this worker's members: fd => room name */
    private array $local = [];
    /** @var array<int, Channel> handshakes waiting for their owner's acknowledgement */
    private array $joining = [];

    public function __construct(private Server $server)
    {
    }

    private function owner(string $room): int
    {
        return crc32($room) % (int) $this->server->setting['worker_num'];
    }

    private function self(): int
    {
        return (int) $this->server->worker_id;
    }

    /** Registers $fd in $room with the room's owner; false if the owner did not answer. */
    public function join(string $room, int $fd): bool
    {
        $owner = $this->owner($room);
        $this->local[$fd] = $room;
        if ($owner === $this->self()) {
            $this->owned[$room][$fd] = $owner;
            return true;
        }
        $acknowledged = new Channel(1);
        $this->joining[$fd] = $acknowledged;
        $this->server->sendMessage(['join', $room, $fd, $this->self()], $owner);
        $ok = $acknowledged->pop(ROOM_JOIN_WAIT_SECONDS) === true;
        unset($this->joining[$fd]);
        if (!$ok) {
            $this->leave($fd);
        }
        return $ok;
    }

    /** $fd closed: out of its room, if it was in one. */
    public function leave(int $fd): void
    {
        $room = $this->local[$fd] ?? null;
        if ($room === null) {
            return;
        }
        unset($this->local[$fd]);
        $owner = $this->owner($room);
        if ($owner === $this->self()) {
            $this->forget($room, $fd);
        } else {
            $this->server->sendMessage(['leave', $room, $fd], $owner);
        }
    }

    /** Whether $fd is a room member of this worker. */
    public function holds(int $fd): bool
    {
        return isset($this->local[$fd]);
    }

    /** A message from member $fd, to every member of its room. */
    public function publish(int $fd, string $data, int $opcode): void
    {
        $room = $this->local[$fd];
        $owner = $this->owner($room);
        if ($owner === $this->self()) {
            $this->fanOut($room, $data, $opcode);
        } else {
            $this->server->sendMessage(['publish', $room, $data, $opcode], $owner);
        }
    }

    /** onPipeMessage: what another worker's Rooms sent this one. */
    public function onPipeMessage(mixed $message): void
    {
        if (!is_array($message)) {
            return;
        }
        switch ($message[0]) {
            case 'join': // at the owner: register, then let the handshake answer 101
                [, $room, $fd, $worker] = $message;
                $this->owned[$room][$fd] = $worker;
                $this->server->sendMessage(['joined', $fd], $worker);
                break;
            case 'joined':
                ($this->joining[$message[1]] ?? null)?->push(true);
                break;
            case 'leave':
                $this->forget($message[1], $message[2]);
                break;
            case 'publish':
                $this->fanOut($message[1], $message[2], $message[3]);
                break;
            case 'deliver':
                $this->deliver($message[1], $message[2], $message[3]);
                break;
        }
    }

    /** At the owner: the message to every worker holding members, in this order. */
    private function fanOut(string $room, string $data, int $opcode): void
    {
        $byWorker = [];
        foreach ($this->owned[$room] ?? [] as $fd => $worker) {
            $byWorker[$worker][] = $fd;
        }
        foreach ($byWorker as $worker => $fds) {
            if ($worker === $this->self()) {
                $this->deliver($fds, $data, $opcode);
            } else {
                $this->server->sendMessage(['deliver', $fds, $data, $opcode], $worker);
            }
        }
    }

    /** @param list<int> $fds members of this worker */
    private function deliver(array $fds, string $data, int $opcode): void
    {
        foreach ($fds as $fd) {
            if (isset($this->local[$fd])) {
                $this->server->push($fd, $data, $opcode);
            }
        }
    }

    private function forget(string $room, int $fd): void
    {
        unset($this->owned[$room][$fd]);
        if (($this->owned[$room] ?? null) === []) {
            unset($this->owned[$room]);
        }
    }
}

/** @var BenchPool|null $pool one per worker process, created in workerStart */
$pool = null;

/** @var Rooms|null $rooms one per worker process, created in workerStart */
$rooms = null;

$server->on('workerStart', static function (Server $server) use (&$pool, &$rooms, $perWorker): void {
    $rooms = new Rooms($server);
    $e = Bench\db_env();
    $config = (new PDOConfig())
        ->withHost($e['host'])
        ->withPort($e['port'])
        ->withDbName($e['name'])
        ->withCharset('utf8mb4')
        ->withUsername($e['user'])
        ->withPassword($e['password'])
        ->withOptions(Bench\pdo_options(false));
    // connections are made lazily: a worker starts even with the DB down
    $pool = new BenchPool($config, $perWorker);
});

$db = static function (string $sql, bool $fresh) use (&$pool): int {
    if ($fresh) {
        return Bench\fresh_query($sql); // hooked: yields while connecting
    }
    $pdo = $pool->take(POOL_WAIT_SECONDS); // throws if it cannot connect
    if (!$pdo) {
        throw new Bench\DbUnavailable('pool wait timed out');
    }
    try {
        $v = Bench\pdo_scalar($pdo, $sql);
    } catch (\Throwable $e) {
        // Drop the broken connection; discard() reconnects right away and
        // throws if the database is still down (telling the waiters): the
        // pool stays consistent either way, and the next take() tries again.
        try {
            $pool->discard();
        } catch (\Throwable) {
        }
        throw $e;
    }
    $pool->put($pdo);
    return $v;
};

$logLevels = [
    SWOOLE_LOG_DEBUG => 'debug', SWOOLE_LOG_TRACE => 'trace', SWOOLE_LOG_INFO => 'info',
    SWOOLE_LOG_NOTICE => 'notice', SWOOLE_LOG_WARNING => 'warning', SWOOLE_LOG_ERROR => 'error',
    SWOOLE_LOG_NONE => 'none',
];

// /config, in the worker that answers: what the running server has.
$facts = static function () use ($server, &$pool, $logLevels): array {
    // Workers: the ones whose process runs now, of the worker_num slots.
    $slots = (int) $server->setting['worker_num'];
    $pids = [];
    for ($i = 0; $i < $slots; $i++) {
        $pid = $server->getWorkerPid($i);
        if (is_int($pid) && $pid > 0 && Bench\proc_alive($pid)) {
            $pids[] = $pid;
        }
    }
    $workers = count($pids);
    $base = $server->mode === SWOOLE_BASE;
    $logLevel = $server->setting['log_level'] ?? SWOOLE_LOG_INFO;
    return [
        'server' => 'swoole',
        // enable_coroutine: this request runs in a coroutine of its own
        'model' => Swoole\Coroutine::getCid() > 0 ? 'coroutine' : 'worker-pool',
        'workers' => $workers,
        'db_pool' => $pool === null ? null : $workers * $pool->capacity(),
        'debug' => (bool) SWOOLE_DEBUG,
        'tls' => isset($server->setting['ssl_cert_file']) ? 'swoole: SWOOLE_SSL (OpenSSL)' : null,
        'websocket' => [
            'connection' => 'a Swoole\\WebSocket\\Server connection in the worker that accepted it '
                . '(SWOOLE_BASE: each worker its own reactor), each message handled in a coroutine of that worker',
            'rooms' => 'shared-across-workers',
            // each room ordered by one owner worker, handed to the others over Swoole's worker pipes
            'room_spans_workers' => true,
        ],
        'swoole' => [
            'version' => phpversion('swoole'),
            'mode' => $base ? 'base' : 'process',
            // SWOOLE_BASE: no reactor threads, each worker's one thread runs
            // its own reactor and accepts its own connections, so no
            // dispatch_mode applies.
            'reactor_threads' => $base ? 0 : max(0, (Bench\proc_threads($server->getMasterPid()) ?? 1) - 1),
            'dispatch_mode' => $base ? null : ($server->setting['dispatch_mode'] ?? 2),
            'worker_id' => $server->worker_id,
            'worker_pid' => getmypid(),
            // the process that forked the workers and restarts them
            'manager_pid' => $server->getManagerPid(),
            'pool_per_worker' => $pool?->capacity(),
            'hook_flags' => Swoole\Runtime::getHookFlags(),
            'log_level' => $logLevels[$logLevel] ?? (string) $logLevel,
            'debug_build' => (bool) SWOOLE_DEBUG,
        ],
        'php' => Bench\php_runtime_facts(),
        'source' => [
            'model' => 'read: Swoole\Coroutine::getCid() of this request',
            'workers' => 'read: Server::getWorkerPid(i) of the worker_num slots, running in /proc',
            'db_pool' => "read: workers x this worker's PDOPool capacity",
            'swoole.mode' => 'read: Server->mode',
            'swoole.reactor_threads' => 'read: Server->mode (SWOOLE_BASE has none; else the master\'s threads in /proc)',
            'swoole.dispatch_mode' => 'read: Server->mode (SWOOLE_BASE dispatches nothing); else the setting',
            'swoole.hook_flags' => 'read: Swoole\Runtime::getHookFlags()',
            'swoole.log_level' => 'configured: Server->setting[log_level]; Swoole has no getter',
            'websocket' => 'built in: Swoole\\WebSocket\\Server in SWOOLE_BASE, rooms owned per worker (Rooms in server.php)',
            'debug' => 'read: the PHP facts, and SWOOLE_DEBUG (a debug build of Swoole)',
            'php' => 'read: ini_get() and PHP constants at run time, in this worker',
        ] + Bench\php_sources(),
        'configured' => ['swoole.log_level'],
    ];
};

/** The request's method and origin-form target. */
$targetOf = static function (Request $req): array {
    $target = $req->server['request_uri'] ?? '/';
    if (isset($req->server['query_string']) && $req->server['query_string'] !== '') {
        $target .= '?' . $req->server['query_string'];
    }
    return [$req->server['request_method'] ?? 'GET', $target];
};

/** A 400 with its one-line reason, and the connection closed. */
$refuse = static function (Response $res, string $reason): void {
    $res->status(400);
    $res->header('Content-Type', 'text/plain');
    $res->header('Connection', 'close');
    $res->end($reason);
};

$serve = static function (Request $req, Response $res) use ($db, $facts, $targetOf, $refuse): void {
    [$method, $target] = $targetOf($req);
    $route = Bench\ws_route($target);
    if ($route !== null) {
        // /ws without an upgrade: the handshake's reason, as every server answers
        try {
            Bench\ws_accept($method, $route[0] === 'error' ? [] : ($req->header ?? []));
        } catch (Bench\BadRequest $e) {
            $refuse($res, $route[0] === 'error' ? $route[1] : $e->getMessage());
            return;
        }
    }
    $input = static fn (): string => (string) $req->rawContent();
    [$status, $type, $body, $headers] = Bench\handle($method, $target, $db, $facts, $input);
    $res->status($status);
    $res->header('Content-Type', $type);
    foreach ($headers as $k => $v) {
        $res->header($k, $v);
    }
    if ($method === 'HEAD') {
        // Swoole keeps a Content-Length set by the app when end() has no body
        $res->header('Content-Length', (string) strlen($body));
        $res->end();
    } else {
        $res->end($body);
    }
};

$server->on('request', $serve);

// The opening handshake (RFC 6455 §4.2): ours rather than Swoole's, so that a
// bad one is refused with the contract's reason. true: the 101 went out.
$server->on('handshake', static function (Request $req, Response $res) use (&$rooms, $serve, $targetOf, $refuse): bool {
    [$method, $target] = $targetOf($req);
    $route = Bench\ws_route($target);
    if ($route === null) {
        // An Upgrade on another path is ignored (RFC 9110 §7.8): answered as a
        // plain request, then closed (what follows it is not HTTP).
        $res->header('Connection', 'close');
        $serve($req, $res);
        return false;
    }
    try {
        if ($route[0] === 'error') {
            throw new Bench\BadRequest($route[1]);
        }
        $accept = Bench\ws_accept($method, $req->header ?? []);
    } catch (Bench\BadRequest $e) {
        $refuse($res, $e->getMessage());
        return false;
    }
    if ($route[0] === 'room' && !$rooms->join($route[1], $req->fd)) {
        $res->status(503);
        $res->header('Content-Type', 'text/plain');
        $res->header('Connection', 'close');
        $res->end('the room\'s owner worker did not answer');
        return false;
    }
    $res->status(101);
    $res->header('Upgrade', 'websocket');
    $res->header('Connection', 'Upgrade');
    $res->header('Sec-WebSocket-Accept', $accept);
    $res->end();
    return true;
});

$server->on('message', static function (Server $server, Frame $frame) use (&$rooms): void {
    if (strlen($frame->data) > Bench\WS_MAX_MESSAGE) {
        $server->disconnect($frame->fd, Bench\WS_TOO_BIG, 'message over 64 KiB');
        return;
    }
    if ($rooms->holds($frame->fd)) {
        $rooms->publish($frame->fd, $frame->data, $frame->opcode);
    } else {
        $server->push($frame->fd, $frame->data, $frame->opcode);
    }
});

$server->on('pipeMessage', static function (Server $server, int $fromWorker, mixed $message) use (&$rooms): void {
    $rooms?->onPipeMessage($message);
});

$server->on('close', static function (Server $server, int $fd) use (&$rooms): void {
    $rooms?->leave($fd);
});

$server->on('start', static function () use ($host, $port, $workers, $perWorker): void {
    fwrite(STDOUT, "listening on $host:$port ($workers workers, $perWorker pooled connection(s) each)\n");
});

$server->start();
