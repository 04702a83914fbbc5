"""The network topology of a ClusterNetworkTopology: its layer chain, the tree its nodes form, and
the `status.detailStatus` an operator writes.

The spec lists layers, each naming its parent (`parentTopologyLayer`) and the node labels whose
values name its domains (`labelKey`). `NodeTopologyLayer` is the bottom (a domain per node, named
after the node) and `ClusterTopologyLayer` the implicit top, a single domain named "". The listed
layers must form one chain from the node layer up.

Domains are identified by their path from the top (the names of the domains above them and their
own), not by (layer, name): two blocks `b1` under spines `s1` and `s2` are two domains.

The object comes from the API as it was written: any field may have any JSON shape. Parsing it is
total: every shape either gives a chain or a `TopologySpecError` naming the field (its path from
the object's root) and what is wrong, and the sizes the tree code walks (layers, label keys) are
bounded here, so nothing downstream meets an unbounded depth.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from koordpy.api.node import Node

CLUSTER_LAYER = "ClusterTopologyLayer"
NODE_LAYER = "NodeTopologyLayer"

# Real topologies have a handful of layers (datacenter, spine, block, accelerator, node); the tree
# code recurses once per layer, so the bound keeps a hostile spec far from Python's recursion limit.
MAX_LAYERS = 32
# label keys tried per layer, and the longest a Kubernetes label key can be (253 prefix + / + 63)
MAX_LABEL_KEYS = 32
MAX_LABEL_KEY_LENGTH = 317
MAX_LAYER_NAME_LENGTH = 253
# the longest excerpt of a bad value quoted in a message
_BRIEF = 60

# names of the domains from the top down to a domain; () is the cluster
DomainPath = tuple[str, ...]


class TopologySpecError(ValueError):
    """A ClusterNetworkTopology whose spec does not describe one chain of layers. `layer` names the
    layer at fault when there is one; `field` the path of the field at fault, from the object's
    root, when one field is (the message starts with it then)."""

    message: str
    layer: str | None
    field: str | None

    def __init__(self, message: str, layer: str | None = None, field: str | None = None) -> None:
        super().__init__(message, layer, field)
        self.message = message
        self.layer = layer
        self.field = field

    def __str__(self) -> str:
        return self.message


def _field_error(field: str, problem: str, layer: str | None = None) -> TopologySpecError:
    return TopologySpecError(f"{field}: {problem}", layer, field)


def brief(value: object) -> str:
    """A short, safe description of any value decoded from JSON or YAML, for a message: strings
    and numbers are quoted (cut short when long), containers are described by their size. It
    never recurses, so neither deep nesting nor an integer too long to print can make the
    message itself fail."""
    if value is None or isinstance(value, bool):
        return repr(value)
    if isinstance(value, int):
        if value.bit_length() > 64:
            return f"an integer of {value.bit_length()} bits"
        return repr(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        if len(value) > _BRIEF:
            return f"{value[:_BRIEF]!r}... ({len(value)} characters)"
        return repr(value)
    if isinstance(value, Mapping):
        return f"an object with {len(value)} field(s)"
    if isinstance(value, list | tuple):
        return f"a list of {len(value)} item(s)"
    return f"a value of type {type(value).__name__}"


def _kind(value: object) -> str:
    """The JSON name of a value's type, for 'must be X, got Y' messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return f"the number {brief(value)}"
    if isinstance(value, str):
        return f"the string {brief(value)}"
    return brief(value)


@dataclass(frozen=True, slots=True)
class Layer:
    name: str
    # the first of these labels with a non-empty value names the node's domain in this layer
    label_keys: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class LayerChain:
    """The listed layers from the top down; the last one is `NodeTopologyLayer`."""

    layers: tuple[Layer, ...]

    @property
    def order(self) -> tuple[str, ...]:
        """Every layer from the top down, `ClusterTopologyLayer` first, `NodeTopologyLayer` last."""
        return (CLUSTER_LAYER, *(layer.name for layer in self.layers))

    @property
    def domain_layers(self) -> tuple[Layer, ...]:
        """The layers between the cluster and the nodes, from the top down."""
        return self.layers[:-1]

    def depth(self, layer: str) -> int:
        """0 for the cluster, one more for each layer down; ValueError for an unknown layer."""
        return self.order.index(layer)

    def is_above(self, upper: str, lower: str) -> bool:
        return self.depth(upper) < self.depth(lower)


