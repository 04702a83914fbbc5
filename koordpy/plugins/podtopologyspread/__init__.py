"""PodTopologySpread, laid out as kube-scheduler's package: common.py (constraints, selectors,
node masks, what is kept between cycles), filtering.py (PreFilter, AddPod/RemovePod, Filter),
scoring.py (PreScore, Score, NormalizeScore), plugin.py (the plugin, its args and events)."""

from koordpy.plugins.podtopologyspread.common import NAME
from koordpy.plugins.podtopologyspread.filtering import (
    ERR_REASON_CONSTRAINTS_NOT_MATCH,
    ERR_REASON_NODE_LABEL_NOT_MATCH,
)
from koordpy.plugins.podtopologyspread.plugin import (
    SYSTEM_DEFAULT_CONSTRAINTS,
    DefaultConstraint,
    PodTopologySpread,
    PodTopologySpreadArgs,
)

__all__ = [
    "ERR_REASON_CONSTRAINTS_NOT_MATCH",
    "ERR_REASON_NODE_LABEL_NOT_MATCH",
    "NAME",
    "SYSTEM_DEFAULT_CONSTRAINTS",
    "DefaultConstraint",
    "PodTopologySpread",
    "PodTopologySpreadArgs",
]
