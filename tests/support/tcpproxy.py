"""A TCP proxy on loopback for tests, to put between a client and its server and make the network
misbehave the way a dead peer or a NAT that dropped its state does: bytes stop, connections stay open.

    async with TcpProxy("127.0.0.1", server_port) as proxy:
        ...  # the client connects to 127.0.0.1:proxy.port
        proxy.freeze()                    # the connections open now carry nothing either way
        proxy.freeze(new_connections=True)  # and so do those opened from now on
        proxy.thaw()                      # everything held is delivered, bytes flow again

Bytes pass through untouched (TLS included: the client still talks to the server's certificate).
A frozen connection stops reading from both ends once it holds a chunk, so what is sent meanwhile
waits in the kernel's buffers and in the proxy, and nothing is lost or reordered; an end closed
while frozen is closed on the other side only at the thaw, as a dead link would not pass the FIN.
The proxy listens on 127.0.0.1 and forwards only to a loopback address, and everything it opened is
closed when it is closed (the `async with` ends, or `close()`).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
from typing import Self

CHUNK = 65536


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _Link:
    """One proxied connection: a pump each way, flowing unless frozen."""

    def __init__(self, frozen: bool) -> None:
        self.flowing = asyncio.Event()
        if not frozen:
            self.flowing.set()
        self.writers: list[asyncio.StreamWriter] = []
        self.tasks: list[asyncio.Task[None]] = []

    async def pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                chunk = await reader.read(CHUNK)
                # held here while frozen: neither this chunk nor an end of stream goes on
                await self.flowing.wait()
                if not chunk:
                    break
                writer.write(chunk)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            # one side is done (or broke): the whole connection ends, as a TCP proxy's does
            self.close()

    def close(self) -> None:
        for writer in self.writers:
            writer.close()


class TcpProxy:
    """Forwards connections to 127.0.0.1:`port` to `target_host`:`target_port` (see the module)."""

    def __init__(self, target_host: str, target_port: int) -> None:
        if not _loopback(target_host):
            raise ValueError(f"the test proxy forwards to loopback only, not {target_host}")
        self.target_host = target_host
        self.target_port = target_port
        self.port = 0
        self._server: asyncio.Server | None = None
        self._links: set[_Link] = set()
        # the task serving each accepted connection: close() waits for every one to end
        self._handlers: set[asyncio.Task[None]] = set()
        self._freeze_new = False
        # connections accepted so far, for tests that want to know the client reconnected
        self.accepted = 0

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])

    def freeze(self, *, new_connections: bool = False) -> int:
        """Hold every byte of the connections open now (both ways, connections kept open); with
        `new_connections`, also of every connection accepted until `thaw()`. Returns how many
        connections were frozen."""
        self._freeze_new = new_connections
        for link in self._links:
            link.flowing.clear()
        return len(self._links)

    def thaw(self) -> None:
        """Deliver what was held and let everything flow again."""
        self._freeze_new = False
        for link in self._links:
            link.flowing.set()

    @property
    def open_connections(self) -> int:
        return len(self._links)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        links, self._links = list(self._links), set()
        for link in links:
            link.close()
            for task in link.tasks:
                task.cancel()
        await asyncio.gather(*(t for link in links for t in link.tasks), return_exceptions=True)
        handlers, self._handlers = list(self._handlers), set()
        for handler in handlers:
            handler.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5.0)
            self._server = None

    async def _accept(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            await self._serve(client_reader, client_writer)
        except asyncio.CancelledError:
            # closing the proxy ends it; asyncio's server would log a handler that ends cancelled
            client_writer.close()
        finally:
            self._handlers.discard(task)

    async def _serve(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        link = _Link(frozen=self._freeze_new)
        link.writers.append(client_writer)
        try:
            server_reader, server_writer = await asyncio.open_connection(self.target_host, self.target_port)
        except OSError:
            client_writer.close()
            return
        link.writers.append(server_writer)
        self._links.add(link)
        link.tasks = [
            asyncio.create_task(link.pump(client_reader, server_writer)),
            asyncio.create_task(link.pump(server_reader, client_writer)),
        ]
        try:
            await asyncio.gather(*link.tasks, return_exceptions=True)
        finally:
            self._links.discard(link)
            link.close()