def _entries(spec: object) -> list[Any]:
    if isinstance(spec, Mapping):
        raw: object = spec.get("networkTopologySpec")
    elif spec is None or isinstance(spec, list | tuple):
        raw = spec
    else:
        raise _field_error("spec", f"must be an object with networkTopologySpec, got {_kind(spec)}")
    if raw is None or (isinstance(raw, list | tuple) and not raw):
        raise TopologySpecError(
            f"spec.networkTopologySpec lists no layers: list at least {NODE_LAYER} and the layers above it",
            field="spec.networkTopologySpec",
        )
    if not isinstance(raw, list | tuple):
        raise _field_error("spec.networkTopologySpec", f"must be a list, got {_kind(raw)}")
    if len(raw) > MAX_LAYERS:
        raise _field_error(
            "spec.networkTopologySpec", f"lists {len(raw)} layers; at most {MAX_LAYERS} are supported"
        )
    return list(raw)


def _label_keys(entry: Mapping[str, Any], path: str, name: str) -> tuple[str, ...]:
    raw = entry.get("labelKey")
    field = f"{path}.labelKey"
    if raw is None:
        return ()
    if not isinstance(raw, list | tuple):
        raise _field_error(field, f"of layer {name!r} must be a list of label keys, got {_kind(raw)}", name)
    if len(raw) > MAX_LABEL_KEYS:
        raise _field_error(
            field,
            f"of layer {name!r} lists {len(raw)} label keys; at most {MAX_LABEL_KEYS} are supported",
            name,
        )
    keys = []
    for i, key in enumerate(raw):
        if not isinstance(key, str):
            raise _field_error(f"{field}[{i}]", f"of layer {name!r} must be a string, got {_kind(key)}", name)
        if len(key) > MAX_LABEL_KEY_LENGTH:
            raise _field_error(
                f"{field}[{i}]",
                f"of layer {name!r} is {len(key)} characters long; a label key has at most "
                f"{MAX_LABEL_KEY_LENGTH}",
                name,
            )
        if key:
            keys.append(key)
    return tuple(keys)


