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
 */

declare(strict_types=1);

require_once __DIR__ . '/../php/contract.php';

use Swoole\Database\PDOConfig;
use Swoole\Database\PDOPool;
use Swoole\Http\Request;
use Swoole\Http\Response;
use Swoole\Http\Server;

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

// SWOOLE_BASE is Swoole 5+'s default mode; spelled out so that it is visible.
$server = new Server($host, $port, SWOOLE_BASE);
$server->set([
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

/** @var BenchPool|null $pool one per worker process, created in workerStart */
$pool = null;

$server->on('workerStart', static function () use (&$pool, $perWorker): void {
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
            'debug' => 'read: the PHP facts, and SWOOLE_DEBUG (a debug build of Swoole)',
            'php' => 'read: ini_get() and PHP constants at run time, in this worker',
        ] + Bench\php_sources(),
        'configured' => ['swoole.log_level'],
    ];
};

$server->on('request', static function (Request $req, Response $res) use ($db, $facts): void {
    $method = $req->server['request_method'] ?? 'GET';
    $target = $req->server['request_uri'] ?? '/';
    if (isset($req->server['query_string']) && $req->server['query_string'] !== '') {
        $target .= '?' . $req->server['query_string'];
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
});

$server->on('start', static function () use ($host, $port, $workers, $perWorker): void {
    fwrite(STDOUT, "listening on $host:$port ($workers workers, $perWorker pooled connection(s) each)\n");
});

$server->start();
