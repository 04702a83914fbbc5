"""VolumeBinding, laid out by concern: matching.py (which volume a claim would be bound to),
decisions.py (the pod's claims, and per row what FindPodVolumes answers), scorer.py (the storage
utilization score), migration.py (in-tree volumes read as their CSI translation), topology.py
(storage objects' node selections as row masks), args.py (VolumeBindingArgs), plugin.py (the
plugin, its extension points and events)."""

from koordpy.plugins.volumebinding.args import DEFAULT_SHAPE, UtilizationShapePoint, VolumeBindingArgs
from koordpy.plugins.volumebinding.decisions import (
    ERR_REASON_BIND_CONFLICT,
    ERR_REASON_NODE_CONFLICT,
    ERR_REASON_NOT_ENOUGH_SPACE,
    ERR_REASON_PV_NOT_EXIST,
    ERR_REASON_UNBOUND_IMMEDIATE,
)
from koordpy.plugins.volumebinding.plugin import NAME, VolumeBinding

__all__ = [
    "DEFAULT_SHAPE",
    "ERR_REASON_BIND_CONFLICT",
    "ERR_REASON_NODE_CONFLICT",
    "ERR_REASON_NOT_ENOUGH_SPACE",
    "ERR_REASON_PV_NOT_EXIST",
    "ERR_REASON_UNBOUND_IMMEDIATE",
    "NAME",
    "UtilizationShapePoint",
    "VolumeBinding",
    "VolumeBindingArgs",
]
