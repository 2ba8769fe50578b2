<?php

/**
 * The request URI a PSR-7 worker can parse, whatever the Host.
 *
 * RoadRunner's http plugin (v5.2.8 handler/request.go, `URI`) builds the
 * URI as "http://" . Host . target: a request without Host (HTTP/1.0 allows
 * it) arrives as "http:///hello", which nyholm/psr7 refuses ("Unable to
 * parse URI"). With no host, the URI is the path and the query alone.
 * compose/roadrunner/worker.php wraps its PSR-17 factory in
 * HostlessUriRequests; a test runs request_uri() under php-cli.
 */

declare(strict_types=1);

namespace Bench;

use Psr\Http\Message\ServerRequestFactoryInterface;
use Psr\Http\Message\ServerRequestInterface;

/** "http:///p?q" (no host) becomes "/p?q"; any other URI is kept as it is. */
function request_uri(string $uri): string
{
    if (preg_match('#^https?://(/.*)?$#s', $uri, $m) === 1) {
        return ($m[1] ?? '') !== '' ? $m[1] : '/';
    }
    return $uri;
}

/** A server-request factory that hands request_uri()'s URI to the one it wraps. */
final class HostlessUriRequests implements ServerRequestFactoryInterface
{
    public function __construct(private readonly ServerRequestFactoryInterface $inner)
    {
    }

    public function createServerRequest(string $method, $uri, array $serverParams = []): ServerRequestInterface
    {
        return $this->inner->createServerRequest($method, is_string($uri) ? request_uri($uri) : $uri, $serverParams);
    }
}
