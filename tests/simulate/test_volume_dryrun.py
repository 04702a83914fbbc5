"""A dry run over a snapshot that holds storage: the cluster's classes, volumes and bound claims are
read from it, and a new workload's claims bind to what is still free."""

from __future__ import annotations

import io
from pathlib import Path

import yaml

from koordpy.config.models import parse_configuration
from koordpy.simulate.documents import STDIN, STDIN_LABEL
from koordpy.simulate.dryrun import dry_run, new_pod_keys, render_dry_run_table
from koordpy.simulate.loader import load_scenario
from tests.builders import pod_dict
from tests.simulate.storage_builders import WFFC, claim, node, stateful_set, storage_class, volume, write

CONFIG = parse_configuration({"profiles": [{"schedulerName": "default-scheduler"}]})


def _snapshot() -> str:
    """A cluster whose local volume on node-1 is bound to a running pod's claim."""
    taken = volume("pv-1", "10Gi", "local", node="node-1", claim=("default", "old"))
    taken["spec"]["claimRef"]["uid"] = "uid-old"
    taken["status"] = {"phase": "Bound"}
    old = claim("old", "5Gi", "local")
    old["metadata"]["uid"] = "uid-old"
    old["metadata"]["annotations"] = {"pv.kubernetes.io/bind-completed": "yes"}
    old["spec"]["volumeName"] = "pv-1"
    old["status"] = {"phase": "Bound"}
    running = pod_dict("old-0", cpu="1", node_name="node-1")
    running["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "old"}}]
    docs = [
        node("node-1"),
        node("node-2"),
        storage_class("local", mode=WFFC),
        taken,
        volume("pv-2", "10Gi", "local", node="node-2"),
        old,
        running,
    ]
    return yaml.safe_dump_all(docs, sort_keys=False)


def test_a_new_statefulset_binds_the_volume_the_cluster_has_free(tmp_path: Path) -> None:
    manifest = write(tmp_path / "db.yaml", [stateful_set("db", 1, "data", "5Gi", "local")])
    scenario = load_scenario([STDIN, str(manifest)], stdin=io.StringIO(_snapshot()))
    report = dry_run(scenario, CONFIG, new_pod_keys(scenario, STDIN_LABEL))
    (pod,) = report.pods
    assert (pod.name, pod.phase, pod.node) == ("db-0", "Bound", "node-2")
    (data,) = report.to_dict()["persistentVolumeClaims"]
    assert (data["name"], data["phase"], data["volume"]) == ("data-db-0", "Bound", "pv-2")
    table = render_dry_run_table(report)
    assert "default/data-db-0  Bound  pv-2" in table


def test_a_dry_run_without_claims_reports_as_before(tmp_path: Path) -> None:
    manifest = write(tmp_path / "app.yaml", [pod_dict("app", cpu="1")])
    scenario = load_scenario([STDIN, str(manifest)], stdin=io.StringIO(_snapshot()))
    report = dry_run(scenario, CONFIG, new_pod_keys(scenario, STDIN_LABEL))
    assert "persistentVolumeClaims" not in report.to_dict()
