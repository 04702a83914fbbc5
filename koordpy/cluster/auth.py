"""Who may read `/metrics` and `/configz`: authentication and authorization delegated to the
kube-apiserver, as kube-scheduler delegates them on its secure port (apiserver's
DelegatingAuthenticationOptions and DelegatingAuthorizationOptions, with their defaults).

Authentication (`Authenticator`):

- no `Authorization: Bearer` header (none at all, another scheme, an empty token): the request is
  anonymous, `system:anonymous` in `system:unauthenticated`, and goes on to authorization;
- a bearer token: a TokenReview answers who it is; a token the apiserver does not accept, or a
  review that could not be made, is refused with 401.

Authorization (`Authorizer`), for a request that passed authentication:

- a path in the always-allowed paths (`/healthz`, `/readyz`, `/livez`; `x*` allows every path that
  starts with `x`) is allowed without asking anyone, so the kubelet's probes cost nothing;
- a user in an always-allowed group (`system:masters`, which the apiserver allows everything
  anyway) is allowed;
- everything else is a SubjectAccessReview of the non-resource path with the request's verb
  (`get` for a GET); not allowed is 403, a review that could not be made is 500.

Answers are cached for ten seconds each (the token reviews, the allowed and the denied access
reviews alike) so that a scraper costs the apiserver two requests per ten seconds, not two per
scrape. Reviews that failed are not cached: the next request asks again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from koordpy.kubeapi.client import TRANSPORT_ERRORS, ApiError

log = logging.getLogger(__name__)

TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
SUBJECT_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"

ANONYMOUS = "system:anonymous"
UNAUTHENTICATED = "system:unauthenticated"
AUTHENTICATED = "system:authenticated"

# kube's defaults: --authentication-token-webhook-cache-ttl, and
# --authorization-webhook-cache-authorized-ttl / -unauthorized-ttl
TOKEN_CACHE_SECONDS = 10.0
ALLOWED_CACHE_SECONDS = 10.0
DENIED_CACHE_SECONDS = 10.0
DEFAULT_ALWAYS_ALLOW_PATHS = ("/healthz", "/readyz", "/livez")
DEFAULT_ALWAYS_ALLOW_GROUPS = ("system:masters",)
# each review is one small request; kube's delegated clients give up after ten seconds too
REVIEW_TIMEOUT = 10.0
# a review the apiserver refused, or could not be asked
REVIEW_ERRORS: tuple[type[BaseException], ...] = (ApiError, *TRANSPORT_ERRORS)
# bounds the memory a flood of distinct tokens or users can take; the oldest answer goes first
CACHE_ENTRIES = 4096


class ReviewApi(Protocol):
    """What the reviews need of the apiserver client (`koordpy.kubeapi.KubeApi` is one)."""

    async def request(
        self, method: str, path: str, *, body: Any = None, timeout: float = 30.0
    ) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True)
class User:
    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @property
    def anonymous(self) -> bool:
        return self.name == ANONYMOUS


ANONYMOUS_USER = User(ANONYMOUS, groups=(UNAUTHENTICATED,))


class Unauthenticated(Exception):
    """The request carried credentials that are not accepted (401)."""


class AuthorizationFailed(Exception):
    """No decision could be had: the access review failed (500)."""


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    # the authorizer's words, appended to the 403 message when not allowed
    reason: str = ""


V = TypeVar("V")


@dataclass(slots=True)
class TtlCache(Generic[V]):
    """Answers kept until they expire, by the injected clock; at most `entries` of them."""

    now: Callable[[], float] = time.monotonic
    entries: int = CACHE_ENTRIES
    _items: OrderedDict[str, tuple[float, V]] = field(default_factory=OrderedDict)

    def get(self, key: str) -> V | None:
        found = self._items.get(key)
        if found is None:
            return None
        expires, value = found
        if self.now() >= expires:
            del self._items[key]
            return None
        return value

    def put(self, key: str, value: V, ttl: float) -> None:
        if ttl <= 0:
            return
        self._items.pop(key, None)
        self._items[key] = (self.now() + ttl, value)
        while len(self._items) > self.entries:
            self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)


def bearer_token(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header, as kube reads it: the scheme in any
    case, the token up to the next space; None for no header, another scheme or an empty token."""
    if not authorization:
        return None
    parts = authorization.strip().split(" ", 2)
    if len(parts) < 2 or parts[0].lower() != "bearer" or not parts[1]:
        return None
    return parts[1]


def _user(status_user: dict[str, Any]) -> User:
    name = str(status_user.get("username") or "")
    groups = tuple(str(g) for g in status_user.get("groups") or ())
    if name != ANONYMOUS and not {AUTHENTICATED, UNAUTHENTICATED}.intersection(groups):
        # as kube's AuthenticatedGroupAdder: every authenticated user is in system:authenticated
        groups += (AUTHENTICATED,)
    extra = tuple(
        sorted(
            (str(k), tuple(str(v) for v in (values or ())))
            for k, values in (status_user.get("extra") or {}).items()
        )
    )
    return User(name, str(status_user.get("uid") or ""), groups, extra)


