"""Raw JSON requests to a kube-apiserver on one aiohttp session.

kubernetes-asyncio loads the credentials (kubeconfig, in-cluster service account, exec plugins;
`koordpy.kubeapi.credentials` chooses which); the requests themselves skip its generated client:
its models cost more than the scheduling cycle they would feed, its session looks up proxies in the
environment on every request (a thread-pool hop each time), and some answers (the Binding's
`v1.Status`) cannot be deserialized by it at all.
Here the proxy is settled once when connecting, JSON goes through orjson, and one connection pool
is shared by every request, with its size set for many small concurrent writes.
"""

from __future__ import annotations

import contextlib
import platform
import ssl
import time
import urllib.request
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import orjson
from kubernetes_asyncio import client as k8s_client

from koordpy import __version__
from koordpy.kubeapi.credentials import load_configuration
from koordpy.kubeapi.ratelimit import TokenBucket

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"

# a token from an exec plugin or a projected service-account file is read again this often
TOKEN_REFRESH_SECONDS = 60.0
# connections kept to the apiserver; HTTP/1.1 carries one request at a time per connection
CONNECTION_LIMIT = 256
# aiohttp's default read buffer makes a watch of large objects crawl in 64 KiB steps
READ_BUFFER = 2**21

# Go's names for the machines Python names otherwise (runtime.GOARCH)
_GOARCH = {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm", "i386": "386", "i686": "386"}


def default_user_agent(command: str = "koordpy", version: str = __version__, commit: str = "") -> str:
    """client-go's rest.DefaultKubernetesUserAgent: `<command>/<version> (<os>/<arch>)
    kubernetes/<commit>`, the version without its pre-release part and the commit shortened to 7
    characters ("unknown" when the build names none, as client-go writes it)."""
    tag = version.split("-", 1)[0] or "unknown"
    if tag[:1].isdigit():
        tag = "v" + tag
    machine = platform.machine().lower()
    arch = _GOARCH.get(machine, machine or "unknown")
    system = platform.system().lower() or "unknown"
    return f"{command}/{tag} ({system}/{arch}) kubernetes/{commit[:7] or 'unknown'}"


def add_user_agent(agent: str, component: str) -> str:
    """client-go's rest.AddUserAgent: the default user agent with `/<component>` after it."""
    return f"{agent}/{component}"


# what every request of koordpy's says it is; the Lease's client adds /leader-election, as
# kube-scheduler's does
USER_AGENT = default_user_agent()
LEADER_ELECTION_USER_AGENT = add_user_agent(USER_AGENT, "leader-election")

# told of every request: (method, HTTP status or "<error>", host, seconds or None for a watch,
# seconds waited for the rate limiter or None without one), what client-go's rest_client_*
# request metrics count
RequestObserver = Callable[[str, str, str, float | None, float | None], None]


class ApiError(Exception):
    """A response outside 2xx, with the apiserver's `Status` reason and message when it sent one."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}" if message else f"{status} {reason}")
        self.status = status
        self.reason = reason
        self.message = message

    @staticmethod
    def from_body(status: int, body: bytes) -> ApiError:
        reason, message = "", body.decode(errors="replace")[:500]
        with contextlib.suppress(ValueError, AttributeError):
            data = orjson.loads(body)
            reason = str(data.get("reason") or "")
            message = str(data.get("message") or "")
        return ApiError(status, reason, message)


class NotLeader(ApiError):
    """A write refused before it was sent: this instance no longer holds the leadership its writes
    are fenced by (`KubeApi.fence`). An ApiError, so every caller already handles it, with no HTTP
    status: nothing reached the API server."""

    def __init__(self, method: str, path: str) -> None:
        super().__init__(0, "NotLeader", f"{method} {path} not sent: leadership lost")


# what a request may fail with besides ApiError: the apiserver unreachable, the connection cut,
# a reply that is not JSON
TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (aiohttp.ClientError, TimeoutError, OSError, ValueError)


def decode(data: bytes) -> Any:
    return orjson.loads(data)


def encode(body: Any) -> bytes:
    return orjson.dumps(body)


def micro_time(t: float | None = None) -> str:
    """A `metav1.MicroTime` as the apiserver writes it."""
    moment = datetime.fromtimestamp(time.time() if t is None else t, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def rfc3339(t: float | None = None) -> str:
    moment = datetime.fromtimestamp(time.time() if t is None else t, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def pod_path(namespace: str, name: str, sub: str = "") -> str:
    return f"/api/v1/namespaces/{namespace}/pods/{name}" + (f"/{sub}" if sub else "")


def _ssl_context(configuration: k8s_client.Configuration) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, keyfile=configuration.key_file)
    if not configuration.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def settled_proxy(configuration: k8s_client.Configuration) -> str | None:
    """The proxy for the apiserver: the kubeconfig's `proxy-url`, else the environment's
    HTTPS_PROXY / HTTP_PROXY unless NO_PROXY exempts the host (as client-go reads them), looked up
    once instead of on every request."""
    if configuration.proxy:
        return str(configuration.proxy)
    url = urlsplit(str(configuration.host))
    proxies = urllib.request.getproxies()
    proxy = proxies.get(url.scheme or "https")
    if not proxy or not url.hostname:
        return None
    if urllib.request.proxy_bypass(url.hostname):
        return None
    return proxy


class KubeApi:
    """JSON requests to one apiserver with the credentials of a kubernetes-asyncio Configuration."""

    def __init__(
        self,
        configuration: k8s_client.Configuration,
        *,
        connections: int = CONNECTION_LIMIT,
        user_agent: str = USER_AGENT,
    ) -> None:
        self.configuration = configuration
        self.user_agent = user_agent
        self.base = str(configuration.host).rstrip("/")
        self.proxy = settled_proxy(configuration)
        self._ssl = _ssl_context(configuration) if self.base.startswith("https") else None
        self._server_hostname = getattr(configuration, "tls_server_name", None) or None
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=connections, ssl=self._ssl or False),
            trust_env=False,
            read_bufsize=READ_BUFFER,
            # instead of aiohttp's own (Python/3.x aiohttp/3.x), on every request
            headers={"User-Agent": user_agent},
            json_serialize=lambda obj: orjson.dumps(obj).decode(),
        )
        self._authorization: str | None = None
        self._authorization_at = -TOKEN_REFRESH_SECONDS
        self.observe_request: RequestObserver | None = None
        # client-go's client-side token bucket (koordpy.kubeapi.ratelimit); None: no limit
        self.rate_limiter: TokenBucket | None = None
        # whether a write may be sent, asked immediately before each non-GET request goes on the
        # wire (after the rate limiter's wait, which can be long): a leader-elected instance fences
        # its writes by its leadership, so a deposed or paused leader's backlog is never sent
        self.fence: Callable[[], bool] | None = None
        # writes the fence refused, by method
        self.fenced: dict[str, int] = {}
        # client-go's `host` label: the apiserver's host:port
        self.host = urlsplit(self.base).netloc

    @staticmethod
    async def connect(kubeconfig: str | None = None, context: str | None = None) -> KubeApi:
        """With the credentials `credentials.load_configuration` chooses (raises CredentialsError
        when there are none)."""
        return KubeApi(await load_configuration(kubeconfig, context))

    async def close(self) -> None:
        await self._session.close()

    async def _headers(self, content_type: str) -> dict[str, str]:
        headers = {"Accept": JSON, "Content-Type": content_type}
        now = time.monotonic()
        if now - self._authorization_at >= TOKEN_REFRESH_SECONDS:
            token = await self.configuration.get_api_key_with_prefix("BearerToken")
            if token:
                self._authorization = str(token)
            elif self.configuration.username:
                self._authorization = self.configuration.get_basic_auth_token()
            self._authorization_at = now
        if self._authorization:
            headers["Authorization"] = self._authorization
        return headers

    async def _send(
        self,
        method: str,
        path: str,
        query: list[tuple[str, str]] | None,
        body: Any,
        content_type: str,
        timeout: aiohttp.ClientTimeout,
    ) -> aiohttp.ClientResponse:
        headers = await self._headers(content_type)
        if method != "GET" and self.fence is not None and not self.fence():
            self.fenced[method] = self.fenced.get(method, 0) + 1
            raise NotLeader(method, path)
        return await self._session.request(
            method,
            self.base + path,
            params=query or None,
            data=None if body is None else encode(body),
            headers=headers,
            timeout=timeout,
            proxy=self.proxy,
            server_hostname=self._server_hostname,
        )

    async def _exchange(
        self,
        method: str,
        path: str,
        query: list[tuple[str, str]] | None,
        body: Any,
        content_type: str,
        timeout: aiohttp.ClientTimeout,
        watch: bool = False,
    ) -> tuple[aiohttp.ClientResponse, bytes]:
        """The response, and its body (empty for a watch: the caller streams it), told to
        `observe_request` as client-go counts requests: one without an answer has the code
        "<error>", the latency runs from before the rate limiter to the end of the body, and a
        watch has none (its length is not a latency)."""
        start = time.perf_counter()
        throttled: float | None = None
        if self.rate_limiter is not None:
            await self.rate_limiter.wait()
            throttled = time.perf_counter() - start
        code: str | None = "<error>"
        try:
            try:
                response = await self._send(method, path, query, body, content_type, timeout)
            except NotLeader:
                code = None  # never sent: not a request
                raise
            code = str(response.status)
            if watch:
                return response, b""
            try:
                return response, await response.read()
            finally:
                response.release()
        finally:
            if self.observe_request is not None and code is not None:
                seconds = None if watch else time.perf_counter() - start
                self.observe_request(method, code, self.host, seconds, throttled)

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: list[tuple[str, str]] | None = None,
        body: Any = None,
        content_type: str = JSON,
        timeout: float = 30.0,
    ) -> dict[str, Any]:
        response, data = await self._exchange(
            method, path, query, body, content_type, aiohttp.ClientTimeout(total=timeout)
        )
        if not 200 <= response.status < 300:
            raise ApiError.from_body(response.status, data)
        if not data:
            return {}
        parsed = decode(data)
        return parsed if isinstance(parsed, dict) else {}

    async def stream(
        self,
        path: str,
        query: list[tuple[str, str]],
        read_timeout: float,
        on_answered: Callable[[], None] | None = None,
    ) -> AsyncIterator[dict[str, Any]]:
        """The JSON lines of a watch; `on_answered()` as soon as the apiserver has accepted the
        watch (its headers, before any event: a quiet resource may send nothing for a minute).
        Raises TimeoutError when nothing arrives for `read_timeout` seconds. Lines are split by
        hand: aiohttp's readline refuses lines longer than 128 KiB, and a pod with large annotations
        makes one."""
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=10.0, sock_read=read_timeout)
        response, _ = await self._exchange("GET", path, query, None, JSON, timeout, watch=True)
        try:
            if response.status != 200:
                raise ApiError.from_body(response.status, await response.read())
            if on_answered is not None:
                on_answered()
            buffer = bytearray()
            async for chunk in response.content.iter_any():
                buffer += chunk
                start = 0
                while (end := buffer.find(b"\n", start)) >= 0:
                    line = bytes(buffer[start:end])
                    start = end + 1
                    if line.strip():
                        yield decode(line)
                del buffer[:start]
        finally:
            # a watch given up half-way must not go back to the pool with unread data
            response.close()
