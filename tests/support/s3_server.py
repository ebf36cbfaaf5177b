"""A real S3 API server for tests: moto in server mode, and a fault proxy in front of it.

``S3Server`` starts moto's ``ThreadedMotoServer`` on a free port and stops it; ``FaultProxy``
forwards every request to it unchanged, except those a test told it to fail: answered 503
without reaching moto (a put that never happened), or forwarded and then answered 503 (a put
that S3 stored but whose answer was lost).
"""

from __future__ import annotations

import http.client
import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from moto.server import ThreadedMotoServer

from kafka_eos.cluster.ports import free_port

SLOW_DOWN = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message></Error>"
)


def aws_environment(endpoint: str) -> dict[str, str]:
    """The settings a user gives the sink's Python for an S3 endpoint (docs/sink.md#storage);
    moto accepts any credentials."""
    return {
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_REGION": "us-east-1",
        "AWS_ENDPOINT_URL_S3": endpoint,
    }


@contextmanager
def s3_server() -> Iterator[str]:
    """moto's S3 on a free local port, for the duration; yields its endpoint URL."""
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


@dataclass
class Fault:
    """Fail the next ``times`` requests of ``method`` whose path ends with ``suffix``."""

    method: str
    suffix: str
    times: int
    forward: bool  # True: moto gets the request, the client gets 503 (a lost answer)
    seen: int = 0


@dataclass
class FaultProxy:
    """An HTTP proxy to ``upstream`` that answers 503 where a :class:`Fault` says."""

    upstream: str
    faults: list[Fault] = field(default_factory=list)
    requests: list[tuple[str, str, int]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)  # of each request, in order
    strip: frozenset[str] = frozenset()  # request headers (lower case) moto never sees

    def fail(self, method: str, suffix: str, *, times: int, forward: bool) -> Fault:
        fault = Fault(method, suffix, times, forward)
        self.faults.append(fault)
        return fault

    def _match(self, method: str, path: str) -> Fault | None:
        for fault in self.faults:
            mine = fault.method == method and path.split("?")[0].endswith(fault.suffix)
            if mine and fault.seen < fault.times:
                fault.seen += 1
                return fault
        return None

    @contextmanager
    def running(self) -> Iterator[str]:
        """Serve on a free local port; yields the proxy's endpoint URL."""
        proxy = self
        host, port = self.upstream.removeprefix("http://").split(":")

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive and Expect: 100-continue, as boto3 uses

            def log_message(self, *args: object) -> None:
                pass

            def _relay(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                proxy.headers.append({k.lower(): v for k, v in self.headers.items()})
                fault = proxy._match(self.command, self.path)
                status, headers, answer = 503, [("Content-Type", "application/xml")], SLOW_DOWN
                if fault is None or fault.forward:
                    upstream = http.client.HTTPConnection(host, int(port), timeout=30)
                    skip = {"expect", "connection", *proxy.strip}
                    sent = {k: v for k, v in self.headers.items() if k.lower() not in skip}
                    upstream.request(self.command, self.path, body=body, headers=sent)
                    response = upstream.getresponse()
                    answer = response.read()
                    upstream.close()
                    if fault is None:
                        status = response.status
                        drop = {"transfer-encoding", "connection", "content-length"}
                        headers = [
                            (k, v) for k, v in response.getheaders() if k.lower() not in drop
                        ]
                proxy.requests.append((self.command, self.path, status))
                self.send_response(status)
                for key, value in headers:
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(answer)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _relay

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)  # port: the kernel's
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}"
        finally:
            server.shutdown()
            server.server_close()
            thread.join()
