"""Gang scheduling (Coscheduling): PodGroups in both API groups, annotation gangs, gang groups."""

from koordpy.plugins.coscheduling.plugin import NAME, Coscheduling, CoschedulingArgs

__all__ = ["NAME", "Coscheduling", "CoschedulingArgs"]
