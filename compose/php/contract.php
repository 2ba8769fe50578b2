<?php

/**
 * The benchmark contract (docs/ARCHITECTURE.md §2) for every PHP stack.
 *
 * One routing + workload library shared by php-fpm (index.php), RoadRunner
 * (worker.php), Swoole (server.php) and FrankenPHP (worker mode). A stack
 * only adapts its request/response objects and supplies:
 *
 *   - $db:    callable(string $sql, bool $fresh): int
 *             runs $sql and returns the first column of the first row.
 *             $fresh = true: on a connection opened for this request and
 *             closed after it (`conn=new`); false: the stack's pooled or
 *             persistent connection. Throws \PDOException or
 *             Bench\DbUnavailable when the database cannot answer.
 *   - $facts: array or callable(): array with the stack's own /config facts
 *             (server, model, workers, db_pool), read from the live process.
 *   - $body:  callable(): string, the request body as the stack has it
 *             (php://input for php-fpm and FrankenPHP, the PSR-7 body for
 *             RoadRunner, rawContent() for Swoole); called only by
 *             `POST /echo`. The server in front frames it (Content-Length
 *             or chunked) and refuses a body that breaks its framing.
 *
 * handle() is pure apart from the workload itself (sqrt loop, $db, usleep):
 * no globals, no output, no header() calls.
 */

declare(strict_types=1);

namespace Bench;

const CPU_N_DEFAULT = 1000;
const CPU_N_MAX = 10000000;
const SLEEP_MS_MAX = 10000;
/** The largest body `POST /echo` answers back; one byte more: 413. */
const ECHO_MAX_BYTES = 1048576;

/** The database could not be reached (pool timeout, no connection, ...). */
final class DbUnavailable extends \RuntimeException
{
}

/** 400 with a one-line reason. */
final class BadRequest extends \InvalidArgumentException
{
}

/**
 * @param callable(string, bool): int $db
 * @param array<string, mixed>|callable(): array<string, mixed> $facts
 * @param null|callable(): string $body
 * @return array{0: int, 1: string, 2: string, 3: array<string, string>}
 *         [status, content type, body, extra headers]. The body is the GET
 *         body also for HEAD: the adapter sends its length as Content-Length
 *         and omits it.
 */
function handle(string $method, string $target, callable $db, array|callable $facts = [], ?callable $body = null): array
{
    // A target in absolute-form (http://host/hello) routes by its path:
    // a server MUST accept that form (RFC 9112 §3.2.2).
    if (preg_match('#^https?://[^/?]*#i', $target, $m) === 1) {
        $rest = substr($target, strlen($m[0]));
        $target = str_starts_with($rest, '/') ? $rest : '/';
    }
    $q = strpos($target, '?');
    $path = $q === false ? $target : substr($target, 0, $q);
    $query = $q === false ? '' : substr($target, $q + 1);

    $route = match ($path) {
        '/', '/hello' => 'hello',
        '/cpu' => 'cpu',
        '/db' => 'db',
        '/work' => 'work',
        '/sleep' => 'sleep',
        '/config' => 'config',
        '/echo' => 'echo',
        default => null,
    };
    if ($route === null) {
        return [404, 'text/plain', 'not found', []];
    }
    if ($route === 'echo') {
        return echo_body($method, $body);
    }
    if ($method !== 'GET' && $method !== 'HEAD') {
        return [405, 'text/plain', 'method not allowed', ['Allow' => 'GET, HEAD']];
    }

    try {
        $params = parse_query($query);
        switch ($route) {
            case 'hello':
                return [200, 'text/plain', 'Hello World', []];

            case 'cpu':
                $n = int_param($params, 'n', 1, CPU_N_MAX, CPU_N_DEFAULT);
                return [200, 'text/plain', format_sum(sqrt_sum($n)), []];

            case 'db':
                $sleepMs = int_param($params, 'sleep_ms', 0, SLEEP_MS_MAX, null);
                $fresh = conn_param($params);
                $sql = $sleepMs === null ? 'SELECT 1' : sleep_sql($sleepMs);
                return [200, 'text/plain', (string) $db($sql, $fresh), []];

            case 'work':
                $n = int_param($params, 'n', 1, CPU_N_MAX, CPU_N_DEFAULT);
                $fresh = conn_param($params);
                $sum = format_sum(sqrt_sum($n));
                $one = (int) $db('SELECT 1', $fresh);
                // Built by hand: json_encode would reformat the float.
                return [200, 'application/json', '{"sum":' . $sum . ',"db":' . $one . '}', []];

            case 'sleep':
                $ms = int_param($params, 'ms', 0, SLEEP_MS_MAX, null);
                if ($ms === null) {
                    throw new BadRequest('missing query parameter ms');
                }
                if ($ms > 0) {
                    // A timer, not a spin. Under Swoole's SWOOLE_HOOK_SLEEP
                    // this yields the coroutine instead of the process.
                    usleep($ms * 1000);
                }
                return [200, 'text/plain', 'slept ' . $ms, []];

            case 'config':
                return [200, 'application/json', config_json(is_callable($facts) ? $facts() : $facts), []];
        }
    } catch (BadRequest $e) {
        return [400, 'text/plain', $e->getMessage(), []];
    } catch (\PDOException | DbUnavailable $e) {
        if (seed_error_bodies()) {
            // The seed benchmark's handlers, reproduced on purpose by
            // `harness reproduce docker-vs-bare`: a failed query answered as
            // a success, which ApacheBench cannot tell from a fast one.
            return [200, 'application/json', '{"db":"error"}', []];
        }
        return [503, 'text/plain', 'db unavailable', []];
    }
    return [404, 'text/plain', 'not found', []]; // unreachable
}

