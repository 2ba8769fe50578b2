<?php

/**
 * FrankenPHP worker-mode script around compose/php/contract.php. Caddy
 * routes every request here (php_server, root = this directory, which holds
 * nothing else); the worker block of the Caddyfile keeps BENCH_WORKERS (20)
 * of these scripts alive, each looping in frankenphp_handle_request() with one
 * PDO connection for its lifetime (reconnecting after a failure).
 */

declare(strict_types=1);

require_once __DIR__ . '/../../php/contract.php';

ignore_user_abort(true);

$conn = new Bench\WorkerConnection();
$db = $conn->query(...);

// /config. FrankenPHP gives a PHP script no way to count its workers (its
// metrics live behind Caddy's admin endpoint, which the Caddyfile turns
// off), so `workers` and `db_pool` repeat the Caddyfile's `num`, and say so
// (`configured`); OPcache and JIT are read by opcache_get_status() in this
// worker thread (contract.php), the ini values at run time here.
$workers = (int) ($_SERVER['BENCH_WORKERS'] ?? getenv('BENCH_WORKERS') ?: 0);
$workerMode = function_exists('frankenphp_handle_request');
$facts = static fn (): array => [
    'server' => 'frankenphp',
    'model' => $workerMode ? 'worker-pool' : 'classic',
    'workers' => $workers > 0 ? $workers : null,
    'db_pool' => $workers > 0 ? $workers : null, // one connection per worker
    'websocket' => null,
    'websocket_unsupported' => 'FrankenPHP hands a worker one request at a time and gives PHP no upgraded '
        . 'connection; its real-time answer is Mercure (server-sent events, built into its Caddy), not WebSocket',
    'php' => Bench\php_runtime_facts(),
    'source' => [
        'model' => 'read: function_exists(frankenphp_handle_request) (worker mode)',
        'workers' => "configured: BENCH_WORKERS, the Caddyfile's worker num; FrankenPHP has no getter for PHP",
        'db_pool' => 'configured: one connection per worker (workers)',
        'php' => 'read: ini_get() and PHP constants at run time, in this worker',
    ] + Bench\php_sources(),
    'configured' => ['workers', 'db_pool'],
];

$handler = static function () use ($db, $facts): void {
    $method = $_SERVER['REQUEST_METHOD'] ?? 'GET';
    $body = static fn (): string => (string) file_get_contents('php://input');
    Bench\emit_sapi($method, Bench\handle($method, $_SERVER['REQUEST_URI'] ?? '/', $db, $facts, $body));
};

if (!function_exists('frankenphp_handle_request')) {
    // not in worker mode (classic FrankenPHP or another SAPI): one request
    $handler();
    return;
}

// No gc_collect_cycles() between requests: the contract allocates no cycles,
// and the other stacks do not pay for one either.
while (frankenphp_handle_request($handler)) {
}
