"""The result channel: the plugin's only way to tell the harness anything, so every line is numbered and signed."""

import hashlib
import hmac
import json
import os
import threading

SECRET_BYTES = 32
"""As soak.sandbox.judge.SECRET_BYTES."""


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
        self._mac = hmac.new(secret, digestmod=hashlib.sha256)
        self.seq = 0
        self.lock = threading.Lock()

    def send(self, event: str, **fields: object) -> None:
        with self.lock:
            payload = json.dumps({"seq": self.seq, "event": event, **fields}, separators=(",", ":"))
            self.seq += 1
            mac = self._mac.copy()
            mac.update(payload.encode())
            data = f"{mac.hexdigest()} {payload}\n".encode()
            while data:
                try:
                    data = data[os.write(self.fd, data):]
                except OSError:
                    return  # The harness reads a missing event as what it is.