def parse_layer_chain(spec: Mapping[str, Any] | Sequence[Any] | None) -> LayerChain:
    """The chain of layers of a ClusterNetworkTopology's `spec` (or its `networkTopologySpec`
    list); TopologySpecError naming the layer when the layers do not form one chain, and the
    field when one has the wrong shape (any shape at all gives one or the other)."""
    parents: dict[str, str] = {}
    keys: dict[str, tuple[str, ...]] = {}
    listed: list[str] = []
    # each layer's entry, for the field path of a problem found once every layer is known
    entry_of: dict[str, str] = {}
    for i, entry in enumerate(_entries(spec)):
        path = f"spec.networkTopologySpec[{i}]"
        if not isinstance(entry, Mapping):
            raise _field_error(path, f"must be an object, got {_kind(entry)}")
        name = entry.get("topologyLayer")
        if not isinstance(name, str) or not name:
            # the wording callers know: "<path>.topologyLayer must name the layer, got ..."
            raise TopologySpecError(
                f"{path}.topologyLayer must name the layer, got {_kind(name)}", field=f"{path}.topologyLayer"
            )
        if len(name) > MAX_LAYER_NAME_LENGTH:
            raise _field_error(
                f"{path}.topologyLayer",
                f"{brief(name)} is longer than {MAX_LAYER_NAME_LENGTH} characters",
            )
        if name == CLUSTER_LAYER:
            raise TopologySpecError(
                f"{path}: {CLUSTER_LAYER} is the implicit top layer and is never listed", name, path
            )
        if name in parents:
            raise _field_error(f"{path}.topologyLayer", f"layer {name!r} is listed twice", name)
        parent = entry.get("parentTopologyLayer")
        if parent is None:
            parent = ""
        if not isinstance(parent, str):
            raise _field_error(
                f"{path}.parentTopologyLayer",
                f"of layer {name!r} must be a string, got {_kind(parent)}",
                name,
            )
        # naming the implicit top explicitly means the same as leaving the parent out
        parents[name] = "" if parent == CLUSTER_LAYER else parent
        keys[name] = _label_keys(entry, path, name)
        listed.append(name)
        entry_of[name] = path

    if NODE_LAYER not in parents:
        raise TopologySpecError(
            f"{NODE_LAYER} is missing: list it as the bottom layer, with the layer directly above "
            "the nodes as its parentTopologyLayer",
            NODE_LAYER,
        )
    for name in listed:
        parent = parents[name]
        if parent == NODE_LAYER:
            raise _field_error(
                f"{entry_of[name]}.parentTopologyLayer",
                f"layer {name!r} has {NODE_LAYER} as its parent, but {NODE_LAYER} is the bottom layer",
                name,
            )
        if parent and parent not in parents:
            raise _field_error(
                f"{entry_of[name]}.parentTopologyLayer",
                f"layer {name!r} has an unknown parent layer {brief(parent)}",
                name,
            )
        if name != NODE_LAYER and not keys[name]:
            raise _field_error(
                f"{entry_of[name]}.labelKey",
                f"layer {name!r} has no labelKey: name the node label(s) whose values name its domains",
                name,
            )

    # the chain, from the node layer upwards
    upward = [NODE_LAYER]
    while parents[upward[-1]]:
        parent = parents[upward[-1]]
        if parent in upward:
            cycle = [*upward[upward.index(parent) :], parent]
            raise TopologySpecError(f"layers form a cycle: {' -> '.join(cycle)}", parent)
        upward.append(parent)

    on_chain = set(upward)
    for name in listed:
        if name in on_chain:
            continue
        # explain how the first layer off the chain is attached: through a cycle of its own,
        # as a branch off the chain, or under a second top layer
        walk = [name]
        while True:
            parent = parents[walk[-1]]
            if not parent:
                raise TopologySpecError(
                    f"two top layers, {upward[-1]!r} and {walk[-1]!r}: only one layer may have no parent "
                    f"(layer {name!r} is not on the chain above {NODE_LAYER})",
                    name,
                )
            if parent in on_chain:
                sibling = upward[upward.index(parent) - 1]
                raise TopologySpecError(
                    f"layers {sibling!r} and {walk[-1]!r} both have parent {parent!r}: the layers must "
                    f"form one chain (layer {name!r} is not on the chain above {NODE_LAYER})",
                    name,
                )
            if parent in walk:
                cycle = [*walk[walk.index(parent) :], parent]
                raise TopologySpecError(f"layers form a cycle: {' -> '.join(cycle)}", parent)
            walk.append(parent)

    return LayerChain(tuple(Layer(name, keys[name]) for name in reversed(upward)))


@dataclass(frozen=True, slots=True)
class Domain:
    layer: str
    name: str
    path: DomainPath
    # child domains, ordered by the first node below each; empty for the domains directly above the nodes
    children: tuple[DomainPath, ...]
    # every node below, in name order
    nodes: tuple[str, ...]

    @property
    def parent(self) -> DomainPath | None:
        return self.path[:-1] if self.path else None


ROOT: DomainPath = ()


