"""A project folder of one's own (``tourneylake init``), the command line's help, and a live
service never given the sandbox's account: what a stranger meets in the first minutes."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import typer
import yaml
from typer.testing import CliRunner

from tests.helpers import REPO
from tests.scripted_server import ScriptedServer
from tourneylake.config import ENV_PREFIX, IDENTITY, Settings, load_settings
from tourneylake.errors import ConfigError
from tourneylake.night.watchlist import load_watchlist
from tourneylake.packaged import NEEDED, packaged
from tourneylake.pipelines.cli import app


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in list(os.environ):
        if name.startswith(ENV_PREFIX):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)  # no stray .env


def test_everything_a_night_reads_is_in_the_package_not_in_the_checkout() -> None:
    """The DDL, the dbt project, the examples, the notebooks and the templates are found through
    the package (the same path in a wheel), each file there."""
    root = packaged(".").absolute()
    assert root == (REPO / "tourneylake").absolute()
    for name in [*NEEDED, "templates/watchlist.yaml", "templates/dagster.yaml", "templates/workspace.yaml"]:
        assert packaged(name).exists(), name
    # the links lead to the repository's own folders and files: one copy of each
    assert packaged("sql").resolve() == (REPO / "sql").resolve()
    assert packaged("templates/dagster.yaml").read_text() == (REPO / "dagster_home" / "dagster.yaml").read_text()


def test_init_makes_a_project_folder_and_never_overwrites(tmp_path: Path) -> None:
    runner = CliRunner()
    made = runner.invoke(app, ["init", str(tmp_path / "nights")])
    assert made.exit_code == 0, made.output
    folder = tmp_path / "nights"
    files = {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}
    assert files == {
        "watchlist.yaml", ".env.example", ".gitignore", "NEXT.md", "workspace.yaml", "dagster_home/dagster.yaml",
        "notebooks/player.ipynb", "notebooks/watchlist.ipynb", "notebooks/bill.ipynb",
    }  # fmt: skip
    listed = load_watchlist(folder / "watchlist.yaml")  # valid, with a few players, filters and priorities
    assert 3 <= len(listed.players) <= 6 and listed.filters and any(p.priority != 100 for p in listed.players)
    assert "accounts:" in (folder / "watchlist.yaml").read_text()  # shown, commented
    workspace = yaml.safe_load((folder / "workspace.yaml").read_text())
    assert {e["python_module"]["module_name"] for e in workspace["load_from"]} == {
        "tourneylake.pipelines.definitions",
        "tourneylake.pipelines.models",
    }  # the installed code location, nothing of a checkout
    instance = yaml.safe_load((folder / "dagster_home" / "dagster.yaml").read_text())
    assert instance["telemetry"] == {"enabled": False} and instance["concurrency"]["pools"]["default_limit"] == 1
    ignored = (folder / ".gitignore").read_text().split()
    assert {"/data/", ".env", "/dagster_home/*", "!/dagster_home/dagster.yaml"} <= set(ignored)
    assert "tourneylake doctor" in (folder / "NEXT.md").read_text()

    before = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    again = runner.invoke(app, ["init", str(folder), "--sandbox"])
    assert again.exit_code == 2 and "nothing written" in again.output and "Traceback" not in again.output
    assert {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()} == before  # not a byte changed, no .env added


def test_a_sandbox_project_runs_the_sandbox_and_a_live_one_needs_its_account(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = CliRunner()
    assert runner.invoke(app, ["init", "sandboxed", "--sandbox"]).exit_code == 0
    monkeypatch.chdir(tmp_path / "sandboxed")
    assert load_settings().is_sandbox
    assert runner.invoke(app, ["init", str(tmp_path / "live")]).exit_code == 0
    monkeypatch.chdir(tmp_path / "live")
    assert not (tmp_path / "live" / ".env").exists()
    env = (tmp_path / "live" / ".env.example").read_text()
    (tmp_path / "live" / ".env").write_text(
        env.replace(f"# {ENV_PREFIX}BASE_URL=sandbox", f"{ENV_PREFIX}BASE_URL=https://stats.invalid")
    )
    with pytest.raises(ConfigError) as refused:
        load_settings()
    assert all(f"{ENV_PREFIX}{name.upper()}" in str(refused.value) for name in IDENTITY)


def test_env_example_names_every_setting_with_its_default_and_its_secrets() -> None:
    from tourneylake.project import env_example

    text = env_example()
    lines = text.splitlines()
    for name, field in Settings.model_fields.items():
        variable = f"{ENV_PREFIX}{name.upper()}"
        (line,) = [n for n, line in enumerate(lines) if line.startswith(f"# {variable}=")]
        said = " ".join(lines[n].lstrip("# ") for n in range(line - 1, -1, -1) if lines[n].startswith("#") and lines[n] != "#")
        secret = "SecretStr" in str(field.annotation)
        assert ("secret" in lines[line - 1] or "secret" in lines[line - 2]) == secret, variable
        if name not in IDENTITY and field.default is not None and not secret:
            assert lines[line] == f"# {variable}={field.default}", variable
        assert said, variable
    assert "correct-horse-battery" not in text and "sandboxkey2026" not in text  # no password, not even the demo's


def test_a_live_url_without_its_account_is_refused_before_any_request(monkeypatch: pytest.MonkeyPatch) -> None:
    with ScriptedServer() as service:
        monkeypatch.setenv(f"{ENV_PREFIX}BASE_URL", service.base_url)
        monkeypatch.setenv(f"{ENV_PREFIX}USERNAME", "coach@example.com")
        for command in (["doctor"], ["budget"], ["run"], ["filter", "ask", "sit and gos"]):
            result = CliRunner().invoke(app, command)
            assert result.exit_code == 1, (command, result.output)
            (line,) = [line for line in result.output.splitlines() if line.startswith("error:")]
            assert "TOURNEYLAKE_PASSWORD, TOURNEYLAKE_APPNAME and TOURNEYLAKE_APPKEY must be set for a live service" in line
        assert service.received == []  # nothing sent, not the demo account's name either


def test_help_lists_a_nights_commands_first_and_says_what_every_option_does() -> None:
    runner = CliRunner()
    listing = runner.invoke(app, ["--help"]).output
    named = [line.split()[0] for line in listing.split("Commands:", 1)[1].splitlines() if line.startswith("  ")]
    assert named[:6] == ["run", "status", "report", "query", "budget", "doctor"], listing
    for path, command in _commands().items():
        for param in command.params:
            if param.param_type_name == "option":
                assert param.help, f"{path} {param.opts}: no help"
        shown = runner.invoke(app, [*path.split(), "--help"], terminal_width=200).output
        assert "<bool>" not in shown, path
        for param in command.params:  # a flag takes no value and shows none; an option shows what it takes
            if param.param_type_name == "option":
                flag = getattr(param, "is_flag", False)
                assert param.opts[-1] in shown and (f"{param.opts[-1]} <" in shown) != flag, (path, param.opts)


def _commands() -> dict[str, typer.core.TyperCommand]:
    group = typer.main.get_command(app)
    found = {}
    for name, command in group.commands.items():  # type: ignore[attr-defined]
        if hasattr(command, "commands"):
            found.update({f"{name} {sub}": inner for sub, inner in command.commands.items()})
        else:
            found[name] = command
    return found


def test_every_command_that_takes_a_night_defaults_to_the_one_that_ended() -> None:
    from tourneylake.cli import ended_night, parse_night

    yesterday = datetime.now(UTC).date() - timedelta(days=1)
    assert parse_night(None) == ended_night(None) == yesterday  # budget, rebuild, run, doctor
    runner = CliRunner()
    for command in ("run", "budget"):
        assert "yesterday" in runner.invoke(app, [command, "--help"], terminal_width=200).output
