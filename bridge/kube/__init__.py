"""The Kubernetes adapter over kubernetes_asyncio: see README "The Kubernetes adapter".

``client`` (reads, writes, binding, typed errors), ``watch`` (list-then-watch that never
loses an event), ``events`` (aggregated Events), ``leader`` (Lease leader election),
``resources`` (pure: resource paths, object keys, time formats).
"""