/**
 * `POST /echo`: the body answered back as application/octet-stream; over
 * ECHO_MAX_BYTES 413 (and the connection closed); other methods 405.
 *
 * @param null|callable(): string $body
 * @return array{0: int, 1: string, 2: string, 3: array<string, string>}
 */
function echo_body(string $method, ?callable $body): array
{
    if ($method !== 'POST') {
        return [405, 'text/plain', 'method not allowed', ['Allow' => 'POST']];
    }
    $bytes = $body === null ? '' : (string) $body();
    if (strlen($bytes) > ECHO_MAX_BYTES) {
        return [413, 'text/plain', 'request body over 1 MiB', ['Connection' => 'close']];
    }
    return [200, 'application/octet-stream', $bytes, []];
}

/** The largest WebSocket message a server takes (64 KiB); a larger one closes with WS_TOO_BIG. */
const WS_MAX_MESSAGE = 65536;
/** RFC 6455 §7.4.1: the close code for a message over WS_MAX_MESSAGE. */
const WS_TOO_BIG = 1009;

/**
 * The WebSocket route of an origin-form target, as workloads::ws::route:
 * null where it names none, ['echo'] for /ws, ['room', NAME] for
 * /ws/room?name=NAME, ['error', REASON] for /ws/room without a valid name
 * (1 to 64 letters, digits, '-' or '_'; the first name= counts).
 *
 * @return null|array{0: string, 1?: string}
 */
function ws_route(string $target): ?array
{
    $q = strpos($target, '?');
    $path = $q === false ? $target : substr($target, 0, $q);
    if ($path === '/ws') {
        return ['echo'];
    }
    if ($path !== '/ws/room') {
        return null;
    }
    foreach (explode('&', $q === false ? '' : substr($target, $q + 1)) as $pair) {
        if (str_starts_with($pair, 'name=')) {
            $name = substr($pair, 5);
            if (preg_match('/^[A-Za-z0-9_-]{1,64}$/D', $name) === 1) {
                return ['room', $name];
            }
            break;
        }
    }
    return ['error', "name must be 1 to 64 letters, digits, '-' or '_'"];
}

/**
 * Validates an opening handshake (RFC 6455 §4.2.1) as workloads::ws::accept
 * does: the Sec-WebSocket-Accept to answer, or BadRequest with the one-line
 * reason for the 400, the same reasons in the same order.
 *
 * @param array<string, string> $headers header values by lower-case name
 */
