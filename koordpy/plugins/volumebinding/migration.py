"""In-tree volumes seen as the CSI volumes they migrate to (kube's tryTranslatePVToCSI): on a node
whose CSINode lists the volume's in-tree plugin as migrated, the volume's node affinity is the one
csi-translation-lib gives it, with the zone requirement on the CSI driver's topology key (taken
from the volume's zone label when its affinity has none). Pure: a volume in, a selector out."""

from __future__ import annotations

from collections.abc import Mapping

from koordpy.api.nodeselector import IN, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm
from koordpy.api.storage import (
    BETA_REGION_LABEL,
    BETA_ZONE_LABEL,
    REGION_LABEL,
    ZONE_LABEL,
    PersistentVolume,
)

# the in-tree plugins kube-scheduler translates (isCSIMigrationOnForPlugin), each with the topology
# key of the CSI driver it migrates to; Portworx volumes translate without topology
TOPOLOGY_KEYS: Mapping[str, str | None] = {
    "kubernetes.io/gce-pd": "topology.gke.io/zone",
    "kubernetes.io/aws-ebs": "topology.ebs.csi.aws.com/zone",
    "kubernetes.io/azure-disk": "topology.disk.csi.azure.com/zone",
    "kubernetes.io/cinder": "topology.cinder.csi.openstack.org/zone",
    "kubernetes.io/portworx-volume": None,
}
# a label listing several zones (a regional disk)
_MULTI_ZONE_DELIMITER = "__"


def translates(pv: PersistentVolume) -> bool:
    """Whether the volume's affinity can read differently on a node that migrated its plugin."""
    return TOPOLOGY_KEYS.get(pv.in_tree_plugin) is not None


def _has_key(selector: NodeSelector | None, key: str) -> bool:
    return selector is not None and any(r.key == key for t in selector.terms for r in t.match_expressions)


def _has_values(selector: NodeSelector | None, key: str) -> bool:
    """getTopologyValues is not empty: some requirement on the key names a value."""
    return selector is not None and any(
        r.key == key and r.values for t in selector.terms for r in t.match_expressions
    )


def _zone_and_region_labels(pv: PersistentVolume) -> tuple[str, str]:
    """csi-translation-lib's getTopologyLabel: GA or beta, by what the affinity, then the labels,
    use; GA when neither says."""
    if _has_key(pv.node_affinity, ZONE_LABEL):
        return ZONE_LABEL, REGION_LABEL
    if _has_key(pv.node_affinity, BETA_ZONE_LABEL):
        return BETA_ZONE_LABEL, BETA_REGION_LABEL
    if ZONE_LABEL in pv.labels:
        return ZONE_LABEL, REGION_LABEL
    if BETA_ZONE_LABEL in pv.labels:
        return BETA_ZONE_LABEL, BETA_REGION_LABEL
    return ZONE_LABEL, REGION_LABEL


def _renamed(selector: NodeSelector, old: str, new: str) -> NodeSelector:
    return NodeSelector(
        tuple(
            NodeSelectorTerm(
                tuple(
                    NodeSelectorRequirement(new, r.operator, r.values) if r.key == old else r
                    for r in term.match_expressions
                ),
                term.match_fields,
            )
            for term in selector.terms
        )
    )


def translated_affinity(pv: PersistentVolume) -> NodeSelector | None:
    """The volume's node affinity once translated to CSI (translateTopologyFromInTreeToCSI)."""
    key = TOPOLOGY_KEYS.get(pv.in_tree_plugin)
    selector = pv.node_affinity
    if key is None:
        return selector
    zone_label, region_label = _zone_and_region_labels(pv)
    if _has_values(selector, zone_label) and selector is not None:
        selector = _renamed(selector, zone_label, key)
    elif zone_label in pv.labels:
        zones = sorted({z.strip() for z in pv.labels[zone_label].split(_MULTI_ZONE_DELIMITER) if z.strip()})
        if zones:
            added = NodeSelectorRequirement(key, IN, tuple(zones))
            terms = selector.terms if selector is not None and selector.terms else (NodeSelectorTerm(),)
            selector = NodeSelector(
                tuple(NodeSelectorTerm((*t.match_expressions, added), t.match_fields) for t in terms)
            )
    # a beta region requirement becomes the GA one, which newer nodes carry alone
    if (
        region_label == BETA_REGION_LABEL
        and selector is not None
        and _has_values(selector, BETA_REGION_LABEL)
    ):
        selector = _renamed(selector, BETA_REGION_LABEL, REGION_LABEL)
    return selector
