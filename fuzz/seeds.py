#!/usr/bin/env python3
"""Writes the seed corpora under fuzz/corpus/ (committed; rerun to remake).

The HTTP seeds are the contract's own requests and the conformance
section's probes (workloads/src/contract.rs, conformance.rs); the response
seeds are what the reference servers and hyper answer; the MySQL seeds a
MariaDB answer to SELECT 1 in both EOF styles; the .hlog and results.json
seeds are small files of the formats the harness writes and reads
(results.json: trimmed from a real compare and reproduce run, given as
arguments: seeds.py [COMPARE_RESULTS_JSON REPRODUCE_RESULTS_JSON])."""
import hashlib
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def put(target, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("latin-1")
    with open(os.path.join(d, hashlib.sha1(data).hexdigest()[:16]), "wb") as f:
        f.write(data)


H = "Host: verify\r\n"
FOLLOW = "GET /hello HTTP/1.1\r\nHost: verify\r\n\r\n"
HIDDEN = "GET /nope HTTP/1.1\r\nHost: verify\r\n\r\n"
contract = [
    f"GET {t} HTTP/1.1\r\n{H}\r\n"
    for t in ["/", "/hello", "/cpu?n=1000", "/cpu?n=abc", "/db", "/db?sleep_ms=10",
              "/work?n=1000", "/work?conn=new", "/db?conn=new", "/sleep?ms=20", "/config", "/nope"]
] + [
    f"HEAD /hello HTTP/1.1\r\n{H}\r\n",
    "HEAD /url HTTP/1.1\r\n\r\n",
    f"POST /hello HTTP/1.1\r\n{H}Content-Length: 5\r\n\r\nhello",
    f"DELETE /hello HTTP/1.1\r\n{H}\r\n",
    "GET /hello HTTP/1.0\r\n\r\n",
    "GET /hello HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
    f"GET /hello HTTP/1.1\r\n{H}Connection: close\r\n\r\n",
    f"GET /hello HTTP/1.1\r\n{H}Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n\x81\x85\x37\xfa\x21\x3d\x7f",
]
conformance = [
    f"\r\nGET /hello HTTP/1.1\r\n{H}\r\n",
    f"get /hello HTTP/1.1\r\n{H}\r\n",
    f"PURGE /hello HTTP/1.1\r\n{H}\r\n",
    f"GE(T /hello HTTP/1.1\r\n{H}\r\n",
    f"GET /hel lo HTTP/1.1\r\n{H}\r\n",
    f"GET http://verify/hello HTTP/1.1\r\n{H}\r\n",
    f"GET /hello HTTP/1.2\r\n{H}\r\n",
    "GET /hello\r\n\r\n",
    f"GET /hello HTTP/1.1\r\n{H}X-Test : 1\r\n\r\n",
    f"GET /hello HTTP/1.1\r\n{H}X-Folded: a\r\n b\r\n\r\n",
    f"GET /hello HTTP/1.1\r\n{H}X(Bad): 1\r\n\r\n",
    f"GET /hello HTTP/1.1\r\n{H}X-Test: a\rb\r\n\r\n",
    f"GET /hello HTTP/1.1\r\n{H}X-Test: a\0b\r\n\r\n",
    "GET /hello HTTP/1.1\r\nHost: verify\r\nHost: other\r\n\r\n",
    "GET /hello HTTP/1.1\r\nHost: ver ify\r\n\r\n",
    "GET /hello HTTP/1.1\r\nHost: my_host\r\n\r\n",
    f"POST /hello HTTP/1.1\r\n{H}Content-Length: {len(HIDDEN)}\r\nContent-Length: {len(HIDDEN)}\r\n\r\n{HIDDEN}{FOLLOW}",
    f"POST /hello HTTP/1.1\r\n{H}Content-Length: 1\r\nContent-Length: {len(HIDDEN)}\r\n\r\n{HIDDEN}{FOLLOW}",
    f"POST /hello HTTP/1.1\r\n{H}Content-Length: +{len(HIDDEN)}\r\n\r\n{HIDDEN}{FOLLOW}",
    f"POST /hello HTTP/1.1\r\n{H}Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n{HIDDEN}",
    f"POST /hello HTTP/1.1\r\n{H}Transfer-Encoding: chunked, gzip\r\n\r\n0\r\n\r\n{HIDDEN}",
    f"POST /hello HTTP/1.1\r\n{H}Transfer-Encoding: foo, chunked\r\n\r\n0\r\n\r\n",
    f"POST /hello HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n{HIDDEN}",
    f"POST /hello HTTP/1.1\r\n{H}Transfer-Encoding: chunked\r\n\r\n{len(HIDDEN):X}\r\n{HIDDEN}\r\n0\r\n\r\n{FOLLOW}",
    f"GET /hello HTTP/1.1\r\n{H}Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n",
    "CONNECT verify:443 HTTP/1.1\r\nHost: verify:443\r\n\r\n",
    f"GET * HTTP/1.1\r\n{H}\r\n",
    f"OPTIONS * HTTP/1.1\r\n{H}\r\n",
    f"GET /hello\xff HTTP/1.1\r\n{H}\r\n",
    "GET /hello HTTP/1.1\r\nHost:\r\n\r\n",
    f"GET /hello HTTP/1.1\r\n{H}X-Pad: {'a' * 8200}\r\n\r\n",
]
# POST /echo: bodies the codec frames (Content-Length, chunked with an
# extension and a trailer) and the body-framing rows' malformed chunk lines
# (workloads/src/echo.rs, framing.rs).
E = f"POST /echo HTTP/1.1\r\n{H}"
bodies = [
    f"{E}Content-Length: 11\r\n\r\nhello\r\n\0\xffxx",
    f"{E}Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nA;ext=1\r\n, world!!!\r\n0\r\nX-Trailer: 1\r\n\r\n{FOLLOW}",
    f"{E}Content-Length: 44\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n{HIDDEN}",
    f"{E}Transfer-Encoding: chunked\r\n\r\nzz\r\n{HIDDEN}\r\n0\r\n\r\n",
    f"{E}Transfer-Encoding: chunked\r\n\r\n0x{len(HIDDEN):x}\r\n{HIDDEN}\r\n0\r\n\r\n",
    f"{E}Transfer-Encoding: chunked\r\n\r\n3\r\nhello\r\n0\r\n\r\n{FOLLOW}",
    f"{E}Content-Length: 1048577\r\n\r\n",
    f"{E}Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\n{FOLLOW}",
]
# Chunk-size lines, the conformance rows' and the grammar's edges (RFC 9112
# §7.1.1): the ones RFC 9112 refuses (a bare `;`, a name that is not a
# token, a control character, whitespace before the CRLF) and ones it
# allows (BWS around `;` and `=`, quoted-strings with escapes).
n = f"{len(HIDDEN):x}"
chunk_lines = [
    n, n.upper(), "0", "000", f"{n};", f"{n};n@me=v", f"{n};name=va\x01lue", f"{n} ", f"{n}\t",
    f"{n};name=value", f"{n} ; a = b", f"{n};a;b=c;d=\"q \\\" s\"", f"{n};a=\"open", f"{n};=x",
    f"0x{n}", f"-{n}", "zz", "", f"1{len(HIDDEN):016x}", f"{n};a=\"\x7f\"",
]
for line in chunk_lines:
    put("chunk_line", line)
    put("chunk_line", f"{line}\0{HIDDEN}\r\n0\r\nX-Trailer: 1\r\n\r\n")
put("chunk_line", f"{n}\0{HIDDEN}\r\n0\r\n\n")
put("chunk_line", f"{n}\0{HIDDEN}\r\n0\r\nno colon\r\n\r\n")
put("chunk_line", f"3\0hello\r\n0\r\n\r\n")
for r in contract + conformance + bodies:
    put("http1_request", r)
for i, r in enumerate(contract + conformance + bodies):
    put("http1_pipelined", chr(i % 256) + r + FOLLOW)
put("http1_pipelined", "\x07" + FOLLOW + f"GET /nope HTTP/1.1\r\n{H}\r\n" + FOLLOW)
put("http1_pipelined", "\x09" + "".join(contract[:8]))

date = "Date: Tue, 01 Dec 2026 14:00:00 GMT\r\n"
responses = [
    f"HTTP/1.1 200 OK\r\nServer: coroutine\r\n{date}Content-Type: text/plain\r\nContent-Length: 11\r\n\r\nHello World",
    f"HTTP/1.1 200 Ok\r\nServer: M\r\n{date}Content-Length: 11\r\nContent-Type: text/plain\r\n\r\nHello World",
    f"HTTP/1.1 200 OK\r\nserver: event-loop\r\ncontent-type: text/plain\r\ncontent-length: 11\r\ndate: Tue, 01 Dec 2026 14:00:00 GMT\r\n\r\nHello World",
    f"HTTP/1.1 200 OK\r\nServer: coroutine\r\n{date}Content-Type: text/plain\r\nContent-Length: 11\r\n\r\n",
    f"HTTP/1.1 400 Bad Request\r\nServer: coroutine\r\n{date}Content-Type: text/plain\r\nContent-Length: 17\r\nConnection: close\r\n\r\nmalformed request",
    f"HTTP/1.1 503 Service Unavailable\r\nServer: coroutine\r\n{date}Content-Type: text/plain\r\nContent-Length: 14\r\n\r\ndb unavailable",
    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nHello\r\n6;ext=1\r\n World\r\n0\r\nX-Trailer: 1\r\n\r\n",
    "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nHello World",
    "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nHello World",
    "HTTP/1.1 204 No Content\r\n\r\n",
    "HTTP/1.1 304 Not Modified\r\nContent-Length: 11\r\n\r\n",
    "HTTP/1.1 200 OK\r\nContent-Length: 11\r\nContent-Length: 11\r\n\r\nHello World",
    "HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nContent-Length: 5\r\n\r\nHelloHTTP/1.1 200 OK\r\n",
]
for i, r in enumerate(responses):
    for mode in (0, 1, 2, 3):
        put("engine_response", chr(mode + 4 * i) + r)


def pkt(seq, payload):
    return bytes([len(payload) & 0xFF, (len(payload) >> 8) & 0xFF, len(payload) >> 16, seq]) + payload


def lenenc(s):
    return bytes([len(s)]) + s


coldef = b"".join(lenenc(x) for x in [b"def", b"", b"", b"", b"1", b""]) + b"\x0c\x3f\x00\x01\x00\x00\x00\x08\x81\x00\x00\x00\x00"
ok_eof = b"\xfe\x00\x00\x02\x00\x00\x00"
old_eof = b"\xfe\x00\x00\x02\x00"
answers = {
    # deprecate EOF: count, column, row, OK-as-EOF
    1: pkt(1, b"\x01") + pkt(2, coldef) + pkt(3, lenenc(b"1")) + pkt(4, ok_eof),
    0: pkt(1, b"\x01") + pkt(2, coldef) + pkt(3, old_eof) + pkt(4, lenenc(b"1")) + pkt(5, old_eof),
}
for mode, a in answers.items():
    put("mysql_packets", bytes([mode]) + a)
    put("mysql_packets", bytes([mode | 6]) + a)
put("mysql_packets", b"\x01" + pkt(1, b"\x00\x00\x00\x02\x00\x00\x00"))
put("mysql_packets", b"\x01" + pkt(1, b"\xff\x15\x04#28000Access denied for user"))
put("mysql_packets", b"\x01" + pkt(1, b"\x01") + pkt(2, coldef) + pkt(3, b"\xfb") + pkt(4, ok_eof))
put("mysql_packets", b"\x00" + pkt(0, b"\x0a5.5.5-10.11.6-MariaDB\x00\x2a\x00\x00\x00abcdefgh\x00\xfe\xf7\x08\x02\x00\xff\x81\x15" + b"\x00" * 10 + b"ijklmnopqrst\x00mysql_native_password\x00"))

hlog_lines = open(os.path.join(HERE, "seeds", "tagged.hlog")).read().splitlines(keepends=True)
put("hlog", "".join(hlog_lines))
put("hlog", "".join(l for l in hlog_lines if not l.startswith("Tag=")))
put("hlog", "".join(l for l in hlog_lines if l.startswith("#[StartTime") or l.startswith("Tag=")))
put("hlog", "#failures connect=1 timeout=2\n" + "".join(hlog_lines[3:6]))
# As `harness run --hlog` writes them: intervals of whole seconds (merge
# takes no other), a failures comment before each.
hists = [l.rsplit(",", 1)[1].strip() for l in hlog_lines if l[0].isdigit()]
whole = "".join(f"#failures timeout={i}\n{i}.000,1.000,0.500,{h}\n" for i, h in enumerate(hists))
put("hlog", "#[StartTime: 1764590000.000 (seconds since epoch)]\n#[BaseTime: 1764590000.000 (seconds since epoch)]\n" + whole)
put("hlog", "#[StartTime: 1764590000.000 (seconds since epoch)]\n" + whole + "".join(f"Tag=agent-1,{i}.000,1.000,0.500,{h}\n" for i, h in enumerate(hists)))


def trim(doc):
    for k, v in list(doc.items()):
        if isinstance(v, list) and len(v) > 2:
            doc[k] = v[:2]
        elif isinstance(v, dict):
            trim(v)
    return doc


for path in sys.argv[1:]:
    doc = trim(json.load(open(path)))
    put("results_json", json.dumps(doc, indent=1))
