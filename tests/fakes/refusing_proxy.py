"""An HTTP(S) proxy on 127.0.0.1 that forwards nothing and records what it was asked.

A real coding CLI run with `HTTPS_PROXY` / `HTTP_PROXY` pointing here can reach no host
but those in `NO_PROXY` (the fake model server); every request it tried to send
elsewhere (a `CONNECT host:443` or a plain `GET http://…`) is refused with 403 and kept
in `asked`, so a test can show that nothing left for a real host.

    with RefusingProxy() as proxy:
        env = {"HTTPS_PROXY": proxy.url, "HTTP_PROXY": proxy.url, "NO_PROXY": "127.0.0.1"}
        ...
        assert proxy.asked == []
"""

from __future__ import annotations

import socket
import threading

REFUSAL = b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


class RefusingProxy:
    """A listening socket in a thread; `asked` holds each request line it refused."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self._lock = threading.Lock()
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self._listener.settimeout(0.2)
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> RefusingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self._listener.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            head = b""
            with client:
                client.settimeout(5)
                try:
                    head = client.recv(4096)
                    client.sendall(REFUSAL)
                except OSError:
                    pass  # a client that gave up: what it sent (if anything) is recorded
                line = head.split(b"\r\n", 1)[0].decode("latin-1", "replace")
                with self._lock:
                    self.asked.append(line or "(nothing sent)")
