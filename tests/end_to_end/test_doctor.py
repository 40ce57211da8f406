"""``tourneylake doctor`` against the sandbox served over HTTP as a live service would be: free
calls only, nothing written, every problem one line naming what to change, exit 1 on any."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from tests.helpers import DEMO_ENV
from tourneylake.config import ENV_PREFIX, SANDBOX_USERNAME
from tourneylake.pipelines.cli import app
from tourneylake.sandbox import SandboxServer

SANDBOX = {"seed": 7}

WATCHLIST = """filters:
  sng: "Class:SNG;Date:30D"
  bad: "Class:NOT_A_CLASS"
  mtts: {question: "scheduled tournaments over $50 in the last year", timezone: UTC, locale: en-US}
players:
  - {network: PokerStars, name: "Borbas.Geri", filters: [sng, bad, mtts]}
  - {network: iPoker, name: "Zoë O'Brien"}
  - {network: NoSuchNetwork, name: "Somebody"}
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sandbox: SandboxServer) -> Path:
    """A project folder whose settings name the sandbox's URL and account, as a live one's would."""
    for name in list(os.environ):
        if name.startswith(ENV_PREFIX):
            monkeypatch.delenv(name)
    for name, value in {**DEMO_ENV, f"{ENV_PREFIX}BASE_URL": sandbox.base_url, f"{ENV_PREFIX}MAX_ATTEMPTS": "1"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "watchlist.yaml").write_text(WATCHLIST, encoding="utf-8")
    return tmp_path


def doctor(*args: str) -> tuple[int, list[str]]:
    result = CliRunner().invoke(app, ["doctor", *args], terminal_width=300)
    return result.exit_code, result.output.splitlines()


def test_doctor_checks_every_pair_for_free_and_writes_nothing(project: Path, sandbox: SandboxServer) -> None:
    before = sandbox.accounts.remaining(SANDBOX_USERNAME)
    code, lines = doctor()
    assert code == 1, lines
    assert any(line.startswith("✓ service:") and "answers" in line for line in lines), lines
    assert any(line.startswith("✓ account:") and "credentials accepted" in line for line in lines)
    assert any(line.startswith("✓ searches:") and f"{before:,} searches left" in line and "quota reset" in line for line in lines)
    problems = [line for line in lines if line.startswith("✗")]
    assert len(problems) == 2, lines  # the invalid filter and the unknown network; nothing else
    assert all("watchlist.yaml" in line and "TOURNEYLAKE_WATCHLIST" in line for line in problems)
    assert any("PokerStars/Borbas.Geri [bad]: invalid filter 'bad'" in line for line in problems)
    assert any("NoSuchNetwork/Somebody: unknown network" in line for line in problems)
    (question,) = [line for line in lines if line.startswith("✓ questions:")]
    assert "'mtts' is a question not converted yet: converting it costs 1 search" in question
    (plan,) = [line for line in lines if line.startswith("✓ plan:")]
    assert "3 pairs, 4 searches" in plan  # Borbas.Geri [sng], [mtts] (and its question's conversion), Zoë
    assert lines[-1] == "error: 2 problem(s), each above with what to change"
    assert sandbox.accounts.remaining(SANDBOX_USERNAME) == before  # not a search
    assert not (project / "data").exists()  # nothing written


def test_doctor_json_and_a_clean_bill(project: Path) -> None:
    (project / "watchlist.yaml").write_text('players:\n  - {network: iPoker, name: "Zoë O\'Brien"}\n', encoding="utf-8")
    result = CliRunner().invoke(app, ["doctor", "--json"])
    assert result.exit_code == 0, result.output
    found = orjson.loads(result.stdout)
    assert found["ok"] and all(f["ok"] for f in found["findings"])
    (plan,) = found["plans"]
    assert plan["planned"] == ["iPoker/Zoë O'Brien"] and plan["searches_planned"] == 1 and plan["quota_reset_at"]
    code, lines = doctor()
    assert code == 0 and lines[-1].startswith("ok: a night can run"), lines


@pytest.mark.parametrize(
    ("variable", "value", "check", "names"),
    [
        ("PASSWORD", "definitely-wrong", "account", "TOURNEYLAKE_USERNAME, TOURNEYLAKE_PASSWORD and TOURNEYLAKE_APPKEY"),
        ("APPKEY", "notthekey", "account", "TOURNEYLAKE_USERNAME, TOURNEYLAKE_PASSWORD and TOURNEYLAKE_APPKEY"),
        ("APPNAME", "no-such-app", "service", "TOURNEYLAKE_APPNAME"),
        ("BASE_URL", "http://127.0.0.1:9", "service", "TOURNEYLAKE_BASE_URL"),
    ],
    ids=["wrong-password", "wrong-key", "unknown-application", "unreachable"],
)
def test_each_problem_is_one_line_naming_the_setting(
    project: Path, monkeypatch: pytest.MonkeyPatch, variable: str, value: str, check: str, names: str
) -> None:
    monkeypatch.setenv(f"{ENV_PREFIX}{variable}", value)
    code, lines = doctor()
    assert code == 1, lines
    (problem,) = [line for line in lines if line.startswith("✗")]
    assert problem.startswith(f"✗ {check}:") and names in problem, problem
    assert "definitely-wrong" not in "\n".join(lines) and "Traceback" not in "\n".join(lines)
    assert not any(line.startswith("✓ plan:") for line in lines)  # nothing planned on an account not reached
