"""Tries: talk to the outside: connect to a port the test opened on this machine's loopback
(MLA_EVAL_TEST_PORT), as a submission might phone home or reach a cluster head.
Must get: no connection arrives (the sandbox has no network); it computes the right answer."""
import os
import socket

import reference

port = int(os.environ.get("MLA_EVAL_TEST_PORT", "0"))
try:
    socket.create_connection(("127.0.0.1", port), timeout=2).sendall(b"hello from the sandbox")
    print("CONNECTED")
except OSError as exc:
    print("no connection:", exc)


def custom_kernel(data):
    return reference.ref_kernel(data)
