<?php

/**
 * Swoole implementation of the benchmark contract around compose/php/contract.php.
 *
 *   HOST (0.0.0.0) PORT (9501) SWOOLE_WORKERS (20, the seed's worker_num)
 *   DB_POOL (20): total pooled connections; each worker gets
 *                 ceil(DB_POOL / SWOOLE_WORKERS) (1 with the defaults), so the
 *                 whole server holds DB_POOL connections like the other stacks.
 *                 /config reports the real total (workers x per-worker size).
 *   DB_HOST DB_PORT DB_USER DB_PASSWORD DB_NAME
 *
 * Model: coroutines. Every request runs in its own coroutine; SWOOLE_HOOK_ALL
 * makes PDO's socket I/O and usleep() yield instead of blocking the worker;
 * the sqrt loop blocks its worker, as PHP code does.
 *
 * Known Swoole 6.2 behaviour (shared/ANCHORS.md): the core sends a body on
 * HEAD unless the app omits it (we omit it and set Content-Length ourselves),
 * and it does not answer a malformed request line.
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

Swoole\Runtime::enableCoroutine(SWOOLE_HOOK_ALL);

// SWOOLE_BASE is Swoole 5+'s default mode; spelled out so that it is visible.
$server = new Server($host, $port, SWOOLE_BASE);
$server->set([
    'worker_num' => $workers,
    'enable_coroutine' => true,
    'hook_flags' => SWOOLE_HOOK_ALL,
    'max_coroutine' => 100000,
    'backlog' => 4096,
    'http_compression' => false,
    'open_http2_protocol' => false,
    'log_level' => SWOOLE_LOG_WARNING,
]);

/** @var PDOPool|null $pool one per worker process, created in workerStart */
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
    $pool = new PDOPool($config, $perWorker);
});

$db = static function (string $sql, bool $fresh) use (&$pool): int {
    if ($fresh) {
        return Bench\fresh_query($sql); // hooked: yields while connecting
    }
    $pdo = $pool->get(POOL_WAIT_SECONDS); // throws PDOException if it cannot connect
    if (!$pdo) {
        throw new Bench\DbUnavailable('pool wait timed out');
    }
    try {
        $v = Bench\pdo_scalar($pdo, $sql);
    } catch (\Throwable $e) {
        // Drop the broken connection; put(null) reconnects right away and
        // throws if the database is still down: the pool stays consistent
        // either way, and the next get() tries again.
        try {
            $pool->put(null);
        } catch (\Throwable) {
        }
        throw $e;
    }
    $pool->put($pdo);
    return $v;
};

$facts = static function () use ($server, $perWorker): array {
    $n = (int) $server->setting['worker_num'];
    return [
        'server' => 'swoole',
        'model' => 'coroutine',
        'workers' => $n,
        'db_pool' => $n * $perWorker,
    ];
};

$server->on('request', static function (Request $req, Response $res) use ($db, $facts): void {
    $method = $req->server['request_method'] ?? 'GET';
    $target = $req->server['request_uri'] ?? '/';
    if (isset($req->server['query_string']) && $req->server['query_string'] !== '') {
        $target .= '?' . $req->server['query_string'];
    }
    [$status, $type, $body, $headers] = Bench\handle($method, $target, $db, $facts);
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
