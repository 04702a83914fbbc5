"""A gang that one member's quota holds: its other members are held with it, by the quota's name.

A member whose quota has a problem (or names a quota that does not exist) is held at PreEnqueue.
When the members left cannot make a gang of its group reach its minMember, the group can never be
placed as a unit: the other members would be placed, hold their nodes at Permit until the timeout,
and be rejected with no word of the quota ("rejected due to timeout after waiting 600s"). They are
held at PreEnqueue instead, with the held member's quota problem in their message and in the
group's (the PodGroup status, the simulate report), as Coscheduling holds a gang that waits for
members its scheduling gates hold. They go once the quota is put right (every ElasticQuota event
asks the held pods again) or the gang has enough members without the held one (the group's pass
takes each member through PreEnqueue again).
"""

from __future__ import annotations

from koordpy.api.pod import Pod
from koordpy.plugins.coscheduling.registry import GangRegistry
from koordpy.plugins.elasticquota.book import QuotaBook
from koordpy.quota.tree import QuotaProblem


def held_by_a_member(
    registry: GangRegistry | None, book: QuotaBook, pod: Pod
) -> tuple[QuotaProblem, str] | None:
    """(the problem, the message) when a gang of the pod's group cannot reach its minMember
    without members their quota holds; None otherwise (the pod's own quota is the caller's)."""
    if registry is None:
        return None
    # a pod of no gang first: the usual case asks nothing of the book, which a bulk of new pods
    # would otherwise bring up to date once per pod
    gang = registry.gang(pod)
    if gang is None:
        return None
    book.ensure()
    if not book.held:
        # no pod is held by a quota: nothing more to ask
        return None
    if registry.once_satisfied(gang):
        return None
    for other in registry.group(gang):
        if other is None or other.spec is None:
            continue
        children = other.children
        # the smaller set walked: a gang may have thousands of members, few pods are held
        if len(book.held) <= len(children):
            held = sorted(k for k in book.held if k in children and k != pod.key)
        else:
            held = sorted(k for k in children if k in book.held and k != pod.key)
        if not held or len(children) - len(held) >= other.spec.min_member:
            continue
        entry = book.entries.get(held[0])
        problem = book.problem_of(entry.pod) if entry is not None else None
        if problem is None:
            continue
        more = f" (and {len(held) - 1} more member(s))" if len(held) > 1 else ""
        head = f"gang {gang.id}" if len(gang.group) == 1 else f"gang group [{gang.group_id}]"
        message = (
            f"{head} cannot be placed as a whole: member {held[0]}{more} of gang {other.id} is held "
            f"by its quota, leaving {len(children) - len(held)} of minMember {other.spec.min_member}: "
            f"{problem.message}"
        )
        # the group's own message (PodGroup status, the simulate report) says it too
        registry.messages[gang.group_id] = message
        return problem, message
    return None
