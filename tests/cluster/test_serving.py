"""The secure port's pieces, each against what kube does on kube-scheduler's secure port:

- authentication delegated with TokenReviews (apiserver's DelegatingAuthenticatorConfig: the
  bearer-token authenticator, the token cache of --authentication-token-webhook-cache-ttl, anonymous
  requests allowed, a token that fails is 401);
- authorization delegated with SubjectAccessReviews (DelegatingAuthorizationOptions: the
  always-allowed paths /healthz /readyz /livez, the always-allowed group system:masters, the
  webhook authorizer's caches of allowed and denied answers);
- the health endpoints in the healthz package's format;
- the serving certificate as SecureServingOptions picks it (files, --cert-dir, or self-signed).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ipaddress
import os
import ssl
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from aiohttp.test_utils import TestClient, TestServer
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from koordpy.cluster.auth import (
    ANONYMOUS_USER,
    SUBJECT_ACCESS_REVIEWS,
    TOKEN_REVIEWS,
    Authenticator,
    AuthorizationFailed,
    Authorizer,
    Decision,
    Unauthenticated,
    User,
    bearer_token,
)
from koordpy.cluster.http import Endpoints, Guard, HealthCheck, Listener, health_report
from koordpy.cluster.serving import (
    PAIR_NAME,
    CertificateError,
    ServingCertificate,
    generate_self_signed,
    subject_alternatives,
)
from koordpy.kubeapi.client import ApiError
from koordpy.metrics import SchedulerMetrics


# ---------------------------------------------------------------------------------------------- fakes
class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@dataclass
class FakeReviews:
    """The apiserver's review endpoints: a TokenReview answer per token, a SubjectAccessReview
    status from a function of the spec; an exception instead of an answer fails the request."""

    tokens: dict[str, Any] = field(default_factory=dict)
    access: Callable[[dict[str, Any]], Any] = lambda spec: {"allowed": False}
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    async def request(
        self, method: str, path: str, *, body: Any = None, timeout: float = 30.0
    ) -> dict[str, Any]:
        assert method == "POST"
        self.calls.append((path, body))
        if path == TOKEN_REVIEWS:
            answer = self.tokens.get(body["spec"]["token"], {"authenticated": False})
        else:
            assert path == SUBJECT_ACCESS_REVIEWS
            answer = self.access(body["spec"])
        if isinstance(answer, Exception):
            raise answer
        return {"status": answer}

    def count(self, path: str) -> int:
        return sum(1 for p, _ in self.calls if p == path)


ALICE = {"username": "alice", "uid": "u-1", "groups": ["devs", "system:authenticated"]}
SCRAPER = {
    "username": "system:serviceaccount:monitoring:prometheus",
    "uid": "u-2",
    "groups": ["system:serviceaccounts", "system:serviceaccounts:monitoring"],
    "extra": {"authentication.kubernetes.io/pod-name": ["prometheus-0"]},
}
ADMIN = {"username": "admin", "groups": ["system:masters"]}


def reviews() -> FakeReviews:
    return FakeReviews(
        tokens={
            "alice-token": {"authenticated": True, "user": ALICE},
            "scraper-token": {"authenticated": True, "user": SCRAPER},
            "admin-token": {"authenticated": True, "user": ADMIN},
            "expired-token": {"authenticated": False, "error": "token has expired"},
            "broken-token": ApiError(503, "ServiceUnavailable", "etcd is down"),
            "unreachable-token": aiohttp.ClientConnectionError("connection refused"),
        },
        access=lambda spec: {"allowed": spec["user"] == SCRAPER["username"]},
    )


# ------------------------------------------------------------------------------------------ authentication
@pytest.mark.parametrize(
    ("header", "token"),
    [
        (None, None),
        ("", None),
        ("Bearer abc", "abc"),
        ("bearer abc", "abc"),
        ("BEARER abc", "abc"),
        ("  Bearer abc  ", "abc"),
        ("Bearer abc def", "abc"),
        ("Bearer", None),
        ("Bearer  abc", None),
        ("Basic YWxpY2U6c2VjcmV0", None),
        ("Token abc", None),
    ],
)
def test_bearer_token_is_read_as_kube_reads_it(header: str | None, token: str | None) -> None:
    assert bearer_token(header) == token


@pytest.mark.parametrize(
    ("header", "user"),
    [
        pytest.param(None, ANONYMOUS_USER, id="no-header-is-anonymous"),
        pytest.param("Basic YWxpY2U6c2VjcmV0", ANONYMOUS_USER, id="another-scheme-is-anonymous"),
        pytest.param("Bearer ", ANONYMOUS_USER, id="empty-token-is-anonymous"),
        pytest.param(
            "Bearer alice-token",
            User("alice", "u-1", ("devs", "system:authenticated")),
            id="accepted-token-is-its-user",
        ),
        pytest.param(
            "Bearer scraper-token",
            User(
                SCRAPER["username"],
                "u-2",
                ("system:serviceaccounts", "system:serviceaccounts:monitoring", "system:authenticated"),
                (("authentication.kubernetes.io/pod-name", ("prometheus-0",)),),
            ),
            id="authenticated-group-added-and-extra-kept",
        ),
    ],
)
async def test_who_a_request_is(header: str | None, user: User) -> None:
    assert await Authenticator(reviews()).authenticate(header) == user


@pytest.mark.parametrize(
    "token",
    [
        pytest.param("unknown-token", id="not-accepted"),
        pytest.param("expired-token", id="not-accepted-with-an-error"),
        pytest.param("broken-token", id="review-answered-with-an-error-status"),
        pytest.param("unreachable-token", id="apiserver-unreachable"),
    ],
)
async def test_a_token_that_is_not_accepted_is_unauthenticated(token: str) -> None:
    with pytest.raises(Unauthenticated):
        await Authenticator(reviews()).authenticate(f"Bearer {token}")


async def test_the_token_review_carries_only_the_token() -> None:
    fake = reviews()
    await Authenticator(fake).authenticate("Bearer alice-token")
    ((path, body),) = fake.calls
    assert path == TOKEN_REVIEWS
    assert body == {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "spec": {"token": "alice-token"},
    }


@pytest.mark.parametrize(
    ("token", "reviews_after"),
    [
        # elapsed seconds after the first request -> TokenReviews made by then
        pytest.param("alice-token", {0: 1, 9.9: 1, 10: 2, 15: 2, 20: 3}, id="accepted-for-10s"),
        pytest.param("unknown-token", {0: 1, 9.9: 1, 10: 2}, id="rejected-for-10s"),
        pytest.param("broken-token", {0: 1, 1: 2, 2: 3}, id="failed-reviews-not-kept"),
    ],
)
async def test_token_reviews_are_cached_ten_seconds(token: str, reviews_after: dict[float, int]) -> None:
    fake, clock = reviews(), Clock()
    authenticator = Authenticator(fake, now=clock)
    start = clock.t
    for elapsed, expected in reviews_after.items():
        clock.t = start + elapsed
        with contextlib.suppress(Unauthenticated):
            await authenticator.authenticate(f"Bearer {token}")
        assert fake.count(TOKEN_REVIEWS) == expected, f"after {elapsed}s"


async def test_tokens_are_cached_apart() -> None:
    fake = reviews()
    authenticator = Authenticator(fake, now=Clock())
    for _ in range(3):
        assert (await authenticator.authenticate("Bearer alice-token")).name == "alice"
        assert (await authenticator.authenticate("Bearer admin-token")).name == "admin"
    assert fake.count(TOKEN_REVIEWS) == 2


# ---------------------------------------------------------------------------------------------- authorization
SCRAPER_USER = User(SCRAPER["username"], "u-2", ("system:serviceaccounts", "system:authenticated"))
ALICE_USER = User("alice", "u-1", ("devs", "system:authenticated"))
ADMIN_USER = User("admin", "", ("system:masters", "system:authenticated"))


@pytest.mark.parametrize(
    ("user", "path", "decision", "reviewed"),
    [
        pytest.param(ANONYMOUS_USER, "/healthz", Decision(True), False, id="healthz-always"),
        pytest.param(ANONYMOUS_USER, "/readyz", Decision(True), False, id="readyz-always"),
        pytest.param(ANONYMOUS_USER, "/livez", Decision(True), False, id="livez-always"),
        pytest.param(ANONYMOUS_USER, "/healthz/ping", Decision(False), True, id="one-check-is-reviewed"),
        pytest.param(ANONYMOUS_USER, "/metrics", Decision(False), True, id="anonymous-metrics-reviewed"),
        pytest.param(ADMIN_USER, "/metrics", Decision(True), False, id="system-masters-always"),
        pytest.param(ADMIN_USER, "/configz", Decision(True), False, id="system-masters-configz"),
        pytest.param(SCRAPER_USER, "/metrics", Decision(True), True, id="review-allows"),
        pytest.param(ALICE_USER, "/metrics", Decision(False), True, id="review-does-not-allow"),
    ],
)
async def test_who_may_get_which_path(user: User, path: str, decision: Decision, reviewed: bool) -> None:
    fake = reviews()
    assert await Authorizer(fake).authorize(user, "get", path) == decision
    assert fake.count(SUBJECT_ACCESS_REVIEWS) == int(reviewed)


@pytest.mark.parametrize(
    ("status", "decision"),
    [
        (
            {"allowed": True, "reason": "RBAC: allowed by ClusterRoleBinding"},
            Decision(True, "RBAC: allowed by ClusterRoleBinding"),
        ),
        ({"allowed": False}, Decision(False)),
        ({"allowed": False, "reason": "no RBAC policy matched"}, Decision(False, "no RBAC policy matched")),
        (
            {"allowed": False, "denied": True, "reason": "denied by policy"},
            Decision(False, "denied by policy"),
        ),
        ({}, Decision(False)),
    ],
)
async def test_the_access_review_decides(status: dict[str, Any], decision: Decision) -> None:
    fake = FakeReviews(access=lambda spec: status)
    assert await Authorizer(fake).authorize(ALICE_USER, "get", "/metrics") == decision


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param(ApiError(403, "Forbidden", "cannot create subjectaccessreviews"), id="review-forbidden"),
        pytest.param(aiohttp.ClientConnectionError("connection refused"), id="apiserver-unreachable"),
        pytest.param(TimeoutError(), id="timed-out"),
        pytest.param({"allowed": True, "denied": True}, id="allowed-and-denied"),
    ],
)
async def test_an_access_review_that_fails_gives_no_decision(answer: Any) -> None:
    fake = FakeReviews(access=lambda spec: answer)
    with pytest.raises(AuthorizationFailed):
        await Authorizer(fake).authorize(ALICE_USER, "get", "/metrics")


async def test_the_access_review_names_the_user_and_the_non_resource_path() -> None:
    fake = reviews()
    user = User("sa", "u-9", ("g1", "system:authenticated"), (("k", ("v1", "v2")),))
    await Authorizer(fake).authorize(user, "get", "/configz")
    ((path, body),) = fake.calls
    assert path == SUBJECT_ACCESS_REVIEWS
    assert body == {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": "sa",
            "uid": "u-9",
            "groups": ["g1", "system:authenticated"],
            "extra": {"k": ["v1", "v2"]},
            "nonResourceAttributes": {"path": "/configz", "verb": "get"},
        },
    }


@pytest.mark.parametrize(
    ("user", "reviews_after"),
    [
        pytest.param(SCRAPER_USER, {0: 1, 9.9: 1, 10: 2, 19.9: 2, 20: 3}, id="allowed-for-10s"),
        pytest.param(ALICE_USER, {0: 1, 9.9: 1, 10: 2}, id="denied-for-10s"),
    ],
)
async def test_access_reviews_are_cached_ten_seconds(user: User, reviews_after: dict[float, int]) -> None:
    fake, clock = reviews(), Clock()
    authorizer = Authorizer(fake, now=clock)
    start = clock.t
    for elapsed, expected in reviews_after.items():
        clock.t = start + elapsed
        await authorizer.authorize(user, "get", "/metrics")
        assert fake.count(SUBJECT_ACCESS_REVIEWS) == expected, f"after {elapsed}s"


async def test_access_reviews_are_cached_per_user_path_and_verb() -> None:
    fake = reviews()
    authorizer = Authorizer(fake, now=Clock())
    asks = [
        (SCRAPER_USER, "get", "/metrics"),
        (SCRAPER_USER, "get", "/configz"),
        (SCRAPER_USER, "head", "/metrics"),
    ]
    asks += [(ALICE_USER, "get", "/metrics")]
    for _ in range(3):
        for user, verb, path in asks:
            await authorizer.authorize(user, verb, path)
    assert fake.count(SUBJECT_ACCESS_REVIEWS) == len(asks)


async def test_a_failed_access_review_is_asked_again() -> None:
    answers: list[Any] = [ApiError(500, "InternalError", "boom"), {"allowed": True}]
    fake = FakeReviews(access=lambda spec: answers.pop(0))
    authorizer = Authorizer(fake, now=Clock())
    with pytest.raises(AuthorizationFailed):
        await authorizer.authorize(SCRAPER_USER, "get", "/metrics")
    assert await authorizer.authorize(SCRAPER_USER, "get", "/metrics") == Decision(True)


@pytest.mark.parametrize(
    ("always", "path", "allowed"),
    [
        (["/metrics"], "/metrics", True),
        (["/metrics"], "/metrics/extra", False),
        (["/debug/*"], "/debug/pprof", True),
        (["/debug/*"], "/debug", False),
        (["/*"], "/anything", True),
        (["/"], "/", True),
        ([], "/healthz", False),
    ],
)
async def test_always_allowed_paths_match_exactly_or_by_trailing_star(
    always: list[str], path: str, allowed: bool
) -> None:
    authorizer = Authorizer(FakeReviews(), always_allow_paths=always)
    assert (await authorizer.authorize(ANONYMOUS_USER, "get", path)).allowed is allowed


def test_a_star_inside_an_always_allowed_path_is_refused() -> None:
    with pytest.raises(ValueError, match="trailing"):
        Authorizer(FakeReviews(), always_allow_paths=["/de*bug"])


# ---------------------------------------------------------------------------------------------- health format
def _checks(*states: tuple[str, str | None]) -> list[HealthCheck]:
    return [HealthCheck(name, lambda problem=problem: problem) for name, problem in states]


@pytest.mark.parametrize(
    ("checks", "verbose", "exclude", "status", "body"),
    [
        pytest.param(_checks(("ping", None), ("log", None)), False, [], 200, "ok", id="ok"),
        pytest.param(
            _checks(("ping", None), ("log", None)),
            True,
            [],
            200,
            "[+]ping ok\n[+]log ok\nhealthz check passed\n",
            id="verbose-lists-each-check",
        ),
        pytest.param(
            _checks(("ping", None), ("informers", "pods not synced")),
            False,
            [],
            500,
            "[+]ping ok\n[-]informers failed: reason withheld\nhealthz check failed\n",
            id="failure-is-always-verbose-and-withholds-the-reason",
        ),
        pytest.param(
            _checks(("ping", None), ("informers", "pods not synced")),
            True,
            ["informers"],
            200,
            "[+]ping ok\n[+]informers excluded: ok\nhealthz check passed\n",
            id="excluded-check-passes",
        ),
        pytest.param(
            _checks(
                ("ping", None),
            ),
            True,
            ["nope", "absent"],
            200,
            '[+]ping ok\nwarn: some health checks cannot be excluded: no matches for "absent","nope"\n'
            "healthz check passed\n",
            id="unknown-exclusions-are-warned-about",
        ),
    ],
)
def test_health_report_format(
    checks: list[HealthCheck], verbose: bool, exclude: list[str], status: int, body: str
) -> None:
    report = health_report("healthz", checks, verbose=verbose, exclude=exclude)
    assert (report.status, report.body) == (status, body)


def test_a_check_that_raises_has_failed() -> None:
    def broken() -> str | None:
        raise RuntimeError("boom")

    report = health_report("readyz", [HealthCheck("broken", broken)], verbose=False)
    assert report.status == 500
    assert report.body == "[-]broken failed: reason withheld\nreadyz check failed\n"
    assert "boom" in report.failures[0]


# ---------------------------------------------------------------------------------------------- over HTTP
@pytest.fixture
def endpoints() -> Endpoints:
    return Endpoints(
        SchedulerMetrics(),
        healthz=_checks(("ping", None)),
        readyz=_checks(("sched-handler-sync", "informers not synced: pods")),
        configz=lambda: {"apiVersion": "kubescheduler.config.k8s.io/v1", "parallelism": 16},
    )


@pytest_asyncio.fixture(loop_scope="function")
async def secure(endpoints: Endpoints) -> AsyncIterator[TestClient[Any, Any]]:
    fake = reviews()
    guard = Guard(Authenticator(fake), Authorizer(fake))
    async with TestClient(TestServer(endpoints.application(guard))) as client:
        yield client


def _bearer(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


@pytest.mark.parametrize(
    ("path", "token", "status"),
    [
        ("/healthz", None, 200),
        ("/livez", None, 200),
        ("/readyz", None, 500),
        ("/healthz", "scraper-token", 200),
        # authentication comes before the always-allowed paths, as in kube's handler chain
        ("/healthz", "unknown-token", 401),
        ("/metrics", None, 403),
        ("/metrics", "unknown-token", 401),
        ("/metrics", "broken-token", 401),
        ("/metrics", "alice-token", 403),
        ("/metrics", "scraper-token", 200),
        ("/metrics", "admin-token", 200),
        ("/configz", None, 403),
        ("/configz", "scraper-token", 200),
        ("/healthz/ping", None, 403),
        ("/healthz/ping", "scraper-token", 200),
        ("/nothing-here", None, 403),
        ("/nothing-here", "scraper-token", 404),
    ],
)
async def test_secure_port_decisions(
    secure: TestClient[Any, Any], path: str, token: str | None, status: int
) -> None:
    async with secure.get(path, headers=_bearer(token)) as response:
        assert response.status == status, await response.text()
        assert response.headers["Cache-Control"] == "no-cache, private"


@pytest.mark.parametrize(
    ("token", "status", "reason", "message"),
    [
        (None, 403, "Forbidden", 'forbidden: User "system:anonymous" cannot get path "/metrics"'),
        ("alice-token", 403, "Forbidden", 'forbidden: User "alice" cannot get path "/metrics"'),
        ("unknown-token", 401, "Unauthorized", "Unauthorized"),
    ],
)
async def test_refusals_are_kube_status_objects(
    secure: TestClient[Any, Any], token: str | None, status: int, reason: str, message: str
) -> None:
    async with secure.get("/metrics", headers=_bearer(token)) as response:
        assert response.status == status
        assert response.content_type == "application/json"
        assert await response.json() == {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": reason,
            "details": {},
            "code": status,
        }


async def test_a_failed_access_review_is_an_internal_error(endpoints: Endpoints) -> None:
    fake = FakeReviews(access=lambda spec: ApiError(403, "Forbidden", "no rights to review"))
    async with (
        TestClient(TestServer(endpoints.application(Guard(Authenticator(fake), Authorizer(fake))))) as client,
        client.get("/metrics") as response,
    ):
        assert response.status == 500
        body = await response.json()
    assert body["reason"] == "InternalError"
    assert body["message"].startswith("Internal error occurred: ")


async def test_plain_port_answers_everyone(endpoints: Endpoints) -> None:
    async with TestClient(TestServer(endpoints.application())) as client:
        for path in ("/metrics", "/configz", "/healthz", "/livez"):
            async with client.get(path) as response:
                assert response.status == 200, path


async def test_readyz_verbose_and_one_check(endpoints: Endpoints) -> None:
    async with TestClient(TestServer(endpoints.application())) as client:
        async with client.get("/readyz?verbose") as response:
            assert response.status == 500
            assert response.headers["Content-Type"] == "text/plain; charset=utf-8"
            assert (
                await response.text()
                == "[-]sched-handler-sync failed: reason withheld\nreadyz check failed\n"
            )
        async with client.get("/readyz/sched-handler-sync") as response:
            # the one check's own endpoint says why: it is not among the always-allowed paths
            assert response.status == 500
            assert await response.text() == "internal server error: informers not synced: pods\n"
        async with client.get("/healthz?verbose") as response:
            assert await response.text() == "[+]ping ok\nhealthz check passed\n"


async def test_configz_is_the_configuration_under_componentconfig(endpoints: Endpoints) -> None:
    async with TestClient(TestServer(endpoints.application())) as client, client.get("/configz") as response:
        assert response.content_type == "application/json"
        assert await response.json() == {
            "componentconfig": {"apiVersion": "kubescheduler.config.k8s.io/v1", "parallelism": 16}
        }


# ---------------------------------------------------------------------------------------------- certificates
def _certs(chain: bytes) -> list[x509.Certificate]:
    return x509.load_pem_x509_certificates(chain)


def test_a_generated_certificate_is_kubes() -> None:
    now = datetime.datetime(2030, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)
    chain, key = generate_self_signed("localhost", ["127.0.0.1", "10.1.2.3"], ["localhost"], now=now)
    serving, ca = _certs(chain)
    stamp = int(now.timestamp())
    assert serving.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == f"localhost@{stamp}"
    assert ca.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == f"localhost-ca@{stamp}"
    assert serving.issuer == ca.subject
    serving.verify_directly_issued_by(ca)
    assert serving.not_valid_before_utc == now - datetime.timedelta(hours=1)
    assert serving.not_valid_after_utc == now - datetime.timedelta(hours=1) + datetime.timedelta(days=365)
    names = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["localhost", "localhost"]
    assert names.get_values_for_type(x509.IPAddress) == [
        ipaddress.ip_address("127.0.0.1"),
        ipaddress.ip_address("10.1.2.3"),
    ]
    usage = serving.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usage) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    assert key.startswith(b"-----BEGIN RSA PRIVATE KEY-----")


@pytest.mark.parametrize(
    ("bind", "ips", "dns"),
    [
        ("0.0.0.0", ["127.0.0.1"], ["localhost"]),
        ("::", ["127.0.0.1"], ["localhost"]),
        ("127.0.0.1", ["127.0.0.1"], []),
        ("10.0.0.7", ["127.0.0.1", "10.0.0.7"], []),
    ],
)
def test_a_generated_certificate_names_the_bind_address(bind: str, ips: list[str], dns: list[str]) -> None:
    assert subject_alternatives(bind) == (ips, dns)


def _write_pair(directory: Path, name: str = "tls") -> tuple[str, str, bytes]:
    chain, key = generate_self_signed("localhost", ["127.0.0.1"], [])
    cert_file, key_file = directory / f"{name}.crt", directory / f"{name}.key"
    cert_file.write_bytes(chain)
    key_file.write_bytes(key)
    return str(cert_file), str(key_file), chain


def _client_context(chain: bytes) -> ssl.SSLContext:
    """A client that trusts only the CA at the end of `chain`."""
    return ssl.create_default_context(cadata=_certs(chain)[-1].public_bytes(Encoding.PEM).decode())


async def _served_chain(serving: ServingCertificate, verify: bytes | None = None) -> bytes:
    """The certificate (DER) a TLS client sees on a Listener with this certificate, verified for
    `localhost` against the CA at the end of `verify` when given; the port answers HTTPS too."""
    listener = Listener(Endpoints(SchedulerMetrics()).application(), "127.0.0.1", 0, serving.context)
    await listener.start()
    try:
        if verify is None:
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        else:
            context = _client_context(verify)
        _, writer = await asyncio.open_connection(
            "127.0.0.1", listener.port, ssl=context, server_hostname="localhost"
        )
        peer = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        writer.close()
        await writer.wait_closed()
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"https://127.0.0.1:{listener.port}/healthz", ssl=False) as response,
        ):
            assert (response.status, await response.text()) == (200, "ok")
        return bytes(peer)
    finally:
        await listener.stop()


async def test_the_secure_port_serves_the_given_files_and_their_rotation(tmp_path: Path) -> None:
    cert_file, key_file, chain = _write_pair(tmp_path)
    serving = ServingCertificate.choose(cert_file, key_file, None, "127.0.0.1")
    first = await _served_chain(serving, verify=chain)
    assert first == _certs(chain)[0].public_bytes(Encoding.DER)
    assert serving.reload_if_changed() is False
    _write_pair(tmp_path)
    os.utime(cert_file, ns=(1, 1))
    assert serving.reload_if_changed() is True
    assert await _served_chain(serving) != first


async def test_a_half_written_rotation_keeps_the_certificate_in_use(tmp_path: Path) -> None:
    cert_file, key_file, chain = _write_pair(tmp_path)
    serving = ServingCertificate.choose(cert_file, key_file, None, "127.0.0.1")
    Path(key_file).write_bytes(b"not a key")
    assert serving.reload_if_changed() is False
    await _served_chain(serving, verify=chain)


@pytest.mark.parametrize(("given_cert", "given_key"), [(True, False), (False, True)])
def test_cert_and_key_files_go_together(tmp_path: Path, given_cert: bool, given_key: bool) -> None:
    cert_file, key_file, _ = _write_pair(tmp_path)
    with pytest.raises(CertificateError, match="together"):
        ServingCertificate.choose(
            cert_file if given_cert else None, key_file if given_key else None, None, "0.0.0.0"
        )


def test_unreadable_files_are_a_certificate_error(tmp_path: Path) -> None:
    with pytest.raises(CertificateError):
        ServingCertificate.choose(str(tmp_path / "absent.crt"), str(tmp_path / "absent.key"), None, "0.0.0.0")


async def test_cert_dir_keeps_the_generated_certificate_across_restarts(tmp_path: Path) -> None:
    cert_dir = tmp_path / "certs"
    first = ServingCertificate.choose(None, None, str(cert_dir), "127.0.0.1")
    crt, key = cert_dir / f"{PAIR_NAME}.crt", cert_dir / f"{PAIR_NAME}.key"
    assert crt.is_file() and key.is_file()
    assert key.stat().st_mode & 0o077 == 0, "the key is readable by its owner only"
    written = crt.read_bytes()
    served = await _served_chain(first, verify=written)
    again = ServingCertificate.choose(None, None, str(cert_dir), "127.0.0.1")
    assert crt.read_bytes() == written
    assert await _served_chain(again) == served


async def test_without_files_or_dir_a_certificate_is_generated_in_memory(tmp_path: Path) -> None:
    serving = ServingCertificate.choose(None, None, None, "0.0.0.0")
    assert serving.cert_file is None and "memory" in serving.origin
    peer = x509.load_der_x509_certificate(await _served_chain(serving))
    assert peer.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value.startswith("localhost@")


# ---------------------------------------------------------------------------------------------- flags
@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        pytest.param(
            [],
            {
                "secure_port": 10259,
                "tls_cert_file": None,
                "tls_private_key_file": None,
                "cert_dir": None,
                "always_allow_paths": ("/healthz", "/readyz", "/livez"),
                "insecure_port": 0,
            },
            id="kube-scheduler-defaults-and-no-plain-port",
        ),
        pytest.param(
            [
                "--tls-cert-file=/tls/tls.crt",
                "--tls-private-key-file=/tls/tls.key",
                "--cert-dir=/var/run/koordpy",
                "--insecure-port=10251",
                "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
            ],
            {
                "tls_cert_file": "/tls/tls.crt",
                "tls_private_key_file": "/tls/tls.key",
                "cert_dir": "/var/run/koordpy",
                "insecure_port": 10251,
                "always_allow_paths": ("/healthz", "/readyz", "/livez", "/metrics"),
            },
            id="every-serving-flag",
        ),
        pytest.param(["--authorization-always-allow-paths="], {"always_allow_paths": ()}, id="allow-nothing"),
        pytest.param(["--secure-port=0"], {"secure_port": 0}, id="no-secure-port"),
    ],
)
def test_serving_flags_reach_the_run_options(argv: list[str], expected: dict[str, Any]) -> None:
    from koordpy.cli import build_parser
    from koordpy.cluster.flags import run_options
    from koordpy.config.models import SchedulerConfiguration

    options = run_options(build_parser().parse_args(["run", *argv]), SchedulerConfiguration())
    assert {key: getattr(options, key) for key in expected} == expected


async def test_health_check_slis_count_each_check_run_by_endpoint(endpoints: Endpoints) -> None:
    # component-base's slis: kubernetes_healthcheck is the last result (1 healthy, 0 not) per check
    # and endpoint, kubernetes_healthchecks_total counts every run by status; an excluded check is
    # not run, so not counted
    async with TestClient(TestServer(endpoints.application())) as client:
        for path in ("/healthz", "/healthz", "/readyz", "/readyz?exclude=sched-handler-sync"):
            async with client.get(path):
                pass
        async with client.get("/metrics/slis") as response:
            assert response.status == 200
            text = await response.text()
    samples = {
        line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line[:1] != "#"
    }
    assert samples['kubernetes_healthcheck{name="ping",type="healthz"}'] == 1.0
    assert samples['kubernetes_healthcheck{name="sched-handler-sync",type="readyz"}'] == 0.0
    assert samples['kubernetes_healthchecks_total{name="ping",status="success",type="healthz"}'] == 2.0
    assert (
        samples['kubernetes_healthchecks_total{name="sched-handler-sync",status="error",type="readyz"}']
        == 1.0
    )
    assert not any(name.endswith("_created") or "_created{" in name for name in samples)


async def test_slis_need_the_same_review_as_metrics(secure: TestClient[Any, Any]) -> None:
    for token, status in ((None, 403), ("scraper-token", 200)):
        async with secure.get("/metrics/slis", headers=_bearer(token)) as response:
            assert response.status == status
