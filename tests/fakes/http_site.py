"""A small website on a real 127.0.0.1 socket (stdlib http.server), for the HTTP tools.

Routes: `/page` an HTML page, `/echo` the method, Host header and body it got as JSON,
`/big?n=N` N bytes of text, `/to?url=U` a 302 to U, `/loop` a 302 to itself,
`/image` a few bytes of image/png, `/searx/search?q=Q&format=json` a SearXNG JSON answer
with three results for Q (`format=html`, SearXNG's default, is HTML). `requests` lists
(method, path, headers) seen.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

PAGE = """<!doctype html><html><head><title>Crab  facts</title>
<style>body { color: red }</style><script>document.write("tracking")</script></head>
<body><h1>Crabs</h1><p>Crabs walk <b>sideways</b>. See <a href="/more">more</a>.</p>
<ul><li>ten legs</li><li>hard shell</li></ul><pre>  indented
    code</pre></body></html>"""


class _Handler(BaseHTTPRequestHandler):
    server: _Site

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""

    def _send(self, status: int, body: bytes, kind: str, **headers: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        for key, value in headers.items():
            self.send_header(key.replace("_", "-"), value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _handle(self) -> None:
        url = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        self.server.requests.append((self.command, self.path, dict(self.headers.items())))
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if url.path == "/page":
            self._send(200, PAGE.encode(), "text/html; charset=utf-8")
        elif url.path == "/echo":
            seen = {
                "method": self.command,
                "host": self.headers.get("Host"),
                "body": body.decode(),
                "authorization": self.headers.get("Authorization"),
            }
            self._send(200, json.dumps(seen).encode(), "application/json")
        elif url.path == "/big":
            self._send(200, b"x" * int(query.get("n", "100000")), "text/plain")
        elif url.path == "/to":
            self._send(302, b"", "text/plain", Location=query["url"])
        elif url.path == "/loop":
            self._send(302, b"", "text/plain", Location="/loop")
        elif url.path == "/searx/search" and query.get("format") == "json":
            results = [
                {
                    "url": f"https://example.org/{n}",
                    "title": f"{query['q']} #{n}",
                    "content": f"About {query['q']} & more <{n}>",
                    "engine": "fake",
                }
                for n in (1, 2, 3)
            ]
            answer = {"query": query["q"], "number_of_results": 3, "results": results}
            self._send(200, json.dumps(answer).encode(), "application/json")
        elif url.path == "/searx/search":
            self._send(200, PAGE.encode(), "text/html; charset=utf-8")
        elif url.path == "/image":
            self._send(200, b"\x89PNG\r\n\x1a\n0000", "image/png")
        else:
            self._send(404, b"not found", "text/plain")

    do_GET = do_POST = do_PUT = do_HEAD = do_DELETE = _handle


class _Site(ThreadingHTTPServer):
    daemon_threads = True
    requests: list[tuple[str, str, dict[str, str]]]


@contextmanager
def http_site() -> Iterator[tuple[str, _Site]]:
    """Serve the site on 127.0.0.1 (a free port) until the block ends: (base URL, server)."""
    server = _Site(("127.0.0.1", 0), _Handler)
    server.requests = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=30)
