"""Renderers of one search path share their compiled templates, and a served bot compiles them as
it starts (`Renderer.warm`) instead of in the first burst of cards."""

from __future__ import annotations

from pathlib import Path

from bot.core.rendering import Renderer

BUILTIN = Path(__file__).resolve().parents[2] / "templates"


def test_renderers_of_one_search_path_share_one_environment(tmp_path: Path) -> None:
    assert Renderer([tmp_path, BUILTIN]).env is Renderer([tmp_path, BUILTIN]).env
    assert Renderer([tmp_path, BUILTIN]).env is not Renderer([BUILTIN]).env


def test_warm_compiles_every_template_once_and_skips_one_that_does_not_parse(tmp_path: Path) -> None:
    (tmp_path / "broken.txt.j2").write_text("{% if %}")
    (tmp_path / "fine.txt.j2").write_text("{{ who }} is here")
    renderer = Renderer([tmp_path, BUILTIN])
    builtin = len(list(BUILTIN.rglob("*.j2")))
    assert builtin > 50
    assert renderer.warm() == builtin + 1
    # Compiled and cached: another renderer of the path gets the same template object back.
    assert Renderer([tmp_path, BUILTIN]).env.get_template("fine.txt.j2") is renderer.env.get_template(
        "fine.txt.j2"
    )
    assert renderer.render("fine", {"who": "U1"}).text == "U1 is here"


def test_a_template_changed_on_disk_after_warming_renders_its_new_text(tmp_path: Path) -> None:
    page = tmp_path / "page.txt.j2"
    page.write_text("old")
    renderer = Renderer([tmp_path])
    renderer.warm()
    page.write_text("new text")
    assert Renderer([tmp_path]).render("page", {}).text == "new text"
