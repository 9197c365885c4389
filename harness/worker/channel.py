"""The parent <-> worker wire: length-prefixed JSON messages over a Unix socket, with file
descriptors passed beside a message (SCM_RIGHTS).

Both sides import this module. What the parent reads is bounded before anything is allocated: a
message is at most `limit` bytes, must arrive before its deadline, and is plain JSON (no pickle:
nothing the worker sends can make the parent build an object or run code). The parent never
accepts descriptors from the worker (a plain `recv` discards any the worker attaches).
"""

from __future__ import annotations

import fcntl
import json
import select
import socket
import struct
import termios
import time
from typing import Any, Optional, Sequence

HEADER = struct.Struct("!I")
PARENT_LIMIT = 1 << 20   # what the parent accepts from a worker (a profiler table is the largest)
WORKER_LIMIT = 1 << 24   # what a worker accepts from the parent (input descriptions)
MAX_FDS = 64


class ChannelClosed(EOFError):
    pass


class ChannelTimeout(TimeoutError):
    pass


class ChannelError(ValueError):
    """A malformed or oversized message."""


class Channel:
    def __init__(self, sock: socket.socket, limit: int):
        self.sock, self.limit = sock, limit
        self.sock.setblocking(True)

    def fileno(self) -> int:
        return self.sock.fileno()

    def pending(self) -> bool:
        """Whether bytes (or the end of the stream) wait to be read right now."""
        return bool(select.select([self.sock], [], [], 0)[0])

    def wait_readable(self, seconds: float) -> bool:
        """Whether bytes (or the end of the stream) wait to be read within `seconds`."""
        return bool(select.select([self.sock], [], [], max(0.0, seconds))[0])

    def at_end(self) -> bool:
        """Whether the other side has closed its end and left nothing to read (it exited)."""
        try:
            return self.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
        except (BlockingIOError, InterruptedError):
            return False
        except OSError:
            return True

    def close(self) -> None:
        self.sock.close()

    def unread(self) -> int:
        """Bytes this side sent that the other side has not read yet (a Unix socket's SIOCOUTQ, on
        Linux; a message it only peeked at counts); 0 where the kernel cannot tell."""
        try:
            return struct.unpack("i", fcntl.ioctl(self.sock.fileno(), termios.TIOCOUTQ, b"\0" * 4))[0]
        except OSError:
            return 0

    def send(self, message: Any, fds: Sequence[int] = (), deadline: Optional[float] = None) -> None:
        """Send one message (and `fds` with its first byte). With a `deadline` (time.monotonic()),
        raises ChannelTimeout when the other side has not taken the whole frame by then: a worker
        that stops reading fills the socket's buffer, and a plain blocking send would wait forever."""
        body = json.dumps(message, separators=(",", ":"), allow_nan=True).encode()
        frame = memoryview(HEADER.pack(len(body)) + body)
        if deadline is None:
            if fds:
                sent = socket.send_fds(self.sock, [frame[:1]], list(fds))
                frame = frame[sent:]
            self.sock.sendall(frame)
            return
        while frame:
            self._wait(deadline, write=True)
            try:
                if fds:  # the descriptors travel with the first byte of the frame
                    sent = socket.send_fds(self.sock, [frame[:1]], list(fds), socket.MSG_DONTWAIT)
                    fds = ()
                else:
                    sent = self.sock.send(frame, socket.MSG_DONTWAIT)
            except BlockingIOError:
                continue
            frame = frame[sent:]

    def recv(self, deadline: Optional[float] = None, want_fds: bool = False) -> tuple[Any, list[int]]:
        """The next message (and the descriptors sent with it, if `want_fds`). Raises
        ChannelTimeout at `deadline` (time.monotonic()), ChannelClosed at end of stream,
        ChannelError on a message over the limit or not JSON."""
        fds: list[int] = []
        head = self._read(HEADER.size, deadline, fds if want_fds else None)
        (length,) = HEADER.unpack(head)
        if length > self.limit:
            raise ChannelError(f"message of {length} bytes announced, limit {self.limit}")
        body = self._read(length, deadline, None)
        try:
            return json.loads(body, parse_constant=_no_constant), fds
        except (ValueError, RecursionError) as exc:  # not UTF-8, not JSON, nested too deep, NaN/Infinity
            raise ChannelError(f"message is not JSON ({exc})") from None

    def _read(self, n: int, deadline: Optional[float], fds: Optional[list[int]]) -> bytes:
        chunks, got = [], 0
        while got < n:
            self._wait(deadline)
            if fds is not None and got == 0:
                data, new_fds, _, _ = socket.recv_fds(self.sock, n, MAX_FDS)
                fds.extend(new_fds)
            else:
                data = self.sock.recv(min(n - got, 1 << 20))
            if not data:
                raise ChannelClosed("the other side closed the channel")
            chunks.append(data)
            got += len(data)
        return b"".join(chunks)

    def _wait(self, deadline: Optional[float], write: bool = False) -> None:
        """Until the socket can be read (or written, with `write`), or ChannelTimeout at `deadline`."""
        if deadline is None:
            return
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ChannelTimeout("the other side did not read before the deadline" if write
                                     else "no message before the deadline")
            wanted = [self.sock]
            ready = select.select([] if write else wanted, wanted if write else [], [], min(left, 1.0))
            if ready[0] or ready[1]:
                return


def pair() -> tuple[socket.socket, socket.socket]:
    """(the parent's end, the worker's end) of a new channel."""
    return socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)


def one_line(exc: BaseException) -> str:
    """An exception as one line: its type, then its message with whitespace collapsed, cut at 300."""
    text = " ".join(str(exc).split())
    if len(text) > 300:
        text = text[:297] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _no_constant(name: str) -> Any:
    """JSON's NaN / Infinity / -Infinity, which Python's json reads by default: refused (an infinite
    "shape" once crashed the parent's int())."""
    raise ValueError(f"{name} is not a JSON number")


def printable(text: str) -> str:
    """Text from the other side without terminal control characters (escape sequences, bells):
    each becomes a space."""
    return "".join(ch if ch.isprintable() else " " for ch in text)


def printable_line(text: str) -> str:
    """Text from the other side as one printable line: control characters and runs of whitespace,
    line breaks included, become single spaces."""
    return " ".join(printable(text).split())


_MARKDOWN_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "|": "\\|", "\\": "\\\\",
                                   "`": "\\`", "[": "\\[", "]": "\\]"})


def markdown_text(text: str) -> str:
    """Text from the other side for a Markdown table cell: no raw HTML, links or code spans of its
    own, no pipe that would end the cell. (Emphasis is left: names such as torch_batched.py stay
    readable in the file.)"""
    return text.translate(_MARKDOWN_ESCAPES)


def markdown_code(text: str) -> str:
    """Free text from the other side as a Markdown code span (for a table cell): shown as typed,
    with no HTML, link or bare-URL autolink of its own, on one line; only pipes are escaped, as
    tables need."""
    text = " ".join(text.split())
    if not text:
        return ""
    backticks = "".join(ch if ch == "`" else " " for ch in text).split()
    fence = "`" * (max(map(len, backticks), default=0) + 1)
    escaped = text.replace("|", "\\|")
    return f"{fence} {escaped} {fence}"