function ws_accept(string $method, array $headers): string
{
    $lists = static function (string $value, string $token): bool {
        foreach (explode(',', $value) as $t) {
            if (strcasecmp(trim($t), $token) === 0) {
                return true;
            }
        }
        return false;
    };
    if ($method !== 'GET') {
        throw new BadRequest('a WebSocket handshake is a GET');
    }
    if (!$lists($headers['upgrade'] ?? '', 'websocket')) {
        throw new BadRequest('no Upgrade: websocket');
    }
    if (!$lists($headers['connection'] ?? '', 'upgrade')) {
        throw new BadRequest('no Connection: Upgrade');
    }
    if (trim($headers['sec-websocket-version'] ?? '') !== '13') {
        throw new BadRequest('Sec-WebSocket-Version must be 13');
    }
    if (!isset($headers['sec-websocket-key'])) {
        throw new BadRequest('no Sec-WebSocket-Key');
    }
    $key = trim($headers['sec-websocket-key']);
    $raw = base64_decode($key, true);
    if ($raw === false || strlen($raw) !== 16) {
        throw new BadRequest('Sec-WebSocket-Key is not 16 bytes in base64');
    }
    return base64_encode(sha1($key . '258EAFA5-E914-47DA-95CA-C5AB0DC85B11', true));
}

function sqrt_sum(int $n): float
{
    $s = 0.0;
    for ($i = 1; $i <= $n; $i++) {
        $s += sqrt($i);
    }
    return $s;
}

/** 6 decimals, '.' separator, no thousands separator: 21097.455887 */
function format_sum(float $s): string
{
    return number_format($s, 6, '.', '');
}

function sleep_sql(int $ms): string
{
    return sprintf('SELECT 1 FROM (SELECT SLEEP(%d.%03d)) t', intdiv($ms, 1000), $ms % 1000);
}

/**
 * `a=1&b=2` -> ['a' => '1', 'b' => '2']; percent-decoded; the last of
 * repeated keys wins; unknown keys are kept and ignored by the routes.
 *
 * @return array<string, string>
 */
function parse_query(string $query): array
{
    $out = [];
    if ($query === '') {
        return $out;
    }
    foreach (explode('&', $query) as $pair) {
        if ($pair === '') {
            continue;
        }
        $eq = strpos($pair, '=');
        if ($eq === false) {
            $out[urldecode($pair)] = '';
        } else {
            $out[urldecode(substr($pair, 0, $eq))] = urldecode(substr($pair, $eq + 1));
        }
    }
    return $out;
}

/**
 * Decimal digits only: `abc`, `1e3`, `-1`, `+1`, `1.0`, `` are rejected.
 *
 * @param array<string, string> $params
 */
function int_param(array $params, string $name, int $min, int $max, ?int $default): ?int
{
    if (!array_key_exists($name, $params)) {
        return $default;
    }
    $v = $params[$name];
    if ($v === '' || strlen($v) > 18 || strspn($v, '0123456789') !== strlen($v)) {
        throw new BadRequest("bad $name: must be an integer in $min..=$max");
    }
    $i = (int) $v;
    if ($i < $min || $i > $max) {
        throw new BadRequest("bad $name: must be an integer in $min..=$max");
    }
    return $i;
}

/**
 * `conn=new`: a connection opened for this request; `conn=pool` or absent:
 * the stack's pooled/persistent connection.
 *
 * @param array<string, string> $params
 */
function conn_param(array $params): bool
{
    $c = $params['conn'] ?? 'pool';
    if ($c === 'new') {
        return true;
    }
    if ($c === 'pool') {
        return false;
    }
    throw new BadRequest('bad conn: must be new or pool');
}

/**
 * The /config document. Stack facts come from the adapter; the PHP facts
 * (runtime, opcache, jit, debug) are read here from the running process,
 * in the process that serves the request (a worker).
 *
 * Any other key of $facts is appended after the common fields: the stack's
 * own details, `source` (how each field was obtained) and `configured` (the
 * fields that could only be configured, not read back). `debug` is also
 * true when $facts['debug'] is (e.g. a debug build of the server).
 *
 * @param array<string, mixed> $facts
 */
