"""Tries: hang the parent in a send. At import it takes over the worker's channel and answers every
request honestly (the reference's output, noisy times so each benchmark case runs its most calls),
but only peeks at the requests (SO_PEEK_OFF: each peek moves on, nothing is consumed), so they pile
up in the socket until the parent's next send finds its buffer full and, without a deadline, waits
forever.
Must get: a protocol failure at its second request (the parent asks the kernel whether its last
requests were read), or where that cannot be asked, a timeout when a send finds the buffer full; the
run goes on and completes."""
import json
import os
import random
import socket
import struct
import sys
import time

import reference

SO_PEEK_OFF = 42


def custom_kernel(data):
    return reference.ref_kernel(data)


def _serve_without_reading():
    from harness.worker.shared_memory import Buffer, rebuild, view

    sock = socket.socket(fileno=int(sys.argv[1]))
    sock.setblocking(True)
    sock.setsockopt(socket.SOL_SOCKET, SO_PEEK_OFF, 0)

    def send(message):
        body = json.dumps(message).encode()
        sock.sendall(struct.pack("!I", len(body)) + body)

    def peek(n):
        got, fds = b"", []
        while len(got) < n:
            data, ancillary, _, _ = sock.recvmsg(n - len(got), socket.CMSG_LEN(64 * 4), socket.MSG_PEEK)
            for level, kind, raw in ancillary:
                if kind == socket.SCM_RIGHTS:
                    fds += struct.unpack(f"{len(raw) // 4}i", raw[:len(raw) // 4 * 4])
            if not data:
                time.sleep(0.001)
            got += data
        return got, fds

    send({"op": "ready"})
    data = slot = None
    while True:
        head, fds = peek(4)
        body, more = peek(struct.unpack("!I", head)[0])
        message = json.loads(body)
        if message["op"] == "inputs":
            buffers = [Buffer(spec["nbytes"], spec["device"], fd) for spec, fd in zip(message["buffers"], fds + more)]
            data, slot = rebuild(message["tree"], buffers), view(buffers[-1], message["output"])
        elif message["op"] == "call":
            out = reference.ref_kernel(data)
            time.sleep(random.random() * 0.004)
            slot.copy_(out)
            send({"op": "output", "copied": True, "layout": {"shape": list(out.shape), "dtype": "bfloat16", "device": "cpu"},
                  "device_s": 0.001, "host_s": 0.001, "tail_s": 0.0, "replaced": []})
        elif message["op"] == "exit":
            os._exit(0)


if len(sys.argv) >= 5 and sys.argv[1].isdigit():  # inside the worker (not when imported to read its docstring)
    _serve_without_reading()