@dataclass(frozen=True, slots=True)
class TreeLevels:
    """The tree as arrays, one level per layer: level 0 is the cluster (one vertex), the last level
    the nodes (one vertex per node, its path being its domain's path and then its name). What the
    topology plan sums every gang's offers over, made once per tree.

    Each level's vertices are in the order of their paths, so the children of a vertex are
    contiguous in the level below, and a vertex's index is its place in path order (the plan's
    last tie-break)."""

    paths: tuple[tuple[DomainPath, ...], ...]
    # each vertex's parent in the level above (empty for level 0), non-decreasing
    parents: tuple[np.ndarray, ...]
    # the children of vertex v of level d are vertices starts[d][v]:starts[d][v + 1] of level d + 1
    # (len(paths[d]) + 1 entries; all zero on the node level)
    starts: tuple[np.ndarray, ...]
    # the node of each vertex of the last level, and the vertex of each node
    nodes: tuple[str, ...]
    node_index: Mapping[str, int]
    # the node level's snapshot rows (-1: not in the snapshot), for the last snapshot asked, by
    # what they depend on (see `rows`)
    _rows: dict[tuple[int, int], np.ndarray] = field(default_factory=dict, compare=False, repr=False)

    @property
    def depth(self) -> int:
        """The index of the node level."""
        return len(self.paths) - 1

    def rows(self, row_of: Mapping[str, int], key: tuple[int, int]) -> np.ndarray:
        """Each node vertex's row in the snapshot whose `row_of` this is; `key` (the snapshot's
        identity and node generation) says when the rows asked last still hold."""
        rows = self._rows.get(key)
        if rows is None:
            rows = np.fromiter((row_of.get(n, -1) for n in self.nodes), dtype=np.int64, count=len(self.nodes))
            self._rows.clear()
            self._rows[key] = rows
        return rows

    def rows_still_hold(self, old: tuple[int, int], new: tuple[int, int]) -> None:
        """The rows asked under `old` hold under `new` too: the caller has seen that no node came,
        went or changed rows in between (a heartbeat must not cost a lookup per node)."""
        rows = self._rows.pop(old, None)
        if rows is not None:
            self._rows.clear()
            self._rows[new] = rows


def tree_levels(chain: LayerChain, domains: Mapping[DomainPath, Domain]) -> TreeLevels:
    bottom = len(chain.order) - 1
    by_depth: list[list[DomainPath]] = [[] for _ in range(bottom)]
    for path in domains:
        by_depth[len(path)].append(path)
    above = [tuple(sorted(level)) for level in by_depth]
    # the node level, by far the largest, in path order without sorting or hashing a path per node:
    # the domains directly above the nodes in path order, each with its nodes in name order
    last = above[bottom - 1]
    counts = np.fromiter((len(domains[p].nodes) for p in last), dtype=np.int64, count=len(last))
    nodes = tuple(itertools.chain.from_iterable(domains[p].nodes for p in last))
    node_level = tuple((*p, n) for p in last for n in domains[p].nodes)
    paths = (*above, node_level)
    parents = [np.zeros(0, dtype=np.int64)]
    starts = []
    for d in range(1, bottom):
        index = {p: i for i, p in enumerate(paths[d - 1])}
        parent = np.fromiter((index[p[:-1]] for p in paths[d]), dtype=np.int64, count=len(paths[d]))
        parents.append(parent)
        # paths sorted: the children of each vertex above follow one another, in its order
        starts.append(np.searchsorted(parent, np.arange(len(paths[d - 1]) + 1, dtype=np.int64)))
    parents.append(np.repeat(np.arange(len(last), dtype=np.int64), counts))
    starts.append(np.concatenate((np.zeros(1, dtype=np.int64), np.cumsum(counts))))
    starts.append(np.zeros(len(nodes) + 1, dtype=np.int64))
    return TreeLevels(paths, tuple(parents), tuple(starts), nodes, dict(zip(nodes, range(len(nodes)))))


@dataclass(frozen=True, slots=True)
class TopologyTree:
    chain: LayerChain
    domains: Mapping[DomainPath, Domain]
    # each node's domain in the layer directly above the node layer
    node_paths: Mapping[str, DomainPath]
    # nodes left out, with the reason
    excluded: Mapping[str, str]
    # the tree as arrays, made the first time a plan asks (see `levels`)
    _levels: list[TreeLevels] = field(default_factory=list, compare=False, repr=False)

    @property
    def root(self) -> Domain:
        return self.domains[ROOT]

    def levels(self) -> TreeLevels:
        """The tree as arrays (see TreeLevels); made once: the tree never changes."""
        if not self._levels:
            self._levels.append(tree_levels(self.chain, self.domains))
        return self._levels[0]

    def made_levels(self) -> TreeLevels | None:
        """The arrays when a plan has asked for them already, else None (nothing is made)."""
        return self._levels[0] if self._levels else None

    def leaves(self, path: DomainPath) -> tuple[str, ...]:
        domain = self.domains.get(path)
        return domain.nodes if domain is not None else ()

    def children(self, path: DomainPath) -> tuple[Domain, ...]:
        domain = self.domains.get(path)
        return tuple(self.domains[c] for c in domain.children) if domain is not None else ()

    def parent(self, path: DomainPath) -> Domain | None:
        return self.domains[path[:-1]] if path and path in self.domains else None

    def child_layer(self, path: DomainPath) -> str:
        """The layer of the domains (or nodes) directly below the domain at `path`."""
        return self.chain.order[len(path) + 1]

    def domain_of(self, node: str, layer: str) -> Domain | None:
        """The domain of `layer` that holds `node`, or None when the node is not in the tree
        (or `layer` is the node layer itself or unknown)."""
        path = self.node_paths.get(node)
        if path is None or layer not in self.chain.order[:-1]:
            return None
        return self.domains[path[: self.chain.depth(layer)]]


