"""Where the credentials for an apiserver come from: the one place that decides, for `koordpy run`,
`koordpy operators` and the operators embedded in `koordpy run`.

The order is client-go's (`clientcmd.BuildConfigFromFlags`, as kube-scheduler connects):

1. a kubeconfig named on the command line, with the context named (or its current one);
2. else, when a context is named, the default kubeconfig: the service account has no contexts;
3. else the pod's service account (in-cluster), when the pod has one;
4. else the default kubeconfig: every file of $KUBECONFIG merged, or ~/.kube/config.

`--master` replaces the server of whatever was loaded; given alone (no kubeconfig, no context), it
is the whole configuration, with no credentials, as client-go's `BuildConfigFromFlags` makes it.

kubernetes-asyncio does the loading (exec plugins, OIDC, client certificates, token files that
rotate); this module only chooses and says clearly why nothing could be loaded.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol, cast

from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio import config as k8s_config
from kubernetes_asyncio.config.config_exception import ConfigException

# what the pod's environment holds when the kubelet gives it a service account
SERVICE_HOST_ENV = "KUBERNETES_SERVICE_HOST"


class CredentialsError(Exception):
    """No usable credentials: the file named does not exist, or nothing that was tried loaded."""


class _InClusterLoader(Protocol):
    def __call__(
        self, *, client_configuration: k8s_client.Configuration, try_refresh_token: bool = True
    ) -> None: ...


# kubernetes-asyncio leaves `load_incluster_config` unannotated; this is its signature (unchanged
# since the library began), so that the one call below is type-checked like any other
_load_incluster_config = cast(_InClusterLoader, k8s_config.load_incluster_config)


def default_kubeconfig() -> str:
    """$KUBECONFIG (a list of files, merged as kubectl merges them) or ~/.kube/config, read now:
    kubernetes-asyncio reads the variable once, when it is imported."""
    return os.environ.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")


def load_in_cluster(configuration: k8s_client.Configuration) -> None:
    """The pod's service account; its token file is read again as the kubelet rotates it."""
    _load_incluster_config(client_configuration=configuration, try_refresh_token=True)


async def _load_kubeconfig(
    configuration: k8s_client.Configuration, path: str, context: str | None, in_cluster_error: str = ""
) -> None:
    if not any(os.path.exists(os.path.expanduser(p)) for p in path.split(os.pathsep) if p):
        # the library would report a missing file as a kubeconfig without a current context
        raise CredentialsError(f"{in_cluster_error}no kubeconfig at {path}")
    try:
        # persist_config=False: a refreshed token must never be written back into the user's file
        await k8s_config.load_kube_config(
            config_file=path, context=context, client_configuration=configuration, persist_config=False
        )
    except Exception as err:
        # the library's parsing lets through whatever a malformed file makes it meet (a TypeError
        # for a file that is not a mapping, YAML errors); all of them mean the same here
        raise CredentialsError(f"{in_cluster_error}kubeconfig {path}: {err}") from err


async def load_configuration(
    kubeconfig: str | None = None, context: str | None = None, master: str | None = None
) -> k8s_client.Configuration:
    """A kubernetes-asyncio Configuration with the credentials chosen in the order above; raises
    CredentialsError when none can be loaded."""
    configuration = await _load(kubeconfig, context, master)
    if master:
        configuration.host = master.rstrip("/")
    return configuration


async def _load(kubeconfig: str | None, context: str | None, master: str | None) -> k8s_client.Configuration:
    configuration = k8s_client.Configuration()
    if master and not kubeconfig and context is None:
        return configuration
    if kubeconfig:
        await _load_kubeconfig(configuration, kubeconfig, context)
        return configuration
    in_cluster_error = ""
    if context is None and os.environ.get(SERVICE_HOST_ENV):
        try:
            load_in_cluster(configuration)
            return configuration
        except ConfigException as err:
            # a pod without a mounted token may still be given a kubeconfig, as client-go allows
            in_cluster_error = f"in-cluster service account: {err}; "
            configuration = k8s_client.Configuration()
    await _load_kubeconfig(configuration, default_kubeconfig(), context, in_cluster_error)
    return configuration
