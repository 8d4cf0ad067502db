"""The three PATCH flavours the API server accepts: strategic merge, JSON merge and JSON patch.

Strategic merge patch is implemented from the merge keys Kubernetes declares on its types (lists
of containers merge by `name`, conditions by `type`, taints by `key`, …) plus the `$patch`,
`$retainKeys`, `$setElementOrder/…` and `$deleteFromPrimitiveList/…` directives kubectl sends.
That covers what cordon (`spec.unschedulable`), rollout restart (a template annotation), label and
annotate, scale and kubectl's client-side apply produce; a list field not named below is replaced
whole, which is what the real server does for atomic lists.
"""

from __future__ import annotations

import copy
from typing import Any

#: Strategic-merge lists and their merge keys, by field name. `None` = merge primitive values (union).
MERGE_KEYS: dict[str, str | None] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "volumes": "name",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "taints": "key",
    "conditions": "type",
    "ownerReferences": "uid",
    "addresses": "type",
    "topologySpreadConstraints": "topologyKey",
    "resourceClaims": "name",
    "finalizers": None,
}


class PatchError(ValueError):
    """The patch cannot be applied; the API answers 422 (or 400 for malformed input)."""

    def __init__(self, message: str, *, status: int = 422) -> None:
        super().__init__(message)
        self.status = status


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """Apply a strategic merge patch to a decoded object (the input is not modified)."""
    if not isinstance(patch, dict):
        raise PatchError("strategic merge patch must be a JSON object", status=400)
    return _smp_map(target if isinstance(target, dict) else {}, patch)


def _smp_map(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any] | None:
    directive = patch.get("$patch")
    if directive == "delete":
        return None
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    result = dict(target)
    orders: dict[str, list[Any]] = {}
    deletions: dict[str, list[Any]] = {}
    retain: list[str] | None = None
    for key, value in patch.items():
        if key == "$patch":
            continue
        if key == "$retainKeys":
            retain = [str(k) for k in value or []]
            continue
        if key.startswith("$setElementOrder/"):
            orders[key.split("/", 1)[1]] = list(value or [])
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            deletions[key.split("/", 1)[1]] = list(value or [])
            continue
        if value is None:
            result.pop(key, None)
            continue
        current = result.get(key)
        if isinstance(value, dict):
            merged = _smp_map(current if isinstance(current, dict) else {}, value)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list):
            result[key] = _smp_list(key, current if isinstance(current, list) else [], value)
        else:
            result[key] = value
    for key, values in deletions.items():
        if isinstance(result.get(key), list):
            result[key] = [v for v in result[key] if v not in values]
    for key, order in orders.items():
        if isinstance(result.get(key), list):
            result[key] = _reorder(key, result[key], order)
    if retain is not None:
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _merge_key_for(field: str, items: list[Any]) -> tuple[bool, str | None]:
    """(is this a merging list, its merge key) — container ports merge by containerPort, service ports by port."""
    if field == "ports":
        sample = next((i for i in items if isinstance(i, dict)), None)
        if sample is not None and "containerPort" in sample:
            return True, "containerPort"
        if sample is not None and "port" in sample:
            return True, "port"
        return False, None
    if field in MERGE_KEYS:
        return True, MERGE_KEYS[field]
    return False, None


def _smp_list(field: str, current: list[Any], patch: list[Any]) -> list[Any]:
    merging, key = _merge_key_for(field, patch or current)
    if not merging:
        # Atomic list: replaced whole, unless the patch says `$patch: replace` explicitly (same result).
        return [copy.deepcopy(p) for p in patch if not (isinstance(p, dict) and p.get("$patch") == "replace")]
    if key is None:
        out = list(current)
        for value in patch:
            if value not in out:
                out.append(value)
        return out
    if any(isinstance(p, dict) and p.get("$patch") == "replace" for p in patch):
        return [copy.deepcopy(p) for p in patch if not (isinstance(p, dict) and p.get("$patch") == "replace")]
    out = [copy.deepcopy(c) for c in current]
    for item in patch:
        if not isinstance(item, dict):
            raise PatchError(f"list {field} needs objects with a {key!r} merge key", status=400)
        ident = item.get(key)
        index = next((i for i, c in enumerate(out) if isinstance(c, dict) and c.get(key) == ident), None)
        if item.get("$patch") == "delete":
            if index is not None:
                del out[index]
            continue
        if index is None:
            out.append({k: copy.deepcopy(v) for k, v in item.items() if k != "$patch"})
        else:
            merged = _smp_map(out[index], item)
            if merged is None:
                del out[index]
            else:
                out[index] = merged
    return out