def _domain_names(chain: LayerChain, node: Node) -> DomainPath | str:
    """The node's domain names from the top down, or why it cannot be placed in the tree."""
    names: list[str] = []
    layers = chain.domain_layers
    for i, layer in enumerate(layers):
        value = next((node.labels[k] for k in layer.label_keys if node.labels.get(k)), "")
        if not value:
            if i == len(layers) - 1:
                # Nodes often lack only the innermost grouping (an accelerator interconnect, say):
                # such a node forms a domain of its own, so that every node sits at the same depth.
                value = node.name
            else:
                return f"no label {' or '.join(layer.label_keys)} for layer {layer.name}"
        names.append(value)
    return tuple(names)


def parse_topology_object(obj: object) -> tuple[str, LayerChain]:
    """The name and layer chain of a ClusterNetworkTopology object as the API delivers it;
    TopologySpecError naming the field (from the object's root) when any part has the wrong shape."""
    if not isinstance(obj, Mapping):
        raise TopologySpecError(f"the object must be a mapping, got {_kind(obj)}", field="")
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        raise _field_error("metadata", f"must be an object, got {_kind(meta)}")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise _field_error("metadata.name", f"must be a non-empty string, got {_kind(name)}")
    spec = obj.get("spec")
    if spec is None:
        # read as a spec listing no layers, whose message says what to add
        spec = {}
    if not isinstance(spec, Mapping):
        # parse_layer_chain takes a bare layer list too; in an object, spec is a map
        raise _field_error("spec", f"must be an object with networkTopologySpec, got {_kind(spec)}")
    return name, parse_layer_chain(spec)


def build_tree(chain: LayerChain, nodes: Iterable[Node]) -> TopologyTree:
    node_paths: dict[str, DomainPath] = {}
    excluded: dict[str, str] = {}
    for node in nodes:
        placed = _domain_names(chain, node)
        if isinstance(placed, str):
            excluded[node.name] = placed
            node_paths.pop(node.name, None)
        else:
            node_paths[node.name] = placed
            excluded.pop(node.name, None)

    below: dict[DomainPath, list[str]] = {ROOT: []}
    child_paths: dict[DomainPath, set[DomainPath]] = {ROOT: set()}
    for name, path in node_paths.items():
        for depth in range(len(path) + 1):
            prefix = path[:depth]
            below.setdefault(prefix, []).append(name)
            child_paths.setdefault(prefix, set())
            if depth > 0:
                child_paths[path[: depth - 1]].add(prefix)

    order = chain.order
    first_node = {path: min(members, default="") for path, members in below.items()}
    domains = {
        path: Domain(
            layer=order[len(path)],
            name=path[-1] if path else "",
            path=path,
            # siblings in the order of the first node (by name) below each: the order in which
            # operators number their racks and blocks, and stable whatever order nodes arrive in
            children=tuple(sorted(child_paths[path], key=lambda p: (first_node[p], p[-1]))),
            nodes=tuple(sorted(members)),
        )
        for path, members in below.items()
    }
    return TopologyTree(chain, domains, node_paths, excluded)


