"""Elastic quota, the pure core: the quota tree and its validation (`tree`), the runtime quota each
quota may use (`runtime`), and the checks a pod's admission makes against them (`admission`).
Nothing here knows of the scheduler, the cache or the apiserver: the plugin keeps the per-quota
request and used matrices up to date and calls these functions."""
