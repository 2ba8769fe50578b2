<?php

/**
 * php-fpm front controller: nginx sends every request here
 * (SCRIPT_FILENAME = @APP_DIR@/index.php). The same relative layout is used
 * in Docker (/app/php-fpm, /app/php) and in the repository (compose/php-fpm,
 * compose/php).
 */

declare(strict_types=1);

require_once __DIR__ . '/../php/contract.php';

$method = $_SERVER['REQUEST_METHOD'] ?? 'GET';

Bench\emit_sapi($method, Bench\handle(
    $method,
    $_SERVER['REQUEST_URI'] ?? '/',
    // Classic PHP: a persistent PDO per worker process (ATTR_PERSISTENT).
    // PDO pings it (COM_PING) when a request picks it up and reconnects if
    // it died, so the workers recover by themselves after a database
    // restart. conn=new: a plain PDO opened and closed in this request.
    static function (string $sql, bool $fresh): int {
        if ($fresh) {
            return Bench\fresh_query($sql);
        }
        return Bench\pdo_scalar(Bench\pdo_connect(true), $sql);
    },
    static function (): array {
        $workers = fpm_pool_size();
        return [
            'server' => 'php-fpm',
            'model' => 'worker-pool',
            'workers' => $workers,
            // one persistent connection per worker process
            'db_pool' => $workers,
            // A worker per request: a request ends, its worker is handed the
            // next; nginx's FastCGI hands PHP a request, never a connection.
            'websocket' => null,
            'websocket_unsupported' => 'a php-fpm worker serves one request and returns: '
                . 'FastCGI hands PHP a request, never the connection a WebSocket lives on',
        ];
    },
    // nginx has read and framed the body, and refused one over its
    // client_max_body_size (1 MiB, 413) before PHP runs.
    static fn (): string => (string) file_get_contents('php://input'),
));

/**
 * The live pool size: the php-fpm processes whose parent is this worker's
 * parent (the FPM master), read from /proc rather than from a file.
 *
 * fpm_get_status() would say it too, but it is not safe to call: in PHP 8.2
 * concurrent calls crash workers with SIGSEGV (php-src GH-16432, GH-19974;
 * measured here: 832 crashes in 6 s of `ab -c 10 /config` beside /hello load).
 */
function fpm_pool_size(): ?int
{
    $self = proc_stat('/proc/self/stat');
    if ($self === null) {
        return null;
    }
    $n = 0;
    foreach (glob('/proc/[0-9]*/stat', GLOB_NOSORT) ?: [] as $file) {
        $st = proc_stat($file);
        if ($st !== null && $st['ppid'] === $self['ppid'] && str_starts_with($st['comm'], 'php-fpm')) {
            $n++;
        }
    }
    return $n > 0 ? $n : null;
}

/**
 * comm and ppid of /proc/PID/stat ("pid (comm) state ppid ..."; comm may
 * itself hold spaces and parentheses, so it ends at the last ')').
 *
 * @return array{comm: string, ppid: int}|null
 */
function proc_stat(string $file): ?array
{
    $s = @file_get_contents($file);
    if ($s === false) {
        return null;
    }
    $open = strpos($s, '(');
    $close = strrpos($s, ')');
    if ($open === false || $close === false || $close < $open) {
        return null;
    }
    $rest = explode(' ', substr($s, $close + 2), 3);
    if (count($rest) < 2) {
        return null;
    }
    return ['comm' => substr($s, $open + 1, $close - $open - 1), 'ppid' => (int) $rest[1]];
}
