#!/usr/bin/env python3
"""Idle keep-alive connections for scripts/proxy-bench and scripts/tls-edge-bench.

    idle-connections.py HOST PORT COUNT PATH READY_FILE HOLD_SECONDS [CA_FILE]

Opens COUNT connections to HOST:PORT one after the other; on each, sends one
`GET PATH HTTP/1.1` and reads the whole response (a 200), then leaves the connection
open and idle: a keep-alive connection as a browser or a client library leaves it.
With CA_FILE, each connection is TLS first (ALPN http/1.1, SNI localhost, the server's
certificate verified against CA_FILE for the name localhost): the handshake, the
session tickets and the request all done before it goes idle.
When all are open, writes "COUNT" to READY_FILE (via a rename), then holds them until
SIGTERM or HOLD_SECONDS, whichever comes first. Before exiting it prints how many are
still open (a connection the server closed meanwhile reads end-of-file at once).

Exit status: 0 when all COUNT were opened and none was closed by the server; 1 when it
could not open them all (the error says which one and why); 2 when the server closed
some of them while they were held.
"""

import os
import select
import signal
import socket
import ssl
import sys
import time


def read_response(sock):
    """Reads one HTTP/1.1 response with a 200 status; raises on anything else."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed before the end of the response head")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = lines[0].split()
    if len(status) < 2 or status[1] != b"200":
        raise ConnectionError("answered " + lines[0].decode("latin-1"))
    length = None
    chunked = False
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            length = int(value.strip())
        elif name == b"transfer-encoding" and b"chunked" in value.lower():
            chunked = True
        elif name == b"connection" and b"close" in value.lower():
            raise ConnectionError("answered with Connection: close")
    if chunked:
        while not rest.endswith(b"0\r\n\r\n"):
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed in the middle of a chunked body")
            rest += chunk
    elif length is not None:
        while len(rest) < length:
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed in the middle of the body")
            rest += chunk
    else:
        raise ConnectionError("answered without Content-Length or chunked framing")


def main():
    if len(sys.argv) not in (7, 8):
        print(__doc__, file=sys.stderr)
        return 1
    host, port, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    path, ready_file, hold = sys.argv[4], sys.argv[5], float(sys.argv[6])
    tls = None
    if len(sys.argv) == 8:
        tls = ssl.create_default_context(cafile=sys.argv[7])
        tls.set_alpn_protocols(["http/1.1"])

    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))

    request = f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode()
    connections = []
    try:
        for _ in range(count):
            sock = socket.create_connection((host, port), timeout=10)
            if tls is not None:
                sock = tls.wrap_socket(sock, server_hostname="localhost")
            connections.append(sock)
            sock.sendall(request)
            read_response(sock)
    except (OSError, ValueError, ssl.SSLError) as error:
        print(f"connection {len(connections)} of {count}: {error}", file=sys.stderr)
        return 1

    with open(ready_file + ".tmp", "w") as ready:
        ready.write(f"{count}\n")
    os.rename(ready_file + ".tmp", ready_file)

    deadline = time.monotonic() + hold
    while not stop and time.monotonic() < deadline:
        time.sleep(0.05)

    # Over TLS a record nobody asked for (a late session ticket) may wait unread: only the
    # peer's FIN counts as closed there.
    events = select.EPOLLRDHUP if tls is not None else select.EPOLLIN | select.EPOLLRDHUP
    poller = select.epoll()
    for sock in connections:
        poller.register(sock.fileno(), events)
    closed = len(poller.poll(0, maxevents=count))
    print(f"{count - closed} of {count} still open")
    return 0 if closed == 0 else 2


if __name__ == "__main__":
    sys.exit(main())
