"""Where tplab finds what it ships and the user's settings: the assets through the package
(the same from a checkout or a wheel), budget.toml in the config folder, and one left in the
data folder by an older tplab still read there, its move said once."""

from __future__ import annotations

import pytest

from tplab.home import paths


def test_what_tplab_ships_is_found_inside_the_package():
    assert paths.ASSETS.parent.name == "tplab" and paths.ASSETS.name == "assets"
    for path in (paths.DEFAULT_CHECKPOINT, paths.DEFAULT_PROMPTS, paths.HARDWARE_PROFILES):
        assert path.is_file() and path.stat().st_size > 0, path
    assert (paths.READING_NOTES / "megatron-sha.txt").is_file()


@pytest.fixture
def xdg(tmp_path, monkeypatch):
    """No TPLAB_HOME: the user's own config and data folders (platformdirs reads XDG's)."""
    monkeypatch.delenv("TPLAB_HOME", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setattr(paths, "_said_moved", set())
    return tmp_path


def test_settings_live_in_the_config_folder_apart_from_the_data(xdg):
    assert paths.config_dir() == xdg / "config" / "tplab"
    assert paths.tplab_home() == xdg / "data" / "tplab"
    assert paths.budget_file() is None
    new = xdg / "config" / "tplab" / "budget.toml"
    new.parent.mkdir(parents=True)
    new.write_text("lab_cap_usd = 2.0\n")
    assert paths.budget_file() == new
    mock = xdg / "config" / "tplab" / "mock" / "budget.toml"
    assert paths.budget_file(mock=True) == new  # a mock lab falls back to the real settings
    mock.parent.mkdir()
    mock.write_text("lab_cap_usd = 1.0\n")
    assert paths.budget_file(mock=True) == mock


def test_a_budget_toml_in_the_old_place_is_still_read_and_its_move_said_once(xdg, capsys):
    from tplab.money.budget_config import BudgetConfig

    old = xdg / "data" / "tplab" / "budget.toml"
    old.parent.mkdir(parents=True)
    old.write_text("lab_cap_usd = 1.5\n")
    assert BudgetConfig.load().lab_cap_usd == 1.5
    assert BudgetConfig.load().lab_cap_usd == 1.5
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(old) in err
    assert str(xdg / "config" / "tplab" / "budget.toml") in err
    new = xdg / "config" / "tplab" / "budget.toml"
    new.parent.mkdir(parents=True)
    new.write_text("lab_cap_usd = 2.5\n")  # once moved, the config folder's is the one
    assert BudgetConfig.load().lab_cap_usd == 2.5 and capsys.readouterr().err == ""


def test_tplab_home_keeps_everything_in_one_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("TPLAB_HOME", str(tmp_path / "home"))
    assert paths.config_dir() == tmp_path / "home" == paths.tplab_home()
