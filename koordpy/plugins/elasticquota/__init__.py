"""Elastic quota: Koordinator's ElasticQuota and scheduler-plugins' CapacityScheduling, one
implementation over `koordpy.quota` (see plugin.py)."""

from koordpy.plugins.elasticquota.args import ElasticQuotaArgs
from koordpy.plugins.elasticquota.book import QuotaBook
from koordpy.plugins.elasticquota.koordinator_book import KoordinatorBook
from koordpy.plugins.elasticquota.namespace_book import NamespaceBook
from koordpy.plugins.elasticquota.plugin import (
    KOORDINATOR_BOOK,
    NAMESPACE_BOOK,
    CapacityScheduling,
    ElasticQuota,
)

__all__ = [
    "KOORDINATOR_BOOK",
    "NAMESPACE_BOOK",
    "CapacityScheduling",
    "ElasticQuota",
    "ElasticQuotaArgs",
    "KoordinatorBook",
    "NamespaceBook",
    "QuotaBook",
]
