"""A `--configmap` that names no ConfigMap is the user's input error, as a `--config` that names no
file is: one line and exit status 2, before the cluster is asked (`koordpy simulate --from-cluster`
and `koordpy snapshot`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from koordpy.cli import main


@pytest.fixture(autouse=True)
def no_cluster(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # were the flag not refused first, the cluster would be looked for here, and not found
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)


@pytest.mark.parametrize("configmap", ["garbage", "ns/", "/name", "ns/a/b", ":key", "ns/name/"])
@pytest.mark.parametrize("command", ["simulate", "snapshot"])
def test_a_configmap_flag_that_names_no_configmap_is_exit_2(
    command: str, configmap: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = tmp_path / "job.yaml"
    manifest.write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: x}\n")
    argv = (
        ["simulate", "--from-cluster", "--configmap", configmap, str(manifest)]
        if command == "simulate"
        else ["snapshot", "--configmap", configmap, "-o", str(tmp_path / "snap.yaml")]
    )
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith("koordpy: invalid option: --configmap must be NAMESPACE/NAME"), err
    assert not (tmp_path / "snap.yaml.partial").exists()
