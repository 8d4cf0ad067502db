"""The API server copies what it is given and what it stored (`clone`), so no write aliases another:
JSON-shaped data is copied without `copy.deepcopy`, anything else still deep-copied, and the pod
update rules hold for the status writes that now skip masking."""

from __future__ import annotations

import pytest

from bot.sim.apiserver.api import Api
from bot.sim.apiserver.clock import SimClock
from bot.sim.apiserver.errors import ApiError
from bot.sim.apiserver.objects import Ids, clone
from bot.sim.apiserver.resources import KINDS_BY_KEY, Catalog
from bot.sim.apiserver.store import Store


def test_clone_copies_json_shaped_data_deeply_and_deep_copies_anything_else() -> None:
    shared = {"k": [1, 2]}
    value = {"a": [shared, shared, {"b": None, "c": 1.5, "d": True}], "e": "x", "f": ([9],)}
    copied = clone(value)
    assert copied == value
    copied["a"][0]["k"].append(3)
    copied["a"][2]["b"] = "changed"
    copied["f"][0].append(10)
    assert value == {
        "a": [{"k": [1, 2]}, {"k": [1, 2]}, {"b": None, "c": 1.5, "d": True}],
        "e": "x",
        "f": ([9],),
    }
    assert copied["a"][1] == {"k": [1, 2]}  # the two references became two copies, as JSON would have them


@pytest.fixture
def api() -> Api:
    clock = SimClock(speed=0.0, epoch=1_700_000_000.0)
    store = Store(now=clock.now)
    api = Api(store, Catalog("1.29.4"), clock, Ids(0))
    api.apply_manifests([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "web"}}])
    return api


def _pod() -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "web", "labels": {"app": "p"}},
        "spec": {"containers": [{"name": "app", "image": "app:1"}]},
    }


def test_a_status_write_changes_the_status_alone_and_leaves_the_callers_object_and_old_version(
    api: Api,
) -> None:
    pods = KINDS_BY_KEY["pods"]
    body = _pod()
    created = api.create(pods, "web", body)
    assert body == _pod()  # the caller's object is not the stored one
    pod = created.obj()
    pod["status"] = {"phase": "Running"}
    written = api.write("pods", pod, status=True)
    assert written.obj()["status"] == {"phase": "Running"}
    assert written.obj()["spec"] == created.obj()["spec"]
    assert created.obj().get("status", {}).get("phase") != "Running"
    pod["status"]["phase"] = "Failed"  # the caller keeps its object; the stored version is its own
    assert api.store.get("pods", "web", "p")["status"] == {"phase": "Running"}


def test_a_pod_update_may_change_images_but_not_the_rest_of_the_spec(api: Api) -> None:
    pods = KINDS_BY_KEY["pods"]
    api.create(pods, "web", _pod())
    pod = api.store.get("pods", "web", "p")
    pod["spec"]["containers"][0]["image"] = "app:2"
    assert api.update(pods, "web", "p", pod).obj()["spec"]["containers"][0]["image"] == "app:2"
    pod = api.store.get("pods", "web", "p")
    pod["spec"]["containers"][0]["name"] = "renamed"
    with pytest.raises(ApiError) as exc:
        api.update(pods, "web", "p", pod)
    assert exc.value.code == 422
    assert "pod updates may not change fields" in exc.value.message


def test_the_watch_backlog_counts_the_changes_an_open_watch_has_not_yet_taken_to_send(api: Api) -> None:
    pods = KINDS_BY_KEY["pods"]
    assert api.store.watch_backlog() == 0  # no watch open
    start = api.store.watch(pods)
    api.create(pods, "web", _pod())
    pod = api.store.get("pods", "web", "p")
    pod["metadata"]["labels"] = {"app": "q"}
    api.update(pods, "web", "p", pod)
    assert api.store.watch_backlog() == 2
    assert len(start.watcher.take(0)) == 2  # what a serving thread takes to send
    assert api.store.watch_backlog() == 0
    api.store.delete(pods, api.store.entry("pods", "web", "p"))  # type: ignore[arg-type]
    assert api.store.watch_backlog() == 1
    api.store.unwatch(start.watcher)  # a closed watch will send nothing more
    assert api.store.watch_backlog() == 0


def test_a_write_that_changes_nothing_keeps_the_version_even_as_other_python_values(api: Api) -> None:
    """No-op writes are found on the shared decoded view, and as bytes when only Python types
    differ (a tuple for a list): either way no new resourceVersion, no watch event."""
    pods = KINDS_BY_KEY["pods"]
    created = api.create(pods, "web", _pod())
    rv = api.store.rv
    same = created.obj()
    assert api.write("pods", same) is created
    reordered = {k: same[k] for k in reversed(list(same))}  # the same object to any client
    assert api.write("pods", reordered) is created
    as_tuple = created.obj()
    as_tuple["spec"]["containers"] = tuple(as_tuple["spec"]["containers"])
    assert api.store.update(pods, as_tuple, created) is created  # a controller's own object
    assert api.store.rv == rv
    changed = created.obj()
    changed["metadata"]["labels"]["tier"] = "web"
    written = api.write("pods", changed)
    assert written.rv == rv + 1
    assert written.view()["metadata"]["labels"] == {"app": "p", "tier": "web"}
    assert created.view()["metadata"]["labels"] == {"app": "p"}  # the old version's view stays its own


def test_a_writers_later_change_to_its_object_never_reaches_a_stored_view(api: Api) -> None:
    """The API server reads the stored version's shared view and copies what goes into the new
    one (a spec write keeps the old status), so a caller that changes its dict afterwards changes
    neither version."""
    pods = KINDS_BY_KEY["pods"]
    api.create(pods, "web", _pod())
    pod = api.store.get("pods", "web", "p")
    pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    with_status = api.write("pods", pod, status=True)
    spec_write = with_status.obj()
    spec_write["spec"]["containers"][0]["image"] = "app:2"
    after = api.write("pods", spec_write)
    spec_write["status"]["conditions"][0]["status"] = "False"  # the caller's dict, afterwards
    assert with_status.view()["status"]["conditions"][0]["status"] == "True"
    assert after.view()["status"]["conditions"][0]["status"] == "True"
    assert after.obj() == after.view()
