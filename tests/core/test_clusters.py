"""The one home of the shared cluster knowledge: which configured cluster a command means, and which
node labels name a node's group (every door and duty resolves them here, none on its own)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from bot.core.clusters import DEFAULT_NODE_GROUP_LABELS, group_labels, pick_cluster
from bot.errors import UsageError, UserError
from bot.records import ClusterConfig
from tests.support import sources

ROOT = Path(__file__).resolve().parents[2]


def config(name: str) -> ClusterConfig:
    return ClusterConfig(name=name, kubeconfig=Path("/dev/null"), context=name)


def test_the_only_cluster_is_picked_without_a_name_and_a_named_one_by_its_name() -> None:
    one = {"a": config("a")}
    assert pick_cluster(one, None).name == "a"
    two = {"a": config("a"), "b": config("b")}
    assert pick_cluster(two, "b").name == "b"
    # Usage errors, as a bad flag is: `exec "check"` exits 2 as `upgrade-bot check` does.
    with pytest.raises(UsageError, match="which cluster\\? use --cluster with one of: a, b"):
        pick_cluster(two, None)
    with pytest.raises(UsageError, match="no cluster named `c`; configured clusters: a, b"):
        pick_cluster(two, "c")
    with pytest.raises(UserError, match="no clusters are configured"):
        pick_cluster({}, None)


def test_configured_group_labels_replace_the_built_in_list() -> None:
    assert group_labels(None) == DEFAULT_NODE_GROUP_LABELS
    assert group_labels(()) == DEFAULT_NODE_GROUP_LABELS
    assert group_labels(["team/pool"]) == ("team/pool",)
    assert DEFAULT_NODE_GROUP_LABELS[0] == "eks.amazonaws.com/nodegroup"


@sources.WHOLE_TREE
def test_no_module_defines_or_defaults_the_group_labels_itself() -> None:
    """The tuple is written once, in `bot/core/clusters.py`; nobody else (bot/, commands/) falls back to it with `or`
    (a copy that drifts is how 11 call sites came to disagree)."""
    offenders = []
    for path in sorted([*(ROOT / "bot").rglob("*.py"), *(ROOT / "commands").rglob("*.py")]):
        if (path.name == "clusters.py" and path.parent.name == "core") or "sim" in path.parts:
            continue
        tree = sources.tree(path)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.BoolOp)
                and isinstance(node.op, ast.Or)
                and any(isinstance(v, ast.Name) and v.id == "DEFAULT_NODE_GROUP_LABELS" for v in node.values)
            ):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
            if isinstance(node, ast.Tuple) and any(
                isinstance(e, ast.Constant) and e.value == "alpha.eksctl.io/nodegroup-name" for e in node.elts
            ):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
            if isinstance(node, ast.FunctionDef) and node.name == "pick_cluster":
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []
