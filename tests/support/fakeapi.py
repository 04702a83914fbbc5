"""A fake kube-apiserver for unit tests, in the spirit of httpx's MockTransport: a small aiohttp
server on 127.0.0.1 that answers the real `KubeApi` client (over real HTTP, so the client's code
runs unchanged: headers, JSON, status errors, the line splitting of watches) with what the test
scripted, and records every request.

    async with FakeApiServer() as fake:
        fake.on_list("/api/v1/pods", [pod], resource_version="10")
        pods = fake.watch("/api/v1/pods")
        fake.on("POST", "/api/v1/namespaces/*/pods/*/binding", Reply(201))
        api = fake.client()
        ...
        await pods.watching()
        pods.modified(pod)
        pods.gone()
        (binding,) = await fake.wait_for("POST", "*/binding")

- `on(method, path, *replies)`: scripted answers for a path (a glob: `*` matches any run of
  characters), served in order, the last one again and again; or one handler, called with each
  `Request`, returning a `Reply` (or awaiting one). A later `on` for the same method and path
  replaces the script. A request nothing matches is answered 404 NotFound, as the apiserver answers
  a resource it does not serve.
- `on_list(path, items, resource_version)`: a list answer (non-watch GETs of the path).
- `watch(path)`: the `WatchStream` that answers watch GETs of the path (created on first use, also
  when a watch arrives that the test never asked for, so an unscripted watch just stays open). The
  test pushes ADDED/MODIFIED/DELETED/BOOKMARK/ERROR events into it; an ERROR ends the watch as the
  apiserver ends it; `refuse` answers the next watch request with an HTTP error instead.
- `Reply.items(...)`: a list answer to script by hand (held, or in a sequence).
- `Reply.hold`: an event the answer waits for, so a test can keep a request on the wire.
- `requests`: every request, in arrival order, with method, path, query, JSON body, content type,
  user agent, and when it arrived and was answered (as positions in one sequence, for ordering assertions).
"""

from __future__ import annotations

import asyncio
import fnmatch
import inspect
import itertools
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Self

import orjson
from aiohttp import web
from kubernetes_asyncio import client as k8s_client

from koordpy.kubeapi.client import KubeApi, settled_proxy

DEFAULT_TIMEOUT = 5.0


def status_body(code: int, reason: str, message: str = "") -> dict[str, Any]:
    """A `metav1.Status` as the apiserver sends it with an error."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


@dataclass(frozen=True, slots=True)
class Reply:
    status: int = 200
    # a JSON value; None answers an empty object
    body: Any = None
    # the answer waits until this is set
    hold: asyncio.Event | None = None

    @staticmethod
    def error(status: int, reason: str, message: str = "", hold: asyncio.Event | None = None) -> Reply:
        return Reply(status, status_body(status, reason, message), hold)

    @staticmethod
    def items(
        items: Sequence[Mapping[str, Any]], resource_version: str = "1", hold: asyncio.Event | None = None
    ) -> Reply:
        """A list, as one page: the apiserver's answer to a GET of a collection."""
        body = {
            "kind": "List",
            "apiVersion": "v1",
            "metadata": {"resourceVersion": resource_version},
            "items": [dict(i) for i in items],
        }
        return Reply(200, body, hold)


NOT_FOUND = Reply.error(404, "NotFound", "the server could not find the requested resource")


@dataclass(slots=True)
class Request:
    method: str
    path: str
    query: dict[str, str]
    body: Any
    content_type: str
    # positions in the server's one sequence of arrivals and answers
    arrived: int
    answered: int | None = None
    user_agent: str = ""

    @property
    def watch(self) -> bool:
        return self.query.get("watch") == "true"


Handler = Callable[[Request], "Reply | Awaitable[Reply]"]


