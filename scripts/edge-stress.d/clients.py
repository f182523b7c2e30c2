#!/usr/bin/env python3
"""The clients of scripts/edge-stress: many at once, each exchange timed and checked.

    clients.py PATTERN --port P [--seconds S] [--clients N] [--ca FILE] [--tunnel-to HOST:PORT]

Patterns (every response must be a 200 or, to a POST the origin refuses, a 405):
  fresh-tls   a new TLS connection for each request (a miss; Connection: close), read to its end
  keepalive   TLS when --ca is given, else plain: a connection carries 1-20 exchanges, a
              GET, a POST of up to 70,000 octets, or two GETs pipelined in one write
  pipeline    up to 60 GETs in one write, the last one asking to close half the time
  slow-reader 1-3 GETs of 1 MiB or 16 KiB per connection, each body read in pieces of 4-64 KiB
              with pauses now and then; no gap over 2 s between two pieces
  half-close  plain: a request, then the client's end (SHUT_WR), the response read to its end
  tunnel      CONNECT to --tunnel-to through a forward proxy, then TLS inside, one request

Prints one line of JSON: exchanges, failures, slow (over 2 s), the slowest in seconds, and the
first failures. Uses only the standard library.
"""
import argparse
import asyncio
import json
import random
import ssl
import time

SLOW = 2.0
TIMEOUT = 20.0


class Tally:
    def __init__(self):
        self.exchanges = 0
        self.failures = 0
        self.slow = 0
        self.slowest = 0.0
        self.examples = []

    def took(self, seconds, count=1):
        self.exchanges += count
        self.slowest = max(self.slowest, seconds)
        if seconds > SLOW:
            self.slow += 1
            self.note(f"an exchange took {seconds:.2f} s")

    def failed(self, what):
        self.failures += 1
        self.note(what)

    def note(self, what):
        if len(self.examples) < 8:
            self.examples.append(what)


async def read_response(reader):
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    await reader.readexactly(length)
    return head


def check(head, tally):
    if not (head.startswith(b"HTTP/1.1 200 ") or head.startswith(b"HTTP/1.1 405 ")):
        tally.failed("unexpected response: " + head[:60].decode(errors="replace"))
        return False
    return True


def path(client, number):
    return f"/{random.choice(['1k', '16k'])}?c{client}-{number % 50}"


async def read_to_end(reader, writer, started, tally, empty):
    """Reads a response the server ends with the connection, then tallies it; `empty` says
    what a reply of nothing was (its `{seconds}` filled in)."""
    data = await reader.read()
    writer.close()
    if not data:
        tally.failed(empty.format(seconds=f"{time.monotonic() - started:.2f}"))
    elif check(data[:data.find(b"\r\n\r\n") + 4], tally):
        tally.took(time.monotonic() - started)


async def fresh_tls(options, context, client, number, tally):
    started = time.monotonic()
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", options.port, ssl=context, server_hostname="localhost")
    # A miss each time: the loop then has more to do between two waits, which widens the
    # window between epoll_wait and the step that reads.
    writer.write(f"GET /1k?fresh{client}-{number} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".encode())
    await read_to_end(reader, writer, started, tally, "an empty reply after {seconds} s")