/**
 * BENCH_SEED_ERROR_BODIES=1: answer a failed query as the seed benchmark's
 * handlers did (HTTP 200 {"db":"error"}) instead of the contract's 503.
 * Only `harness reproduce` sets it, and /config says so.
 */
function seed_error_bodies(): bool
{
    return getenv('BENCH_SEED_ERROR_BODIES') === '1';
}

function config_json(array $facts): string
{
    [$opcache, $jit] = opcache_state();
    $doc = [
        'server' => $facts['server'] ?? null,
        'model' => $facts['model'] ?? null,
        'runtime' => 'php ' . PHP_VERSION,
        'workers' => $facts['workers'] ?? null,
        'db_pool' => $facts['db_pool'] ?? null,
        'opcache' => $opcache,
        'jit' => $jit,
        'debug' => debug_on() || !empty($facts['debug']),
    ];
    if (seed_error_bodies()) {
        $doc['seed_error_bodies'] = true;
    }
    $doc += $facts;
    return json_encode($doc, JSON_UNESCAPED_SLASHES | JSON_THROW_ON_ERROR);
}

/**
 * How the PHP facts of config_json() are obtained, for a `source` map.
 *
 * @return array<string, string>
 */
function php_sources(): array
{
    return [
        'runtime' => 'read: PHP_VERSION',
        'opcache' => 'read: opcache_get_status() in the process that answered',
        'jit' => 'read: opcache_get_status()[jit][on], mode from ini_get(opcache.jit), in the process that answered',
        'debug' => 'read: display_errors, zend.assertions, xdebug/pcov/blackfire loaded',
    ];
}

/**
 * The PHP settings that shape a benchmark, as the running process has them
 * (ini_get() at run time: after php.ini, conf.d, -d and the SAPI's own).
 *
 * @return array<string, mixed>
 */
function php_runtime_facts(): array
{
    $ini = [];
    foreach ([
        'opcache.enable', 'opcache.enable_cli', 'opcache.jit', 'opcache.jit_buffer_size',
        'opcache.validate_timestamps', 'memory_limit', 'display_errors', 'zend.assertions',
    ] as $k) {
        $v = ini_get($k);
        $ini[$k] = $v === false ? null : $v;
    }
    return ['sapi' => PHP_SAPI, 'zts' => PHP_ZTS === 1, 'ini' => $ini];
}

/** Threads of a process (`Threads:` of /proc/PID/status), null if unknown. */
function proc_threads(int|string $pid = 'self'): ?int
{
    $status = @file_get_contents("/proc/$pid/status");
    if ($status === false || !preg_match('/^Threads:\s+(\d+)/m', $status, $m)) {
        return null;
    }
    return (int) $m[1];
}

/** Whether process $pid runs (exists and is not a zombie). */
function proc_alive(int $pid): bool
{
    $stat = @file_get_contents("/proc/$pid/stat");
    if ($stat === false) {
        return false;
    }
    $state = substr($stat, strrpos($stat, ')') + 2, 1);
    return $state !== 'Z' && $state !== 'X';
}

/**
 * [opcache enabled for this SAPI, JIT mode]: the JIT is reported only when
 * OPcache says it is really on (a jit_buffer_size of 0, opcache.jit=off from
 * a later conf.d file, or an incompatible extension all leave it off).
 *
 * @return array{0: bool, 1: string}
 */
function opcache_state(): array
{
    if (!function_exists('opcache_get_status')) {
        return [false, 'off'];
    }
    $st = @opcache_get_status(false);
    if (!is_array($st) || empty($st['opcache_enabled'])) {
        return [false, 'off'];
    }
    if (empty($st['jit']['on'])) {
        return [true, 'off'];
    }
    $mode = strtolower((string) ini_get('opcache.jit'));
    $mode = match ($mode) {
        'tracing', 'on', '1254', '1255' => 'tracing',
        'function', '1205' => 'function',
        default => $mode,
    };
    return [true, $mode];
}

