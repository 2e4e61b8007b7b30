"""A fault-injecting HTTP proxy for tests: it sits between s3fs and the loopback S3 server.

Every request is forwarded to the upstream server (moto) unless a rule of the fault plan matches
it; then the proxy answers as a struggling object store would:

- ``error``: an S3-style error reply (XML body with Code and Message) without reaching the store,
  such as 500 InternalError or 503 SlowDown; botocore classifies these by status and code.
- ``drop``: close the connection before the request reaches the store (a reset connection).
- ``lose_response``: forward the request (the store acts on it), then close the connection without
  a reply: the client cannot tell whether its PUT happened.
- ``truncate``: forward the request, send the status line, the headers (with the full
  Content-Length) and half of the body, then close: a connection dropped mid-response.

A rule matches by HTTP method and a regular expression searched in the request target (path and
query string, e.g. ``/bucket/run/work/commits/`` or ``list-type=2``); ``skip``, ``every`` and
``times`` script which of the matching requests it hits (the first rule that hits wins). The
proxy counts what it saw and what it injected, per rule, so a test can check that its faults were
really exercised. Standard library only; one thread per connection.

Point clients at it through the endpoint (``AWS_ENDPOINT_URL_S3=proxy.endpoint``), so every
process that uses the standard AWS chain (the flow and the scoring subprocesses alike) goes
through it.
"""

from __future__ import annotations

import http.client
import http.server
import re
import socket
import struct
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from socketserver import ThreadingMixIn

KINDS = ("error", "drop", "lose_response", "truncate")

# Headers that describe one hop's connection, not the message: never forwarded either way.
_HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade"})

_MESSAGES = {
    "SlowDown": "Please reduce your request rate.",
    "InternalError": "We encountered an internal error. Please try again.",
    "ServiceUnavailable": "Service is unable to handle request.",
}


@dataclass
class Rule:
    """One scripted fault: which requests it hits and how."""

    name: str
    kind: str
    target: str = ""  # regular expression searched in the request target (path?query)
    method: str | None = None  # GET, PUT, HEAD, POST, DELETE; None: any
    status: int = 500  # for kind "error"
    code: str = "InternalError"  # for kind "error"
    skip: int = 0  # let the first `skip` matching requests through
    every: int = 1  # then hit every `every`-th matching request ...
    times: int | None = None  # ... at most `times` times (None: forever)
    seen: int = 0  # matching requests so far
    injected: int = 0  # faults injected so far
    _pattern: re.Pattern = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}; expected one of {KINDS}")
        if self.every < 1:
            raise ValueError("every must be at least 1")
        self._pattern = re.compile(self.target)

    def matches(self, method: str, target: str) -> bool:
        return (self.method is None or self.method == method) and bool(self._pattern.search(target))

    def hit(self) -> bool:
        """Count one matching request; True when this one gets the fault."""
        self.seen += 1
        n = self.seen - self.skip
        if n <= 0 or (n - 1) % self.every or (self.times is not None and self.injected >= self.times):
            return False
        self.injected += 1
        return True


@dataclass(frozen=True)
class Exchange:
    """What the proxy did with one request: forwarded (upstream status) and/or which rule hit it."""

    method: str
    target: str
    rule: str | None
    kind: str | None
    upstream_status: int | None
    at: float = field(default_factory=time.monotonic)  # when the proxy answered (or dropped) it


