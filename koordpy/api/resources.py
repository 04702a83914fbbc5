"""Resource names and resource lists in canonical integer units.

cpu is kept in millicores, every other resource in its base unit (bytes for memory,
ephemeral-storage and hugepages, a count for extended resources), all as Python ints, so
that sums and comparisons are exact and can be moved into int64 arrays unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from koordpy.api.errors import SpecError
from koordpy.api.quantity import QuantityError, parse_quantity, to_int, to_milli

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"
HUGEPAGES_PREFIX = "hugepages-"

# kube-scheduler's "non-zero" request defaults: a container that asks for no cpu or memory is
# still counted as using a little, so that spreading and balanced scores see it.
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024

ResourceList = dict[str, int]

# The largest amount of any one resource the scheduler represents, in canonical units: 2^53 is
# ~9e12 cores, 8 PiB of memory, beyond any node. Larger quantities saturate here, as kube-scheduler
# saturates at the int64 range: what they mean ("more than any node has") is kept, and every sum
# and percentage over them stays far inside int64 and exact in float64, so no matrix can overflow.
MAX_AMOUNT = 1 << 53


def is_scalar_resource(name: str) -> bool:
    """Extended resources, hugepages and attachable volumes: everything but the four core names."""
    return name not in (CPU, MEMORY, EPHEMERAL_STORAGE, PODS)


def is_extended_resource(name: str) -> bool:
    """A domain-prefixed resource outside kubernetes.io, e.g. `nvidia.com/gpu`."""
    if "/" not in name:
        return False
    domain = name.split("/", 1)[0]
    return not (domain == "kubernetes.io" or domain.endswith(".kubernetes.io")) and not name.startswith(
        "requests."
    )


def canonical_amount(name: str, value: Any, path: str) -> int:
    """One quantity in canonical units; raises SpecError naming `path` when it is unparsable."""
    try:
        q = parse_quantity(value)
    except QuantityError as err:
        raise SpecError(path, str(err)) from None
    if q < 0:
        raise SpecError(path, f"quantity {value!r} must not be negative")
    return min(to_milli(q) if name == CPU else to_int(q), MAX_AMOUNT)


def parse_resource_list(obj: Mapping[str, Any] | None, path: str) -> ResourceList:
    if not obj:
        return {}
    if not isinstance(obj, Mapping):
        raise SpecError(path, f"expected a map of resource name to quantity, got {type(obj).__name__}")
    out: ResourceList = {}
    for name, value in obj.items():
        if not isinstance(name, str) or not name:
            raise SpecError(path, f"invalid resource name {name!r}")
        out[name] = canonical_amount(name, value, f"{path}.{name}")
    return out


def add_into(acc: ResourceList, other: Mapping[str, int]) -> None:
    """Sums saturate at MAX_AMOUNT, like each amount: a pod of many huge containers asks for as
    much as a pod of one."""
    for name, value in other.items():
        acc[name] = min(acc.get(name, 0) + value, MAX_AMOUNT)


def max_into(acc: ResourceList, other: Mapping[str, int]) -> None:
    for name, value in other.items():
        if value > acc.get(name, 0):
            acc[name] = value


def format_amount(name: str, value: int) -> str:
    """A human rendering for messages: cpu as cores or millicores, bytes with a binary suffix."""
    if name == CPU:
        return str(value // 1000) if value % 1000 == 0 else f"{value}m"
    if name in (MEMORY, EPHEMERAL_STORAGE) or name.startswith(HUGEPAGES_PREFIX):
        for suffix, factor in (("Ti", 1 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)):
            if value >= factor and value % factor == 0:
                return f"{value // factor}{suffix}"
    return str(value)


def sorted_names(names: Iterable[str]) -> list[str]:
    """cpu, memory, ephemeral-storage first (the order kube-scheduler reports them), then by name."""
    first = {CPU: 0, MEMORY: 1, EPHEMERAL_STORAGE: 2, PODS: 3}
    return sorted(set(names), key=lambda n: (first.get(n, 4), n))
