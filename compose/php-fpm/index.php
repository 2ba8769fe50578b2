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
        // Read from the running FPM master's scoreboard, not from a file.
        $workers = null;
        if (function_exists('fpm_get_status')) {
            $st = fpm_get_status();
            if (is_array($st)) {
                $workers = isset($st['procs']) ? count($st['procs']) : ($st['total-processes'] ?? null);
            }
        }
        return [
            'server' => 'php-fpm',
            'model' => 'worker-pool',
            'workers' => $workers,
            // one persistent connection per worker process
            'db_pool' => $workers,
        ];
    },
));
