"""Elastic quota: Koordinator's ElasticQuota and scheduler-plugins' CapacityScheduling, one
implementation over `koordpy.quota` (see plugin.py)."""

from koordpy.plugins.elasticquota.book import KoordinatorBook, NamespaceBook, QuotaBook
from koordpy.plugins.elasticquota.plugin import (
    KOORDINATOR_BOOK,
    NAMESPACE_BOOK,
    CapacityScheduling,
    ElasticQuota,
    ElasticQuotaArgs,
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