async def keepalive(options, context, client, number, tally):
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", options.port, ssl=context, server_hostname="localhost" if context else None)
    for exchange in range(random.randint(1, 20)):
        started = time.monotonic()
        kind = random.random()
        if kind < 0.2:
            body = b"x" * random.randint(1, 70_000)
            writer.write(f"POST {path(client, exchange)} HTTP/1.1\r\nHost: localhost\r\n"
                         f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
            count = 1
        elif kind < 0.4:
            writer.write(f"GET {path(client, exchange)} HTTP/1.1\r\nHost: localhost\r\n\r\n"
                         f"GET {path(client, exchange + 1)} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
            count = 2
        else:
            writer.write(f"GET {path(client, exchange)} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
            count = 1
        for _ in range(count):
            if not check(await read_response(reader), tally):
                writer.close()
                return
        tally.took(time.monotonic() - started, count)
    writer.close()


async def pipeline(options, context, client, number, tally):
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", options.port, ssl=context, server_hostname="localhost" if context else None)
    count = random.randint(2, 60)
    closing = random.random() < 0.5
    requests = []
    for index in range(count):
        last = "Connection: close\r\n" if closing and index == count - 1 else ""
        requests.append(f"GET {path(client, number * 60 + index)} HTTP/1.1\r\nHost: localhost\r\n{last}\r\n")
    started = time.monotonic()
    writer.write("".join(requests).encode())
    for _ in range(count):
        if not check(await read_response(reader), tally):
            writer.close()
            return
    if closing and await reader.read():
        tally.failed("bytes after the response to a request that asked to close")
    tally.took(time.monotonic() - started, count)
    writer.close()


async def slow_reader(options, context, client, number, tally):
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", options.port, ssl=context, server_hostname="localhost" if context else None)
    for _ in range(random.randint(1, 3)):
        writer.write(f"GET /{random.choice(['1m', '16k'])} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
        head = await reader.readuntil(b"\r\n\r\n")
        if not check(head, tally):
            writer.close()
            return
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:"))
        received, last, widest = 0, time.monotonic(), 0.0  # from the head's arrival
        while received < length:
            # Pieces of 4-64 KiB, now and then a pause: the proxy's writes block and resume.
            piece = await reader.read(min(4096 * random.randint(1, 16), length - received))
            if not piece:
                writer.close()
                return tally.failed(f"the connection closed at {received} of {length} octets")
            received += len(piece)
            now = time.monotonic()
            widest, last = max(widest, now - last), now
            if random.random() < 0.05:
                await asyncio.sleep(random.random() * 0.05)
        # Timed by its widest gap: the pauses are the client's own.
        tally.took(widest)
    writer.close()


async def half_close(options, context, client, number, tally):
    started = time.monotonic()
    reader, writer = await asyncio.open_connection("127.0.0.1", options.port)
    writer.write(f"GET {path(client, number)} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
    writer.write_eof()
    await read_to_end(reader, writer, started, tally,
                      "an empty reply after {seconds} s to a request followed by the client's end")


async def tunnel(options, context, client, number, tally):
    started = time.monotonic()
    reader, writer = await asyncio.open_connection("127.0.0.1", options.port)
    target = options.tunnel_to
    writer.write(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
    head = await reader.readuntil(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        writer.close()
        return tally.failed("CONNECT answered " + head[:40].decode(errors="replace"))
    await writer.start_tls(context, server_hostname="localhost")
    writer.write(f"GET {path(client, number)} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".encode())
    await read_to_end(reader, writer, started, tally, "an empty reply through the tunnel after {seconds} s")


PATTERNS = {"fresh-tls": fresh_tls, "keepalive": keepalive, "pipeline": pipeline,
            "slow-reader": slow_reader, "half-close": half_close, "tunnel": tunnel}


async def run(options):
    context = None
    if options.ca:
        context = ssl.create_default_context(cafile=options.ca)
        context.set_alpn_protocols(["http/1.1"])
    tally = Tally()
    pattern = PATTERNS[options.pattern]
    deadline = time.monotonic() + options.seconds

    async def client(index):
        number = 0
        while time.monotonic() < deadline:
            try:
                await asyncio.wait_for(pattern(options, context, index, number, tally), TIMEOUT)
            except Exception as error:  # a timeout, a reset, a TLS failure: each one counts
                tally.failed(f"{type(error).__name__}: {error}"[:120])
            number += 1

    await asyncio.gather(*(client(index) for index in range(options.clients)))
    return tally


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("pattern", choices=sorted(PATTERNS))
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--clients", type=int, default=40)
    parser.add_argument("--ca", help="the CA file: speak TLS to --port (tunnel: inside the tunnel)")
    parser.add_argument("--tunnel-to", default="127.0.0.1:443")
    options = parser.parse_args()
    tally = asyncio.run(run(options))
    print(json.dumps({"exchanges": tally.exchanges, "failures": tally.failures, "slow": tally.slow,
                      "slowest": round(tally.slowest, 3), "examples": tally.examples}))


if __name__ == "__main__":
    main()
