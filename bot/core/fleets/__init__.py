"""Fleet runs (issue 41): clusters in ordered stages, the first a canary that gates the rest.

`plan` parses a fleet plan (`templates/fleets/*.yaml`) and resolves its stages over the
configured clusters; `schema` writes its JSON Schema; `machine` is the fleet run's pure state
machine over its child runs.
"""
