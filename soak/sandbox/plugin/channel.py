"""The result channel: the plugin's only way to tell the harness anything, so every line is numbered and signed."""

import contextlib
import importlib
import json
import os
import threading
from collections.abc import Callable
from typing import Protocol

SECRET_BYTES = 32
"""As soak.sandbox.judge.SECRET_BYTES."""
BLOCK = 64
"""SHA-256's block size: HMAC pads its key to it."""


class Digest(Protocol):
    """What the channel uses of a hash object (hashlib's and `_sha256`'s alike)."""

    def update(self, data: bytes, /) -> None: ...

    def digest(self) -> bytes: ...

    def hexdigest(self) -> str: ...

    def copy(self) -> "Digest": ...


def python_sha256() -> Callable[..., Digest]:
    """Python's own SHA-256 (`_sha2` from 3.12 on, `_sha256` before), where the build has it: hashlib and hmac load
    OpenSSL, which costs every run milliseconds before its first test."""
    for name in ("_sha2", "_sha256"):
        with contextlib.suppress(ImportError):
            found: Callable[..., Digest] = importlib.import_module(name).sha256
            return found
    import hashlib

    return hashlib.sha256


sha256 = python_sha256()


class Mac:
    """HMAC-SHA256 under a key of at most BLOCK bytes (RFC 2104): what the harness checks with hmac.new(key, message,
    hashlib.sha256)."""

    def __init__(self, key: bytes) -> None:
        padded = key.ljust(BLOCK, b"\0")
        self.inner = sha256(bytes(byte ^ 0x36 for byte in padded))
        self.outer = sha256(bytes(byte ^ 0x5C for byte in padded))

    def hexdigest(self, message: bytes) -> str:
        inner = self.inner.copy()
        inner.update(message)
        outer = self.outer.copy()
        outer.update(inner.digest())
        return outer.hexdigest()


class Channel:
    """The write side of the harness's socket: numbered lines, each with an HMAC under the run's secret."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        os.set_inheritable(fd, False)
        secret = b""
        while len(secret) < SECRET_BYTES:
            chunk = os.read(fd, SECRET_BYTES - len(secret))
            if not chunk:
                raise RuntimeError("soak: the result channel closed before its secret arrived")
            secret += chunk
        self._mac = Mac(secret)
        self.seq = 0
        self.lock = threading.Lock()

    def send(self, event: str, **fields: object) -> None:
        with self.lock:
            payload = json.dumps({"seq": self.seq, "event": event, **fields}, separators=(",", ":"))
            self.seq += 1
            data = f"{self._mac.hexdigest(payload.encode())} {payload}\n".encode()
            while data:
                try:
                    data = data[os.write(self.fd, data):]
                except OSError:
                    return  # The harness reads a missing event as what it is.