/** Anything that makes PHP slower or chattier than production. */
function debug_on(): bool
{
    $display = strtolower((string) ini_get('display_errors'));
    if (!in_array($display, ['', '0', 'off', 'false', 'no', 'none'], true)) {
        return true;
    }
    if (extension_loaded('xdebug') || extension_loaded('pcov') || extension_loaded('blackfire')) {
        return true;
    }
    return ini_get('zend.assertions') === '1';
}

// ---------------------------------------------------------------------------
// Database access helpers shared by the adapters.

/**
 * DB_HOST (127.0.0.1), DB_PORT (3306), DB_USER (bench), DB_PASSWORD (bench),
 * DB_NAME (bench) from the environment.
 *
 * @return array{host: string, port: int, user: string, password: string, name: string}
 */
function db_env(): array
{
    $env = static function (string $k, string $default): string {
        $v = getenv($k);
        return ($v === false || $v === '') ? $default : $v;
    };
    return [
        'host' => $env('DB_HOST', '127.0.0.1'),
        'port' => (int) $env('DB_PORT', '3306'),
        'user' => $env('DB_USER', 'bench'),
        'password' => $env('DB_PASSWORD', 'bench'),
        'name' => $env('DB_NAME', 'bench'),
    ];
}

/** PDO options every stack shares: exceptions, and a dead database fails fast. */
function pdo_options(bool $persistent = false): array
{
    return [
        \PDO::ATTR_ERRMODE => \PDO::ERRMODE_EXCEPTION,
        \PDO::ATTR_TIMEOUT => 2, // connect timeout, seconds
        \PDO::ATTR_PERSISTENT => $persistent,
    ];
}

/**
 * A PDO with the settings every stack shares: exceptions on error and a
 * 2 s connect timeout, so a dead database fails fast (503) instead of
 * hanging a worker.
 */
function pdo_connect(bool $persistent = false): \PDO
{
    $e = db_env();
    $dsn = "mysql:host={$e['host']};port={$e['port']};dbname={$e['name']};charset=utf8mb4";
    return new \PDO($dsn, $e['user'], $e['password'], pdo_options($persistent));
}

/**
 * Run $sql and return the first column of the first row. $pdo is a \PDO or
 * a proxy with the same methods (Swoole\Database\PDOProxy).
 */
function pdo_scalar(object $pdo, string $sql): int
{
    $stmt = $pdo->query($sql);
    $v = $stmt->fetchColumn();
    $stmt->closeCursor();
    if ($v === false) {
        throw new DbUnavailable('no row');
    }
    return (int) $v;
}

/**
 * `conn=new`: a non-persistent PDO for this query only, closed after it.
 */
function fresh_query(string $sql): int
{
    $pdo = pdo_connect(false);
    try {
        return pdo_scalar($pdo, $sql);
    } finally {
        $pdo = null; // closes the connection (COM_QUIT)
    }
}

/**
 * A PDO kept for the lifetime of a long-running worker (RoadRunner,
 * FrankenPHP): connected lazily, dropped after any failure so that the next
 * request reconnects, which is how the worker recovers when the database
 * comes back.
 */
final class WorkerConnection
{
    private ?\PDO $pdo = null;

    public function query(string $sql, bool $fresh): int
    {
        if ($fresh) {
            return fresh_query($sql);
        }
        try {
            $this->pdo ??= pdo_connect(false);
            return pdo_scalar($this->pdo, $sql);
        } catch (\Throwable $e) {
            $this->pdo = null;
            throw $e;
        }
    }
}

/**
 * Write [status, type, body, headers] as an HTTP/1 response through the SAPI
 * (php-fpm, FrankenPHP). Content-Length is always set by us: nginx would
 * otherwise answer HTTP/1.1 clients chunked and HTTP/1.0 clients with a
 * close.
 *
 * @param array{0: int, 1: string, 2: string, 3: array<string, string>} $r
 */
function emit_sapi(string $method, array $r): void
{
    [$status, $type, $body, $headers] = $r;
    http_response_code($status);
    header('Content-Type: ' . $type);
    header('Content-Length: ' . strlen($body));
    foreach ($headers as $k => $v) {
        header($k . ': ' . $v);
    }
    if ($method !== 'HEAD') {
        echo $body;
    }
}
