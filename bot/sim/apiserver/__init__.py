"""The sim's bottom layer: what a Kubernetes API server is — the store and its watches, the objects'
write semantics (`api`), selectors, patches, tables, discovery, metrics, the eviction subresource,
and the HTTP server — plus the shared leaves everything above uses (`clock`, `errors`, `objects`,
`defaults`). It imports nothing from the layers above (`controllers`, `world`).
"""