def _reorder(field: str, items: list[Any], order: list[Any]) -> list[Any]:
    _, key = _merge_key_for(field, items)
    if key is None:
        ranked = [v for v in order if v in items] + [v for v in items if v not in order]
        return ranked
    wanted = [o.get(key) if isinstance(o, dict) else o for o in order]
    position = {ident: i for i, ident in enumerate(wanted)}
    indexed = list(enumerate(items))
    indexed.sort(
        key=lambda pair: (
            position.get(pair[1].get(key) if isinstance(pair[1], dict) else None, len(wanted) + pair[0]),
        )
    )
    return [item for _, item in indexed]


# ---- RFC 6902 JSON patch -----------------------------------------------------------------------


def json_patch(target: Any, operations: Any) -> Any:
    if not isinstance(operations, list):
        raise PatchError("json patch must be a list of operations", status=400)
    doc = copy.deepcopy(target)
    for op in operations:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise PatchError(f"invalid json patch operation: {op!r}", status=400)
        kind, path = op["op"], str(op["path"])
        if kind == "add":
            doc = _pointer_set(doc, path, copy.deepcopy(op.get("value")), insert=True)
        elif kind == "remove":
            doc = _pointer_remove(doc, path)[0]
        elif kind == "replace":
            _pointer_get(doc, path)
            doc = _pointer_set(doc, path, copy.deepcopy(op.get("value")), insert=False)
        elif kind == "move":
            doc, value = _pointer_remove(doc, str(op.get("from", "")))
            doc = _pointer_set(doc, path, value, insert=True)
        elif kind == "copy":
            value = copy.deepcopy(_pointer_get(doc, str(op.get("from", ""))))
            doc = _pointer_set(doc, path, value, insert=True)
        elif kind == "test":
            if _pointer_get(doc, path) != op.get("value"):
                raise PatchError(f"testing value {path} failed")
        else:
            raise PatchError(f"Unexpected kind: {kind}", status=400)
    return doc


def _tokens(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"invalid JSON pointer {path!r}", status=400)
    return [t.replace("~1", "/").replace("~0", "~") for t in path[1:].split("/")]


def _index(container: list[Any], token: str, *, allow_end: bool) -> int:
    if token == "-" and allow_end:
        return len(container)
    if not token.isdigit():
        raise PatchError(f"invalid array index {token!r}")
    i = int(token)
    if i > len(container) or (i == len(container) and not allow_end):
        raise PatchError(f"array index {i} out of bounds")
    return i


def _walk(doc: Any, tokens: list[str]) -> Any:
    cur = doc
    for t in tokens:
        if isinstance(cur, dict):
            if t not in cur:
                raise PatchError(f"doc is missing path: /{'/'.join(tokens)}")
            cur = cur[t]
        elif isinstance(cur, list):
            cur = cur[_index(cur, t, allow_end=False)]
        else:
            raise PatchError(f"doc is missing path: /{'/'.join(tokens)}")
    return cur


def _pointer_get(doc: Any, path: str) -> Any:
    return _walk(doc, _tokens(path))


def _pointer_set(doc: Any, path: str, value: Any, *, insert: bool) -> Any:
    tokens = _tokens(path)
    if not tokens:
        return value
    parent = _walk(doc, tokens[:-1])
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        i = _index(parent, last, allow_end=insert)
        if insert:
            parent.insert(i, value)
        else:
            parent[i] = value
    else:
        raise PatchError(f"doc is missing path: {path}")
    return doc


def _pointer_remove(doc: Any, path: str) -> tuple[Any, Any]:
    tokens = _tokens(path)
    if not tokens:
        raise PatchError("cannot remove the whole document")
    parent = _walk(doc, tokens[:-1])
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"unable to remove nonexistent key: {last}: missing value")
        return doc, parent.pop(last)
    if isinstance(parent, list):
        return doc, parent.pop(_index(parent, last, allow_end=False))
    raise PatchError(f"doc is missing path: {path}")
