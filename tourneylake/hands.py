"""Hand analysis: 5 searches a hand, subscribers only, and never twice for the same hand.

An analysis is kept under ``$TOURNEYLAKE_DATA_DIR/hands/<sha256>[.<lang>].json`` (hands stay local:
with a lake at a URL, beside the warehouse file instead): a hand already
analysed (same bytes, same language) is answered from there for free. :func:`analyze_hand`
serves ``tourneylake hand analyze FILE``; :func:`analyze_inbox` the opt-in ``hand_analyses``
asset, which analyses every file dropped into ``inbox/hands/`` within the run's budget. Each
metered call goes through the session's metering hooks (budget guard, ledger).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from tourneylake.api import ApiError, Client, CredentialsError, QuotaError, SubscriptionError, calls
from tourneylake.api.tree import Node
from tourneylake.config import Settings
from tourneylake.errors import BudgetRefused, RunFailed
from tourneylake.lake.ledger import LedgerWriter
from tourneylake.lake.storage import atomic_write
from tourneylake.night.session import Session, connected

__all__ = [
    "HandAnalysisRefused",
    "InboxOutcome",
    "analyze_hand",
    "analyze_inbox",
    "hand_record_path",
    "hands_dir",
    "inbox_dir",
]

HANDS_DIR = "hands"
INBOX_DIR = Path("inbox") / "hands"
_LANG_RE = re.compile(r"[^A-Za-z0-9_-]")


class HandAnalysisRefused(ApiError):
    """The account may not analyse hands (error 102004/102005: subscribers only)."""


def hands_dir(settings: Settings) -> Path:
    """Local always: in the data directory, or beside the warehouse file when the lake is at a URL."""
    return settings.local_dir / HANDS_DIR


def inbox_dir(settings: Settings) -> Path:
    return settings.local_dir / INBOX_DIR


def hand_record_path(settings: Settings, sha256: str, lang: str | None) -> Path:
    """Where a hand's analysis is kept: ``hands/<sha256>.json`` for the default language,
    ``hands/<sha256>.<lang>.json`` for another one (a hand is analysed once per language)."""
    suffix = f".{_LANG_RE.sub('_', lang)}" if lang else ""
    return hands_dir(settings) / f"{sha256}{suffix}.json"


def _stored_analysis(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    try:
        record = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError:
        return None  # a record cut short: analyse again rather than trust it
    return record if isinstance(record, dict) and isinstance(record.get("analysis"), str) else None


def _analysis_text(payload: Node | None) -> str:
    """The assessment's text, whatever element holds it (the body's shape is undocumented)."""
    if payload is None:
        return ""
    if payload.text:
        return payload.text
    for name in ("Analysis", "Text", "Assessment", "Result"):
        text = payload.child_text(name)
        if text:
            return text
    parts = [_analysis_text(child) for child in payload.children()]
    return "\n".join(part for part in parts if part)


def _analyse_one(
    session: Session, client: Client, ledger: LedgerWriter, hand: bytes, lang: str | None, path: Path
) -> tuple[str, int]:
    """Send one hand (the caller checked it is not stored), store its analysis, return
    (analysis, searches spent). A subscriber-only refusal raises :class:`HandAnalysisRefused`."""
    before = ledger.spent
    try:
        payload = session.paid_payload(calls.hand_analysis(hand, lang or None), client)
    except SubscriptionError as exc:
        raise HandAnalysisRefused(f"hand analysis is for subscribers only: {exc}", resource=calls.HAND_ANALYSIS) from None
    searches = ledger.spent - before
    analysis = _analysis_text(payload)
    record = {
        "hand_sha256": hashlib.sha256(hand).hexdigest(),
        "hand": hand.decode("utf-8", errors="replace"),
        "lang": lang or None,
        "analysis": analysis,
        "analysed_at": datetime.now(UTC).isoformat(),
        "searches": searches,
        "run_id": session.run_id,
    }
    atomic_write(path, orjson.dumps(record, option=orjson.OPT_INDENT_2), fsync=session.lake.fsync)
    return analysis, searches


def analyze_hand(settings: Settings, hand_bytes: bytes, lang: str | None = None) -> tuple[str, int]:
    """Analyse one hand history (5 searches) once: an analysed hand (same bytes, same language)
    is answered from ``hands/`` for free. Returns (analysis, searches spent)."""
    path = hand_record_path(settings, hashlib.sha256(hand_bytes).hexdigest(), lang)
    stored = _stored_analysis(path)
    if stored is not None:
        return stored["analysis"], 0
    with connected(settings, writable=True) as session, session.meter.metered(calls.HAND_ANALYSIS) as (budget, ledger):
        with session.client(**session.meter.hooks(budget, ledger)) as client:
            return _analyse_one(session, client, ledger, hand_bytes, lang, path)


@dataclass
class InboxOutcome:
    """What :func:`analyze_inbox` did with the files in ``inbox/hands/``."""

    analysed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    deferred: list[tuple[str, str]] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    searches_spent: int = 0
    remaining_searches: int | None = None
    stopped_reason: str | None = None


def _inbox_files(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if p.is_file() and not p.name.startswith("."))


def analyze_inbox(session: Session, lang: str | None = None) -> InboxOutcome:
    """Analyse every hand file in ``$TOURNEYLAKE_DATA_DIR/inbox/hands/`` not analysed before,
    within the run's budget (cap and reserve; a rerun of the night spends only what the cap has
    left after tonight's earlier hand analyses). A quota or subscription error stops the rest,
    which stays in the inbox for a later run. The files are left where they are: an analysed hand
    is skipped at no cost."""
    settings = session.settings
    outcome = InboxOutcome()
    todo: list[tuple[Path, bytes, Path]] = []
    for file in _inbox_files(inbox_dir(settings)):
        content = file.read_bytes()
        record = hand_record_path(settings, hashlib.sha256(content).hexdigest(), lang)
        if _stored_analysis(record) is not None:
            outcome.skipped.append(file.name)
        else:
            todo.append((file, content, record))
    if not todo:
        return outcome
    with session.meter.metered(calls.HAND_ANALYSIS) as (budget, ledger):
        with session.client(**session.meter.hooks(budget, ledger)) as client:
            for index, (file, content, record) in enumerate(todo):
                refusal = f"stopped: {outcome.stopped_reason}" if outcome.stopped_reason else budget.refusal(calls.HAND_ANALYSIS)
                if refusal is not None:
                    outcome.deferred.extend((f.name, refusal) for f, _, _ in todo[index:])
                    break
                try:
                    _analyse_one(session, client, ledger, content, lang, record)
                except BudgetRefused as exc:
                    outcome.deferred.extend((f.name, str(exc)) for f, _, _ in todo[index:])
                    break
                except (HandAnalysisRefused, QuotaError) as exc:
                    outcome.stopped_reason = str(exc) if isinstance(exc, HandAnalysisRefused) else f"quota: {exc}"
                    budget.stop(outcome.stopped_reason)
                    outcome.deferred.append((file.name, outcome.stopped_reason))
                except CredentialsError as exc:
                    raise RunFailed(f"credentials refused by the service: {exc}") from None
                except ApiError as exc:
                    outcome.failed.append((file.name, str(exc)))
                else:
                    outcome.analysed.append(file.name)
        outcome.searches_spent = ledger.spent
        outcome.remaining_searches = budget.remaining
    return outcome
