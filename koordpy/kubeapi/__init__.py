"""The apiserver client shared by the scheduler's cluster world and the standalone operators: raw
JSON requests, informers, and the choice of credentials. Not part of the scheduling core (which
never talks to an apiserver)."""

from koordpy.kubeapi.client import TRANSPORT_ERRORS, ApiError, KubeApi
from koordpy.kubeapi.credentials import CredentialsError, load_configuration
from koordpy.kubeapi.informer import Informer, Resource

__all__ = [
    "TRANSPORT_ERRORS",
    "ApiError",
    "CredentialsError",
    "Informer",
    "KubeApi",
    "Resource",
    "load_configuration",
]
