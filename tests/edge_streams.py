#!/usr/bin/python3
"""Every streaming RPC with small messages against --address (the edge):
each bidirectional stream sends one small message and waits for its answer
before sending more, as an interactive client does; the client-streaming
ones send a message, pause, send another and end. Prints one JSON line per
RPC: its status and the seconds to the first answer. Exits 1 if any call
failed or waited longer than --bound_s (deploy/haproxy.cfg's body buffering
held such streams until its 10 s timeout, then answered HTTP 408)."""

import argparse
import json
import struct
import sys
import threading
import time

import grpc


def varint(value):
    out = bytearray()
    while value >= 128:
        out.append((value & 127) | 128)
        value >>= 7
    out.append(value)
    return bytes(out)


def field(number, payload):
    """A length-delimited field."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def int32_array(values):
    """primserve.v1.Array{dtype = INT32, data}."""
    return b"\x08\x01" + field(2, b"".join(struct.pack("<i", v) for v in values))


VALUES = int32_array([3, 1, 4, 1, 5, 9, 2, 6])
KEYS = int32_array([1, 1, 2, 2, 2, 3, 3, 1])
OP_SUM = b"\x10\x01"
MESSAGES = {
    "ScanStream": field(1, VALUES) + OP_SUM,
    "SelectStream": field(1, VALUES) + field(2, b"\x08\x01"),  # NONZERO
    "UniqueStream": field(1, VALUES),
    "RunLengthEncodeStream": field(1, VALUES),
    "ReduceByKeyStream": field(1, KEYS) + field(2, VALUES) + b"\x18\x01",
    "Multiplex": b"\x08\x01" + field(3, field(1, VALUES) + OP_SUM),  # id 1, a Reduce
}
CLIENT_STREAMING = {
    "ReduceStream": field(1, VALUES) + OP_SUM,
    "AggregateByKeyStream": field(1, KEYS) + field(2, VALUES) + b"\x18\x01\x20\x04",
}
PREFIX = "/primserve.v1.Primitives/"


def bidi(channel, name, message, timeout):
    """Sends `message`, waits for the first answer, then ends the stream."""
    answered = threading.Event()

    def requests():
        yield message
        answered.wait(timeout)

    call = channel.stream_stream(PREFIX + name)(requests(), timeout=timeout)
    start = time.monotonic()
    first = None
    try:
        for _ in call:
            if first is None:
                first = time.monotonic() - start
                answered.set()
        return "OK", first
    except grpc.RpcError as e:
        return f"{e.code().name}: {e.details()}", first


def client_streaming(channel, name, message, timeout, pause_s):
    def requests():
        yield message
        time.sleep(pause_s)
        yield message

    start = time.monotonic()
    try:
        channel.stream_unary(PREFIX + name)(requests(), timeout=timeout)
        return "OK", time.monotonic() - start - pause_s
    except grpc.RpcError as e:
        return f"{e.code().name}: {e.details()}", None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--address", required=True)
    parser.add_argument("--bound_s", type=float, default=2.0)
    parser.add_argument("--timeout_s", type=float, default=15.0)
    args = parser.parse_args()
    failed = False
    with grpc.insecure_channel(args.address) as channel:
        runs = [(name, lambda n=name, m=m: bidi(channel, n, m, args.timeout_s))
                for name, m in MESSAGES.items()]
        runs += [(name, lambda n=name, m=m: client_streaming(channel, n, m, args.timeout_s, 1.0))
                 for name, m in CLIENT_STREAMING.items()]
        for name, run in runs:
            status, first_s = run()
            ok = status == "OK" and first_s is not None and first_s < args.bound_s
            failed |= not ok
            print(json.dumps({"rpc": name, "status": status,
                              "first_answer_s": None if first_s is None else round(first_s, 4),
                              "ok": ok}), flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