@dataclass(slots=True)
class _Route:
    method: str
    pattern: str
    replies: deque[Reply] = field(default_factory=deque)
    handler: Handler | None = None

    def matches(self, method: str, path: str) -> bool:
        return self.method == method and fnmatch.fnmatchcase(path, self.pattern)

    async def answer(self, request: Request) -> Reply:
        if self.handler is not None:
            reply = self.handler(request)
            return await reply if inspect.isawaitable(reply) else reply
        return self.replies.popleft() if len(self.replies) > 1 else self.replies[0]


# the server ends the watch connection it is serving
_END: dict[str, Any] = {}


class WatchStream:
    """The events of one watched path, delivered in the order pushed to whichever watch request is
    connected (one at a time, as one informer watches a path); what is pushed while no watch is
    connected waits for the next."""

    def __init__(self, path: str) -> None:
        self.path = path
        # the watch requests served so far, refused ones included
        self.requests: list[Request] = []
        self._events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._refusals: deque[Reply] = deque()
        self._arrived = asyncio.Condition()

    # ------------------------------------------------------------------ what the test pushes
    def push(self, event_type: str, obj: Mapping[str, Any]) -> None:
        self._events.put_nowait({"type": event_type, "object": dict(obj)})

    def added(self, obj: Mapping[str, Any]) -> None:
        self.push("ADDED", obj)

    def modified(self, obj: Mapping[str, Any]) -> None:
        self.push("MODIFIED", obj)

    def deleted(self, obj: Mapping[str, Any]) -> None:
        self.push("DELETED", obj)

    def bookmark(self, resource_version: str) -> None:
        """A BOOKMARK: only a resourceVersion, in an object of the watched kind."""
        self.push("BOOKMARK", {"metadata": {"resourceVersion": resource_version}})

    def error(self, code: int, reason: str, message: str = "") -> None:
        """An ERROR event; the watch ends after it, as the apiserver ends it."""
        self.push("ERROR", status_body(code, reason, message))

    def gone(self) -> None:
        """The resourceVersion watched from has been compacted away: 410 Gone in an ERROR event."""
        self.error(410, "Expired", "too old resource version")

    def end(self) -> None:
        """The server closes the watch (a timeout, a restart) without an error."""
        self._events.put_nowait(_END)

    def refuse(self, status: int, reason: str, message: str = "") -> None:
        """Answer the next watch request with an HTTP error instead of a stream (410 Gone for a
        resourceVersion the apiserver no longer has)."""
        self._refusals.append(Reply.error(status, reason, message))

    async def watching(self, count: int = 1, timeout: float = DEFAULT_TIMEOUT) -> Request:
        """The `count`-th watch request of this path, once it has arrived."""
        async with self._arrived:
            await asyncio.wait_for(self._arrived.wait_for(lambda: len(self.requests) >= count), timeout)
        return self.requests[count - 1]

    # ------------------------------------------------------------------ serving
    async def _serve(self, request: Request, http: web.Request) -> web.StreamResponse:
        async with self._arrived:
            self.requests.append(request)
            self._arrived.notify_all()
        if self._refusals:
            return _response(self._refusals.popleft())
        response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        await response.prepare(http)
        while True:
            event = await self._events.get()
            if event is _END:
                break
            await response.write(orjson.dumps(event) + b"\n")
            if event["type"] == "ERROR":
                break
        await response.write_eof()
        return response


def _response(reply: Reply) -> web.Response:
    return web.Response(
        status=reply.status,
        body=orjson.dumps({} if reply.body is None else reply.body),
        content_type="application/json",
    )