class FaultProxy:
    """A threaded HTTP proxy on a free loopback port in front of `upstream` (http://host:port)."""

    def __init__(self, upstream: str):
        match = re.fullmatch(r"http://([^:/]+):(\d+)/?", upstream)
        if not match:
            raise ValueError(f"upstream must be http://host:port, not {upstream!r}")
        self.upstream = (match.group(1), int(match.group(2)))
        self.rules: list[Rule] = []
        self.log: list[Exchange] = []
        self._lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.proxy = self
        self.port = self._server.server_address[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="faultproxy", daemon=True)
        self._thread.start()

    # -- the fault plan ------------------------------------------------------------------------
    def add(self, name: str, kind: str, target: str = "", method: str | None = None, **options) -> Rule:
        rule = Rule(name, kind, target, method, **options)
        with self._lock:
            if any(r.name == name for r in self.rules):
                raise ValueError(f"a rule named {name!r} exists already")
            self.rules.append(rule)
        return rule

    def remove(self, name: str) -> None:
        """Remove one rule (its exchanges stay in the log): the fault it injected is over."""
        with self._lock:
            self.rules = [r for r in self.rules if r.name != name]

    def clear(self) -> None:
        """Remove every rule and forget the log: from now on the proxy only forwards."""
        with self._lock:
            self.rules.clear()
            self.log.clear()

    def injected(self) -> dict[str, int]:
        """Faults injected so far, per rule name."""
        with self._lock:
            return {r.name: r.injected for r in self.rules}

    def exchanges(self, rule: str | None = None) -> list[Exchange]:
        with self._lock:
            return [e for e in self.log if rule is None or e.rule == rule]

    def requests(self) -> Counter:
        """Requests seen per method."""
        with self._lock:
            return Counter(e.method for e in self.log)

    def _decide(self, method: str, target: str) -> Rule | None:
        with self._lock:
            for rule in self.rules:
                if rule.matches(method, target) and rule.hit():
                    return rule
        return None

    def _record(self, exchange: Exchange) -> None:
        with self._lock:
            self.log.append(exchange)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _Server(ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64
    proxy: FaultProxy


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as clients use real stores
    server: _Server

    def log_message(self, format, *args) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        self._proxy()

    do_PUT = do_POST = do_HEAD = do_DELETE = do_PATCH = do_OPTIONS = do_GET

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            parts = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):  # trailers
                        pass
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _drop(self, reset: bool = True) -> None:
        """Close the client's connection now: with a reset (RST), or after what was sent (FIN)."""
        self.close_connection = True
        try:
            self.wfile.flush()
            if reset:
                # SO_LINGER 0: the client sees a reset, as when a load balancer drops a connection.
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.connection.close()
            else:
                self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _proxy(self) -> None:
        proxy = self.server.proxy
        method, target = self.command, self.path
        body = self._read_body()
        rule = proxy._decide(method, target)
        kind = rule.kind if rule else None

        if kind == "error":
            proxy._record(Exchange(method, target, rule.name, kind, None))
            self._send_error_reply(rule.status, rule.code, target)
            return
        if kind == "drop":
            proxy._record(Exchange(method, target, rule.name, kind, None))
            self._drop()
            return

        try:
            status, reason, headers, payload = self._forward(method, target, body)
        except OSError as exc:  # upstream unreachable: answer like a gateway
            proxy._record(Exchange(method, target, None, None, None))
            self._send_error_reply(502, "BadGateway", target, str(exc))
            return
        proxy._record(Exchange(method, target, rule.name if rule else None, kind, status))
        if kind == "lose_response":
            self._drop()
            return
        self.send_response(status, reason)
        for name, value in headers:
            self.send_header(name, value)
        if method != "HEAD" or not any(n.lower() == "content-length" for n, _ in headers):
            self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if method == "HEAD":
            return
        if kind == "truncate":
            self.wfile.write(payload[: len(payload) // 2])
            self._drop(reset=False)  # the half body arrives, then the end of the stream
            return
        self.wfile.write(payload)

    def _forward(self, method: str, target: str, body: bytes) -> tuple[int, str, list[tuple[str, str]], bytes]:
        host, port = self.server.proxy.upstream
        conn = http.client.HTTPConnection(host, port, timeout=60)
        try:
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP and k.lower() != "expect"}
            headers["Content-Length"] = str(len(body))
            conn.request(method, target, body=body if body or method in ("PUT", "POST") else None, headers=headers)
            response = conn.getresponse()
            payload = response.read()
            kept = [(k, v) for k, v in response.getheaders() if k.lower() not in _HOP_BY_HOP and k.lower() != "content-length"]
            if method == "HEAD":
                length = response.getheader("Content-Length")
                if length is not None:
                    kept.append(("Content-Length", length))
            return response.status, response.reason, kept, payload
        finally:
            conn.close()

    def _send_error_reply(self, status: int, code: str, target: str, message: str | None = None) -> None:
        request_id = uuid.uuid4().hex[:16].upper()
        body = (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            f"<Error><Code>{code}</Code><Message>{message or _MESSAGES.get(code, code)}</Message>"
            f"<Resource>{target.split('?')[0]}</Resource><RequestId>{request_id}</RequestId></Error>"
        ).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("x-amz-request-id", request_id)
        if status == 503:
            self.send_header("Retry-After", "1")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
