"""Counting a scheduler's API writes through kube-apiserver's audit log.

`scheduler_writes_policy()` is an audit policy for the writes a scheduler makes (bindings, pod status
and metadata, Events, PodGroup status) and nothing else; give it to
`ControlPlane(audit_policy=...)`. `read_audit_log()` turns the JSON log into one `Write` per
completed request, and `count_writes()` counts them by (verb, resource, subresource, namespace,
name). `user_kubeconfig()` gives a program a user of its own, so that its writes can be told apart
from the test's, KWOK's and anyone else's.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.controlplane import ControlPlane, _openssl, write_kubeconfig

WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")
# both API groups that serve Events
EVENT_GROUPS = ("", "events.k8s.io")
POD_GROUP_GROUPS = ("scheduling.sigs.k8s.io", "scheduling.x-k8s.io")
# the stages at which a request is over: one of them per request
FINAL_STAGES = ("ResponseComplete", "Panic")


def scheduler_writes_policy(*, events_level: str = "Metadata") -> dict[str, Any]:
    """An audit policy (audit.k8s.io/v1) that records, at Metadata level, `pods/binding`,
    `pods/status`, patches and updates of pods, Events of both API groups and `podgroups/status`
    (of both PodGroup API groups), and nothing else. Stage RequestReceived is left out, so each
    request is one event.

    `events_level="Request"` records the request body of Event writes as well, which holds an
    Event's `reason` (and `regarding`)."""
    return {
        "apiVersion": "audit.k8s.io/v1",
        "kind": "Policy",
        "omitStages": ["RequestReceived"],
        "rules": [
            {
                "level": events_level,
                "verbs": list(WRITE_VERBS),
                "resources": [{"group": g, "resources": ["events"]} for g in EVENT_GROUPS],
            },
            {
                "level": "Metadata",
                "verbs": list(WRITE_VERBS),
                "resources": [{"group": "", "resources": ["pods/binding", "pods/status"]}],
            },
            {
                "level": "Metadata",
                "verbs": ["patch", "update"],
                # `pods` alone does not match the subresources
                "resources": [{"group": "", "resources": ["pods"]}],
            },
            {
                "level": "Metadata",
                "verbs": list(WRITE_VERBS),
                "resources": [{"group": g, "resources": ["podgroups/status"]} for g in POD_GROUP_GROUPS],
            },
            {"level": "None"},
        ],
    }


@dataclass(frozen=True, slots=True)
class Write:
    """One completed write request, as the audit log records it."""

    verb: str
    group: str  # "" for the core group
    resource: str
    subresource: str
    namespace: str
    name: str
    user: str
    code: int | None
    # the request body, when the policy recorded it (Request level)
    body: Mapping[str, Any] | None = None

    @property
    def key(self) -> WriteKey:
        return (self.verb, self.resource, self.subresource, self.namespace, self.name)

    @property
    def reason(self) -> str | None:
        """An Event's reason, when its request body was recorded (a create, not a series patch)."""
        if self.body is None:
            return None
        reason = self.body.get("reason")
        return reason if isinstance(reason, str) else None


WriteKey = tuple[str, str, str, str, str]


def parse_audit_event(event: Mapping[str, Any]) -> Write | None:
    """The write an audit event (audit.k8s.io/v1 Event) records, or None when it is not a write or
    not the final stage of its request."""
    if event.get("stage") not in FINAL_STAGES or event.get("verb") not in WRITE_VERBS:
        return None
    ref = event.get("objectRef") or {}
    status = event.get("responseStatus") or {}
    body = event.get("requestObject")
    return Write(
        verb=str(event["verb"]),
        group=str(ref.get("apiGroup") or ""),
        resource=str(ref.get("resource") or ""),
        subresource=str(ref.get("subresource") or ""),
        namespace=str(ref.get("namespace") or ""),
        name=str(ref.get("name") or ""),
        user=str((event.get("user") or {}).get("username") or ""),
        code=int(status["code"]) if "code" in status else None,
        body=body if isinstance(body, dict) else None,
    )


def read_audit_log(path: Path) -> list[Write]:
    """Every completed write in a JSON audit log (one event per line), in the log's order. A last
    line that is still being written is left for the next read."""
    writes: list[Write] = []
    lines = path.read_text().splitlines(keepends=True)
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            if number == len(lines) and not line.endswith("\n"):
                break
            raise
        write = parse_audit_event(event)
        if write is not None:
            writes.append(write)
    return writes


def count_writes(writes: Iterable[Write], *, user: str | None = None) -> Counter[WriteKey]:
    """How many writes each (verb, resource, subresource, namespace, name) got, by `user` alone
    when given."""
    return Counter(w.key for w in writes if user is None or w.user == user)


def user_kubeconfig(cp: ControlPlane, path: Path, user: str, group: str = "system:masters") -> Path:
    """A kubeconfig for `user` (a client certificate signed by the control plane's CA, in `group`),
    so that the audit log names this user for the writes of whoever connects with it."""
    assert cp.pki is not None, "control plane not started"
    directory = path.parent
    directory.mkdir(parents=True, exist_ok=True)
    stem = path.stem
    key, csr, crt, ext = (directory / f"{stem}.{suffix}" for suffix in ("key", "csr", "crt", "ext"))
    ext.write_text(
        "basicConstraints=critical,CA:FALSE\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=clientAuth\n"
    )
    _openssl(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        str(key),
        "-out",
        str(csr),
        "-subj",
        f"/O={group}/CN={user}",
        cwd=directory,
    )
    _openssl(
        "x509",
        "-req",
        "-in",
        str(csr),
        "-CA",
        str(cp.pki.ca_crt),
        "-CAkey",
        str(cp.pki.ca_key),
        "-CAcreateserial",
        "-CAserial",
        str(directory / f"{stem}.srl"),
        "-out",
        str(crt),
        "-days",
        "2",
        "-extfile",
        str(ext),
        cwd=directory,
    )
    key.chmod(0o600)
    write_kubeconfig(path, server=cp.server, ca=cp.pki.ca_crt, cert=crt, key=key, user=user)
    return path
