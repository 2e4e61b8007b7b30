"""moto's S3 server with S3's atomic conditional writes: `python tests/moto_atomic.py HOST PORT`.

moto answers a conditional PUT (If-None-Match: *) by looking the key up and then storing the object,
two steps that two of its server threads can interleave: both writers pass the look-up and both get
200, where S3 decides atomically and answers the second with 412. `Location.create_exclusive` relies
on S3's answer, so the tests run moto's own application behind one lock for the requests that change
objects (PUT, POST, DELETE); reads still run side by side. Everything else is moto's standalone
server as `moto_server -H HOST -p PORT` starts it.
"""

from __future__ import annotations

import signal
import sys
import threading

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import run_simple

_WRITES = frozenset({"PUT", "POST", "DELETE"})


class AtomicWrites:
    """A WSGI application that hands moto one write at a time."""

    def __init__(self, app):
        self.app = app
        self.lock = threading.Lock()

    def __call__(self, environ, start_response):
        if environ.get("REQUEST_METHOD") not in _WRITES:
            return self.app(environ, start_response)
        with self.lock:
            return self.app(environ, start_response)


def main(host: str, port: int) -> None:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    app = DomainDispatcherApplication(create_backend_app)
    run_simple(host, port, AtomicWrites(app), threaded=True, request_handler=MotoRequestHandler)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