@dataclass(frozen=True, slots=True)
class _TokenAnswer:
    # None: the apiserver does not accept the token
    user: User | None


class Authenticator:
    """Bearer tokens checked with TokenReviews; requests without one are anonymous."""

    def __init__(
        self,
        api: ReviewApi,
        *,
        cache_ttl: float = TOKEN_CACHE_SECONDS,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self._api = api
        self._ttl = cache_ttl
        # keyed by a digest: the tokens themselves are not kept
        self._cache: TtlCache[_TokenAnswer] = TtlCache(now)

    async def authenticate(self, authorization: str | None) -> User:
        """The user of a request with this `Authorization` header; raises Unauthenticated."""
        token = bearer_token(authorization)
        if token is None:
            return ANONYMOUS_USER
        key = hashlib.sha256(token.encode()).hexdigest()
        answer = self._cache.get(key)
        if answer is None:
            answer = _TokenAnswer(await self._review(token))
            self._cache.put(key, answer, self._ttl)
        if answer.user is None:
            raise Unauthenticated("invalid bearer token")
        return answer.user

    async def _review(self, token: str) -> User | None:
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token},
        }
        try:
            review = await self._api.request("POST", TOKEN_REVIEWS, body=body, timeout=REVIEW_TIMEOUT)
        except REVIEW_ERRORS as err:
            log.warning("token review failed, the request is refused: %s", err)
            raise Unauthenticated(f"token review failed: {err}") from err
        status = review.get("status") or {}
        if not status.get("authenticated"):
            if status.get("error"):
                log.debug("token not accepted: %s", status["error"])
            return None
        return _user(status.get("user") or {})


def path_matcher(paths: Sequence[str]) -> Callable[[str], bool]:
    """kube's path authorizer: exact paths, and prefixes written with one trailing `*`."""
    exact: set[str] = set()
    prefixes: list[str] = []
    for path in paths:
        trimmed = path.removeprefix("/")
        if "*" in trimmed[:-1]:
            raise ValueError(f"only a trailing * is allowed in an always-allowed path: {path!r}")
        if trimmed.endswith("*"):
            prefixes.append(trimmed[:-1])
        else:
            exact.add(trimmed)

    def matches(path: str) -> bool:
        trimmed = path.removeprefix("/")
        return trimmed in exact or any(trimmed.startswith(p) for p in prefixes)

    return matches


class Authorizer:
    """Always-allowed paths and groups first, then a SubjectAccessReview of the path and verb."""

    def __init__(
        self,
        api: ReviewApi,
        *,
        always_allow_paths: Sequence[str] = DEFAULT_ALWAYS_ALLOW_PATHS,
        always_allow_groups: Sequence[str] = DEFAULT_ALWAYS_ALLOW_GROUPS,
        allowed_ttl: float = ALLOWED_CACHE_SECONDS,
        denied_ttl: float = DENIED_CACHE_SECONDS,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self._api = api
        self._always_allowed = path_matcher(always_allow_paths)
        self._groups = frozenset(always_allow_groups)
        self._allowed_ttl = allowed_ttl
        self._denied_ttl = denied_ttl
        self._cache: TtlCache[Decision] = TtlCache(now)

    async def authorize(self, user: User, verb: str, path: str) -> Decision:
        """Raises AuthorizationFailed when the review cannot be made."""
        if self._always_allowed(path) or self._groups.intersection(user.groups):
            return Decision(True)
        spec: dict[str, Any] = {
            "user": user.name,
            "groups": list(user.groups),
            "nonResourceAttributes": {"path": path, "verb": verb},
        }
        if user.uid:
            spec["uid"] = user.uid
        if user.extra:
            spec["extra"] = {k: list(v) for k, v in user.extra}
        key = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        decision = await self._review(spec)
        self._cache.put(key, decision, self._allowed_ttl if decision.allowed else self._denied_ttl)
        return decision

    async def _review(self, spec: dict[str, Any]) -> Decision:
        body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
        try:
            review = await self._api.request(
                "POST", SUBJECT_ACCESS_REVIEWS, body=body, timeout=REVIEW_TIMEOUT
            )
        except REVIEW_ERRORS as err:
            log.warning("subject access review failed: %s", err)
            raise AuthorizationFailed(f"subject access review failed: {err}") from err
        status = review.get("status") or {}
        allowed, denied = bool(status.get("allowed")), bool(status.get("denied"))
        if allowed and denied:
            raise AuthorizationFailed("subject access review returned both allow and deny")
        return Decision(allowed, str(status.get("reason") or ""))
