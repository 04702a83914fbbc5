"""The manifests of the user manuals koordpy follows (Koordinator's gang scheduling, job-level
preemption and network-topology-aware scheduling manuals, its Job architecture page, and
scheduler-plugins' coscheduling docs), transcribed unchanged, and the outcomes those documents state.

One test module and one folder of YAML files per document. A file holds the manifests as the document
prints them; what a document leaves implicit (the nodes its story needs, members it does not show) is
in files of its own whose first comment says so."""
