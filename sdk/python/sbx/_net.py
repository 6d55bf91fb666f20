"""The byte stream under the terminal's WebSocket (wsproto speaks the protocol over it): an
asyncio one for AsyncSbx and a socket one for Sbx, with the same methods, so the terminal
code itself is written once (in _async_client.py) and generated for Sbx by unasync.py."""

import asyncio
import socket
import ssl
from typing import Optional

READ_MAX = 65536


class _AsyncSocket:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self._r = reader
        self._w = writer

    @classmethod
    async def connect(cls, host: str, port: int, tls: bool,
                      timeout: Optional[float]) -> "_AsyncSocket":
        ctx = ssl.create_default_context() if tls else None
        r, w = await asyncio.wait_for(
            asyncio.open_connection(host, port, ssl=ctx, server_hostname=host if tls else None),
            timeout)
        return cls(r, w)

    async def read(self) -> bytes:
        return await self._r.read(READ_MAX)

    async def write(self, data: bytes) -> None:
        self._w.write(data)
        await self._w.drain()

    async def close(self) -> None:
        self._w.close()
        try:
            await self._w.wait_closed()
        except OSError:
            pass


class _Socket:
    def __init__(self, sock: socket.socket):
        self._s = sock

    @classmethod
    def connect(cls, host: str, port: int, tls: bool, timeout: Optional[float]) -> "_Socket":
        s = socket.create_connection((host, port), timeout=timeout)
        if tls:
            s = ssl.create_default_context().wrap_socket(s, server_hostname=host)
        s.settimeout(None)
        return cls(s)

    def read(self) -> bytes:
        return self._s.recv(READ_MAX)

    def write(self, data: bytes) -> None:
        self._s.sendall(data)

    def close(self) -> None:
        self._s.close()
