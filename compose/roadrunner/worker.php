<?php

/**
 * RoadRunner worker around compose/php/contract.php: spiral/roadrunner-http
 * (PSR-7 with nyholm/psr7). RoadRunner (Go) owns the HTTP connections; each
 * of the pool.num_workers PHP processes handles one request at a time and
 * keeps one PDO connection for its lifetime (reconnecting after a failure).
 */

declare(strict_types=1);

require __DIR__ . '/vendor/autoload.php';
require_once __DIR__ . '/../php/contract.php';
require_once __DIR__ . '/../php/request_uri.php';

use Nyholm\Psr7\Factory\Psr17Factory;
use Nyholm\Psr7\Response;
use Spiral\Goridge\RPC\RPC;
use Spiral\RoadRunner\Environment;
use Spiral\RoadRunner\Http\PSR7Worker;
use Spiral\RoadRunner\Worker;

$factory = new Psr17Factory();
// A request without Host (HTTP/1.0) reaches PHP as "http:///path", which
// nyholm/psr7 cannot parse: its URI is built from the path and query instead.
$psr7 = new PSR7Worker(Worker::create(), new Bench\HostlessUriRequests($factory), $factory, $factory);

$conn = new Bench\WorkerConnection();
$db = $conn->query(...);

// /config: the live worker count from RoadRunner's informer over RPC (the
// rpc section of .rr.yaml); RR_NUM_WORKERS if RPC is not configured.
$facts = static function (): array {
    $workers = null;
    try {
        $rpc = RPC::create(Environment::fromGlobals()->getRPCAddress());
        $list = $rpc->call('informer.Workers', 'http');
        if (is_array($list) && isset($list['workers']) && is_array($list['workers'])) {
            $workers = count($list['workers']);
        }
    } catch (\Throwable) {
        $env = getenv('RR_NUM_WORKERS');
        $workers = $env !== false && $env !== '' ? (int) $env : null;
    }
    return [
        'server' => 'roadrunner',
        'model' => 'worker-pool',
        'workers' => $workers,
        'db_pool' => $workers, // one connection per worker process
        // the http plugin's requests arrive as protobuf: decoded by
        // ext-protobuf when loaded, else in pure PHP (google/protobuf)
        'protobuf' => extension_loaded('protobuf') ? 'ext-protobuf ' . phpversion('protobuf') : 'pure php (google/protobuf)',
        'websocket' => null,
        'websocket_unsupported' => 'RoadRunner has no WebSocket server of its own since 2.12, where its websockets '
            . 'and broadcast plugins were replaced by the centrifuge plugin: a WebSocket is held by a separate '
            . 'Centrifugo server, which speaks its own protocol and forwards events to PHP workers over gRPC; '
            . 'a worker serves one request at a time and never holds the connection',
    ];
};

while (true) {
    try {
        $request = $psr7->waitRequest();
        if ($request === null) {
            break; // RoadRunner asked the worker to stop
        }
    } catch (\Throwable $e) {
        // the same face as every answer: Server here, Date from Go's net/http
        $psr7->respond(new Response(400, [
            'Content-Type' => 'text/plain',
            'Content-Length' => '11',
            'Server' => 'roadrunner',
        ], 'bad request'));
        continue;
    }

    try {
        $uri = $request->getUri();
        $query = $uri->getQuery();
        $method = $request->getMethod();
        [$status, $type, $body, $headers] = Bench\handle(
            $method,
            $uri->getPath() . ($query !== '' ? '?' . $query : ''),
            $db,
            $facts,
            static fn (): string => (string) $request->getBody(),
        );
        $headers['Content-Type'] = $type;
        $headers['Content-Length'] = (string) strlen($body);
        $headers['Server'] = 'roadrunner'; // Go's net/http sets Date, not Server
        // HEAD: Go's net/http never writes a body, but keeps our Content-Length
        $psr7->respond(new Response($status, $headers, $method === 'HEAD' ? '' : $body));
    } catch (\Throwable $e) {
        $psr7->getWorker()->error((string) $e);
    }
}