def update_tree(tree: TopologyTree, removed: Iterable[str], placed: Iterable[Node]) -> TopologyTree:
    """The tree `build_tree` would make after the nodes named in `removed` left and the nodes in
    `placed` (new ones, or ones whose labels changed) were put in, made from `tree` by changing
    only the domains those nodes leave or join (and their parents' child order): a label change
    on one node costs a few domains, not the whole cluster. A node both removed and placed ends
    placed."""
    chain = tree.chain
    node_paths = dict(tree.node_paths)
    excluded = dict(tree.excluded)
    # per domain, the node names that leave it and those that join it
    leaving: dict[DomainPath, set[str]] = {}
    joining: dict[DomainPath, set[str]] = {}

    def take_out(name: str) -> None:
        path = node_paths.pop(name, None)
        excluded.pop(name, None)
        if path is not None:
            for depth in range(len(path) + 1):
                prefix = path[:depth]
                leaving.setdefault(prefix, set()).add(name)
                joining.get(prefix, set()).discard(name)

    for name in removed:
        take_out(name)
    for node in placed:
        take_out(node.name)
        found = _domain_names(chain, node)
        if isinstance(found, str):
            excluded[node.name] = found
            continue
        node_paths[node.name] = found
        for depth in range(len(found) + 1):
            joining.setdefault(found[:depth], set()).add(node.name)

    domains = dict(tree.domains)
    members: dict[DomainPath, tuple[str, ...]] = {}
    for path in leaving.keys() | joining.keys():
        old = domains.get(path)
        # the names stay sorted: a few bisections, each a move of memory, not a sort of the domain
        names = list(old.nodes) if old is not None else []
        for name in leaving.get(path, ()):
            i = bisect.bisect_left(names, name)
            if i < len(names) and names[i] == name:
                del names[i]
        for name in joining.get(path, ()):
            i = bisect.bisect_left(names, name)
            if i == len(names) or names[i] != name:
                names.insert(i, name)
        members[path] = tuple(names)
        if not names and path:
            # it lost its last node (the cluster stays, as build_tree keeps it)
            domains.pop(path, None)
    # a node joins or leaves every domain above it, so the parent of a touched domain is touched
    # too: only touched domains can gain or lose children, or see their children's order change
    new_children: dict[DomainPath, set[DomainPath]] = {}
    for path, below_path in members.items():
        if path and below_path:
            new_children.setdefault(path[:-1], set()).add(path)
    order = chain.order
    above_nodes = len(order) - 2
    for path, nodes in members.items():
        if path and not nodes:
            continue
        old = domains.get(path)
        children: tuple[DomainPath, ...] = ()
        if len(path) < above_nodes:
            below = {c for c in (old.children if old is not None else ()) if c in domains}
            below.update(new_children.get(path, ()))
            first = {c: (members[c] if c in members else domains[c].nodes)[0] for c in below}
            children = tuple(sorted(below, key=lambda p: (first[p], p[-1])))
        domains[path] = Domain(
            layer=order[len(path)], name=path[-1] if path else "", path=path, children=children, nodes=nodes
        )
    return TopologyTree(chain, domains, node_paths, excluded)


def _info(domain: Domain) -> dict[str, str]:
    return {"topologyLayer": domain.layer, "topologyName": domain.name}


def detail_status(tree: TopologyTree) -> list[dict[str, Any]]:
    """`status.detailStatus`: one entry per domain above the nodes, the cluster first, walking
    down with the children of each domain ordered by the first node (by name) below them."""
    entries: list[dict[str, Any]] = []

    def visit(domain: Domain) -> None:
        entry: dict[str, Any] = {"topologyInfo": _info(domain)}
        parent = tree.parent(domain.path)
        if parent is not None:
            entry["parentTopologyInfo"] = _info(parent)
        if domain.nodes:
            child_layer = tree.child_layer(domain.path)
            entry["childTopologyLayer"] = child_layer
            # nodes are only counted: a list of them would grow the object with the cluster
            if child_layer != NODE_LAYER:
                entry["childTopologyNames"] = [tree.domains[c].name for c in domain.children]
        entry["nodeNum"] = len(domain.nodes)
        entries.append(entry)
        for child in domain.children:
            visit(tree.domains[child])

    visit(tree.root)
    return entries