class FakeApiServer:
    def __init__(self) -> None:
        self.requests: list[Request] = []
        self._routes: list[_Route] = []
        self._streams: dict[str, WatchStream] = {}
        self._sequence = itertools.count()
        self._changed = asyncio.Condition()
        self._runner: web.AppRunner | None = None
        self._clients: list[KubeApi] = []
        self.url = ""

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        # a client that goes away cancels its request's handler (a watch waiting for events), and
        # closing never waits a minute for a handler that is still streaming
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self.url = f"http://{host}:{port}"

    async def close(self) -> None:
        for api in self._clients:
            await api.close()
        for stream in self._streams.values():
            stream.end()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def client(self) -> KubeApi:
        """A `KubeApi` connected to this server (closed with it), built as production builds one:
        from a kubernetes-asyncio Configuration."""
        configuration = k8s_client.Configuration()
        configuration.host = self.url
        proxy = settled_proxy(configuration)
        if proxy is not None:
            # the proxy would answer instead of this server
            raise RuntimeError(f"the environment's proxy {proxy} would be asked for {self.url}; set NO_PROXY")
        api = KubeApi(configuration)
        self._clients.append(api)
        return api

    # ------------------------------------------------------------------ scripting
    def on(self, method: str, path: str, *replies: Reply | Handler) -> None:
        if len(replies) == 1 and not isinstance(replies[0], Reply):
            route = _Route(method, path, handler=replies[0])
        else:
            if not replies or not all(isinstance(r, Reply) for r in replies):
                raise TypeError("on() takes one handler or one or more Reply")
            route = _Route(method, path, deque(r for r in replies if isinstance(r, Reply)))
        self._routes = [r for r in self._routes if (r.method, r.pattern) != (method, path)]
        self._routes.append(route)

    def on_list(
        self, path: str, items: Sequence[Mapping[str, Any]], resource_version: str = "1", *more: Reply
    ) -> None:
        """GETs of `path` (not watches) answer these items, then `more` when given."""
        self.on("GET", path, Reply.items(items, resource_version), *more)

    def watch(self, path: str) -> WatchStream:
        stream = self._streams.get(path)
        if stream is None:
            stream = self._streams[path] = WatchStream(path)
        return stream

    # ------------------------------------------------------------------ what was asked
    def matching(self, method: str, path: str = "*") -> list[Request]:
        return [
            r
            for r in self.requests
            if r.method == method and not r.watch and fnmatch.fnmatchcase(r.path, path)
        ]

    async def wait_for(
        self, method: str, path: str = "*", count: int = 1, timeout: float = DEFAULT_TIMEOUT
    ) -> list[Request]:
        """The first `count` requests (not watches) matching, once they have been answered."""

        def answered() -> bool:
            found = self.matching(method, path)
            return len(found) >= count and all(r.answered is not None for r in found[:count])

        async with self._changed:
            try:
                await asyncio.wait_for(self._changed.wait_for(answered), timeout)
            except TimeoutError:
                seen = [f"{r.method} {r.path}" for r in self.requests]
                raise AssertionError(
                    f"no {count} x {method} {path} within {timeout}s; seen: {seen}"
                ) from None
        return self.matching(method, path)[:count]

    # ------------------------------------------------------------------ serving
    async def _dispatch(self, http: web.Request) -> web.StreamResponse:
        raw = await http.read()
        request = Request(
            http.method,
            http.path,
            dict(http.query),
            orjson.loads(raw) if raw else None,
            http.headers.get("Content-Type", ""),
            next(self._sequence),
            user_agent=http.headers.get("User-Agent", ""),
        )
        await self._note(request)
        try:
            if request.watch and http.method == "GET":
                return await self.watch(http.path)._serve(request, http)
            route = next((r for r in reversed(self._routes) if r.matches(http.method, http.path)), None)
            reply = NOT_FOUND if route is None else await route.answer(request)
            if reply.hold is not None:
                await reply.hold.wait()
            return _response(reply)
        finally:
            request.answered = next(self._sequence)
            await self._note(None)

    async def _note(self, request: Request | None) -> None:
        async with self._changed:
            if request is not None:
                self.requests.append(request)
            self._changed.notify_all()


async def until(condition: Callable[[], bool], timeout: float = DEFAULT_TIMEOUT, what: str = "") -> None:
    """Until `condition()` holds: the client acts on an answer a moment after it is sent."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or condition}")
        await asyncio.sleep(0.005)
