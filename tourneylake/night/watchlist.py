"""The watchlist: which players to harvest, with which named filters, and (optionally) which
service accounts share them. Its format and every rule are in ``docs/guides/watchlist.md``.

A watchlist is read from YAML's node tree (so ``name: 007`` is the player ``"007"``), never from
resolved values, and every broken rule is a :class:`WatchlistError` naming the file and line:
an unknown key, a filter that does not parse, a window that contradicts its filter, the same
player twice (network and name compared after NFC normalisation and case folding: a duplicate
must never cost two searches), a secret written in the file instead of named by ``password_env``.
"""

from __future__ import annotations

import pickle
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from tourneylake.api.filters import FilterSyntaxError, parse_filter
from tourneylake.errors import TourneylakeError

__all__ = [
    "DEFAULT_PRIORITY",
    "AccountDef",
    "FilterDef",
    "WatchedPlayer",
    "Watchlist",
    "WatchlistError",
    "load_watchlist",
    "parse_watchlist",
    "player_key",
]

#: Priority of a player that does not give one. Lower numbers are harvested first.
DEFAULT_PRIORITY = 100

_FILTER_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_INT_RE = re.compile(r"[-+]?[0-9]+")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
_NULL_TAG = "tag:yaml.org,2002:null"
_STR_TAG = "tag:yaml.org,2002:str"
_INT_TAG = "tag:yaml.org,2002:int"

# libyaml's parser composes the node tree several times faster than PyYAML's pure-Python one and
# keeps every node's mark, so problems still name their line; PyYAML built
# without libyaml falls back to the pure-Python parser.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_TOP_KEYS = ("filters", "players", "accounts")
_FILTER_KEYS = ("filter", "question", "timezone", "locale", "window", "anchor")
_CHOICES = {"window": ("as_of", "day"), "anchor": ("night", "none")}
_PLAYER_KEYS = ("network", "name", "filters", "priority")
_ACCOUNT_KEYS = (
    "name", "username", "password_env", "appname", "appkey_env", "max_searches_per_run", "reserve_searches", "concurrency",
)  # fmt: skip
_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ACCOUNT_LIMITS = {"max_searches_per_run": (0, None), "reserve_searches": (0, None), "concurrency": (1, 64)}


class WatchlistError(TourneylakeError, ValueError):
    """A watchlist that cannot be used. ``line`` is the 1-based line of the first problem (or
    ``None``); ``problems`` lists every ``(line, message)`` found; ``source`` is the file."""

    def __init__(self, problems: list[tuple[int | None, str]], source: str) -> None:
        self.problems = problems
        self.source = source
        self.line = problems[0][0] if problems else None
        lines = [f"{source}:{line}: {message}" if line else f"{source}: {message}" for line, message in problems]
        super().__init__("\n".join(lines))


@dataclass(frozen=True)
class FilterDef:
    """A named filter: an ``expression`` (filter string) or a natural-language ``question``, with
    its ``window`` (``as_of`` or ``day``) and whether its Date is anchored to the night."""

    name: str
    expression: str | None = None
    question: str | None = None
    timezone: str | None = None
    locale: str | None = None
    window: Literal["as_of", "day"] = "as_of"
    anchor: bool = True
    line: int | None = field(default=None, compare=False)

    @property
    def is_question(self) -> bool:
        return self.question is not None


@dataclass(frozen=True)
class WatchedPlayer:
    """A player to harvest. ``filters`` empty means one unfiltered harvest; lower ``priority``
    is more important."""

    network: str
    name: str
    filters: tuple[str, ...] = ()
    priority: int = DEFAULT_PRIORITY
    line: int | None = field(default=None, compare=False)

    @property
    def key(self) -> tuple[str, str]:
        """The identity used to detect duplicates (see :func:`player_key`)."""
        return player_key(self.network, self.name)


@dataclass(frozen=True)
class AccountDef:
    """A service account that takes a share of the players: its credentials are named here
    (the password by the environment variable that holds it), its limits default to the
    settings'. See :mod:`tourneylake.night.accounts`."""

    name: str
    username: str
    password_env: str
    appname: str | None = None
    appkey_env: str | None = None
    max_searches_per_run: int | None = None
    reserve_searches: int | None = None
    concurrency: int | None = None
    line: int | None = field(default=None, compare=False)


@dataclass
class Watchlist:
    """A validated watchlist: filters by name, players in file order, accounts (if several)."""

    filters: dict[str, FilterDef] = field(default_factory=dict)
    players: list[WatchedPlayer] = field(default_factory=list)
    source: str = "<watchlist>"
    accounts: list[AccountDef] = field(default_factory=list)

    def targets(self) -> list[tuple[WatchedPlayer, str | None]]:
        """Every (player, filter name) pair to harvest, ``None`` for unfiltered: players in file
        order, each player's filters in the order listed. Ordering by priority and staleness is
        the planner's job (:func:`tourneylake.night.budget.plan_night`)."""
        pairs: list[tuple[WatchedPlayer, str | None]] = []
        for player in self.players:
            if player.filters:
                pairs.extend((player, name) for name in player.filters)
            else:
                pairs.append((player, None))
        return pairs


def player_key(network: str, name: str) -> tuple[str, str]:
    """Network and player name compared the way a duplicate would cost a search: NFC, case-folded."""
    return (
        unicodedata.normalize("NFC", network).casefold(),
        unicodedata.normalize("NFC", name).casefold(),
    )


# ----------------------------------------------------------------------------------- loading


def load_watchlist(path: str | Path) -> Watchlist:
    """Read and validate a watchlist file; :class:`WatchlistError` names the line of each problem.

    A run reads the file several times (the CLI checks it before Dagster starts, the definitions
    read its accounts, the harvest its players): while its text is unchanged it is parsed once
    per process; each caller gets its own lists and dict, sharing the entries, which are frozen
    (a deep copy would cost more than the parse)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise WatchlistError([(None, "watchlist file not found")], str(path)) from None
    except UnicodeDecodeError as exc:
        raise WatchlistError([(None, f"watchlist is not UTF-8 text: {exc}")], str(path)) from None
    key = (str(path), text)
    if _PARSED.get("key") != key:
        _PARSED.clear()
        _PARSED.update(key=key, watchlist=parse_watchlist(text, source=str(path)))
    parsed: Watchlist = _PARSED["watchlist"]
    return replace(parsed, filters=dict(parsed.filters), players=list(parsed.players), accounts=list(parsed.accounts))


# The last watchlist parsed in this process (see load_watchlist): one entry, so it never grows.
_PARSED: dict[str, Any] = {}


def parse_watchlist(text: str, source: str = "<watchlist>") -> Watchlist:
    """Validate watchlist YAML given as text (``source`` names it in error messages).

    The watchlist is read from YAML's node graph, so what it keeps would lie in memory among the
    graph's many small objects and keep their pages once the graph is freed; it is made again
    from a pickled copy once the graph is gone (a fraction of the memory). The copy is this
    process's own objects, never read from outside."""
    return pickle.loads(_read_pickled(text, source))


def _read_pickled(text: str, source: str) -> bytes:
    """The validated watchlist, pickled; its node graph is freed when this returns."""
    try:
        root = yaml.compose(text, Loader=_LOADER)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        raise WatchlistError([(line, f"not valid YAML: {exc.problem or exc}")], source) from None
    except yaml.YAMLError as exc:
        raise WatchlistError([(None, f"not valid YAML: {exc}")], source) from None
    reader = _Reader()
    watchlist = reader.read(root, source)
    if reader.problems:
        raise WatchlistError(reader.problems, source)
    return pickle.dumps(watchlist, protocol=pickle.HIGHEST_PROTOCOL)


def _line(node: Node) -> int:
    return node.start_mark.line + 1


def _is_null(node: Node) -> bool:
    return isinstance(node, ScalarNode) and node.tag == _NULL_TAG


def _kind(node: Node) -> str:
    if isinstance(node, MappingNode):
        return "a mapping"
    if isinstance(node, SequenceNode):
        return "a list"
    return "empty" if _is_null(node) else f"{node.value!r}"


class _Reader:
    """Walks the composed YAML tree, collecting every problem with its line."""

    def __init__(self) -> None:
        self.problems: list[tuple[int | None, str]] = []
        # Filter names defined in the file, valid or not: a player naming an invalid filter must
        # not get a second, misleading "not defined" error.
        self.declared: set[str] = set()

    def problem(self, node: Node | None, message: str) -> None:
        self.problems.append((_line(node) if node is not None else None, message))

    def mapping(self, node: MappingNode, allowed: tuple[str, ...], what: str) -> Iterator[tuple[str, Node]]:
        """The (key, value) pairs of a mapping; unknown and repeated keys become problems."""
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, ScalarNode) or _is_null(key_node):
                self.problem(key_node, f"{what}: keys must be plain names")
                continue
            key = key_node.value
            if key in seen:
                self.problem(key_node, f"{what}: key {key!r} repeated (first on line {seen[key]})")
                continue
            seen[key] = _line(key_node)
            if key not in allowed:
                expected = ", ".join(repr(k) for k in allowed)
                self.problem(key_node, f"{what}: unknown key {key!r} (expected {expected})")
                continue
            yield key, value_node

    def text(self, node: Node, what: str, *, required: bool) -> str | None:
        """A scalar read as written (``007`` stays ``"007"``); problems for anything else."""
        if _is_null(node):
            if required:
                self.problem(node, f"{what} is empty")
            return None
        if not isinstance(node, ScalarNode):
            self.problem(node, f"{what} must be text, not {_kind(node)}")
            return None
        value: str = node.value
        if not value.strip():
            self.problem(node, f"{what} is blank")
            return None
        if _CONTROL_RE.search(value):
            self.problem(node, f"{what} contains a control character (a line break?)")
            return None
        return value

    # ---------------------------------------------------------------------------------

    def read(self, root: Node | None, source: str) -> Watchlist:
        watchlist = Watchlist(source=source)
        if root is None or _is_null(root):
            return watchlist
        if not isinstance(root, MappingNode):
            self.problem(root, "a watchlist is a mapping with 'filters:' and 'players:'")
            return watchlist
        players_node: Node | None = None
        for key, value in self.mapping(root, _TOP_KEYS, "watchlist"):
            if key == "filters":
                watchlist.filters = self.read_filters(value)
            elif key == "accounts":
                watchlist.accounts = self.read_accounts(value)
            else:
                players_node = value
        if players_node is not None:
            watchlist.players = self.read_players(players_node, watchlist.filters)
        return watchlist

    def read_filters(self, node: Node) -> dict[str, FilterDef]:
        filters: dict[str, FilterDef] = {}
        if _is_null(node):
            return filters
        if not isinstance(node, MappingNode):
            self.problem(node, "'filters' must be a mapping of name: filter string, {filter: ...} or {question: ...}")
            return filters
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            name = key_node.value if isinstance(key_node, ScalarNode) and not _is_null(key_node) else None
            if name is None or not _FILTER_NAME_RE.fullmatch(name):
                self.problem(
                    key_node,
                    f"filter name {name!r} must be letters, digits, '_', '.' or '-' "
                    "(it becomes part of file paths and table keys)",
                )
                continue
            if name in seen:
                self.problem(key_node, f"filter {name!r} defined twice (first on line {seen[name]})")
                continue
            seen[name] = _line(key_node)
            self.declared.add(name)
            definition = self.read_filter(name, value_node)
            if definition is not None:
                filters[name] = definition
        return filters

    def read_filter(self, name: str, node: Node) -> FilterDef | None:
        line = _line(node)
        if isinstance(node, ScalarNode) and not _is_null(node):
            expression: str = node.value
            if expression == "":
                self.problem(node, f"filter {name!r} is empty: to harvest unfiltered, list the player without filters")
                return None
            try:
                parse_filter(expression)
            except FilterSyntaxError as exc:
                self.problem(node, f"filter {name!r} is not a valid filter: {exc}")
                return None
            return FilterDef(name, expression=expression, line=line)
        if isinstance(node, MappingNode):
            return self.read_filter_mapping(name, node, line)
        self.problem(
            node,
            f'filter {name!r} must be a filter string ("Class:SNG;Date:30D") '
            f"or a mapping {{filter: ...}} or {{question: ...}}, not {_kind(node)}",
        )
        return None

    def read_filter_mapping(self, name: str, node: MappingNode, line: int) -> FilterDef | None:
        """``{filter: ..., window: ..., anchor: ...}`` or ``{question: ..., timezone: ..., locale: ...,
        window: ..., anchor: ...}``; every problem is recorded, ``None`` if there was any."""
        what = f"filter {name!r}"
        before = len(self.problems)
        fields: dict[str, str | None] = {}
        nodes: dict[str, Node] = {}
        for key, value in self.mapping(node, _FILTER_KEYS, what):
            nodes[key] = value
            if key in ("window", "anchor"):
                fields[key] = self.choice(value, f"{what}: {key}", _CHOICES[key])
            else:
                fields[key] = self.text(value, f"{what}: {key}", required=key in ("filter", "question"))
        if "filter" in nodes and "question" in nodes:
            self.problem(nodes["question"], f"{what} has both 'filter' and 'question': give one")
        elif "filter" not in nodes and "question" not in nodes:
            self.problem(node, f"{what} needs a 'filter' or a 'question'")
        elif "filter" in nodes:
            for key in ("timezone", "locale"):
                if key in nodes:
                    self.problem(nodes[key], f"{what}: {key!r} only goes with a 'question', not a 'filter' string")
        window = fields.get("window") or "as_of"
        anchor = fields.get("anchor") or "night"
        if window == "day" and anchor == "none":
            self.problem(
                nodes["anchor"],
                f"{what}: window: day anchors the filter to the night, so anchor: none contradicts it (remove one of them)",
            )
        expression = fields.get("filter")
        if expression is not None:
            try:
                dates = parse_filter(expression).get("Date")
            except FilterSyntaxError as exc:
                self.problem(nodes["filter"], f"{what} is not a valid filter: {exc}")
            else:
                if window == "day" and dates:
                    shown = ", ".join(str(c) for c in dates)
                    self.problem(
                        nodes["filter"],
                        f"{what}: a per-day window sets the Date itself: remove {shown} or use window: as_of",
                    )
        question = fields.get("question")
        if len(self.problems) > before or (expression is None and question is None):
            return None
        return FilterDef(
            name,
            expression=expression,
            question=question,
            timezone=fields.get("timezone"),
            locale=fields.get("locale"),
            window="day" if window == "day" else "as_of",
            anchor=anchor == "night",
            line=line,
        )

    def choice(self, node: Node, what: str, allowed: tuple[str, ...]) -> str | None:
        """One of ``allowed``, exactly as written; anything else (empty included: ``anchor: null``
        must not silently mean the default) is a problem listing the allowed values."""
        expected = " or ".join(repr(a) for a in allowed)
        if isinstance(node, ScalarNode) and not _is_null(node) and node.value in allowed:
            return node.value
        self.problem(node, f"{what} must be {expected}, not {_kind(node)}")
        return None

    def read_players(self, node: Node, filters: dict[str, FilterDef]) -> list[WatchedPlayer]:
        players: list[WatchedPlayer] = []
        if _is_null(node):
            return players
        if not isinstance(node, SequenceNode):
            self.problem(node, "'players' must be a list of {network: ..., name: ...} entries")
            return players
        seen: dict[tuple[str, str], int] = {}
        for item in node.value:
            player = self.read_player(item, filters)
            if player is None:
                continue
            first = seen.get(player.key)
            if first is not None:
                self.problem(
                    item,
                    f"player {player.name!r} on {player.network} is listed twice (first on line {first}): "
                    "merge the two entries into one",
                )
                continue
            seen[player.key] = _line(item)
            players.append(player)
        return players

    def read_player(self, node: Node, filters: dict[str, FilterDef]) -> WatchedPlayer | None:
        if not isinstance(node, MappingNode):
            self.problem(node, f"a player is a mapping like {{network: PokerStars, name: ...}}, not {_kind(node)}")
            return None
        before = len(self.problems)
        network: str | None = None
        name: str | None = None
        filter_names: list[str] = []
        priority = DEFAULT_PRIORITY
        present: set[str] = set()
        for key, value in self.mapping(node, _PLAYER_KEYS, "player"):
            present.add(key)
            if key == "network":
                network = self.text(value, "player network", required=True)
            elif key == "name":
                name = self.text(value, "player name", required=True)
            elif key == "filters":
                filter_names = self.read_filter_names(value, filters)
            else:
                priority = self.read_priority(value)
        for required in ("network", "name"):
            if required not in present:
                self.problem(node, f"player has no {required!r}")
        if len(self.problems) > before or network is None or name is None:
            return None
        return WatchedPlayer(network, name, tuple(filter_names), priority, line=_line(node))

    def read_filter_names(self, node: Node, filters: dict[str, FilterDef]) -> list[str]:
        if _is_null(node):
            return []
        items = [node] if isinstance(node, ScalarNode) else node.value if isinstance(node, SequenceNode) else None
        if items is None:
            self.problem(node, "player filters must be a list of filter names, e.g. [sng_30d]")
            return []
        names: list[str] = []
        for item in items:
            value = self.text(item, "filter name", required=True)
            if value is None:
                continue
            if value not in filters:
                if value in self.declared:
                    continue  # defined but invalid: its own error says why
                defined = ", ".join(sorted(filters)) or "none"
                self.problem(item, f"filter {value!r} is not defined under 'filters:' (defined: {defined})")
                continue
            if value in names:
                self.problem(item, f"filter {value!r} listed twice for this player")
                continue
            names.append(value)
        return names

    def read_priority(self, node: Node) -> int:
        if isinstance(node, ScalarNode) and node.tag == _INT_TAG and _INT_RE.fullmatch(node.value):
            return int(node.value)
        shown = _kind(node)
        self.problem(node, f"priority must be a whole number (lower = more important), not {shown}")
        return DEFAULT_PRIORITY

    def read_accounts(self, node: Node) -> list[AccountDef]:
        accounts: list[AccountDef] = []
        if _is_null(node):
            return accounts
        if not isinstance(node, SequenceNode):
            self.problem(node, "'accounts' must be a list of {name: ..., username: ..., password_env: ...} entries")
            return accounts
        seen: dict[str, int] = {}
        for item in node.value:
            account = self.read_account(item)
            if account is None:
                continue
            if account.name in seen:
                self.problem(item, f"account {account.name!r} is listed twice (first on line {seen[account.name]})")
                continue
            seen[account.name] = _line(item)
            accounts.append(account)
        return accounts

    def read_account(self, node: Node) -> AccountDef | None:
        if not isinstance(node, MappingNode):
            self.problem(
                node, f"an account is a mapping like {{name: main, username: ..., password_env: ...}}, not {_kind(node)}"
            )
            return None
        before = len(self.problems)
        values: dict[str, str | int | None] = {}
        for key, value in self.mapping(node, _ACCOUNT_KEYS, "account"):
            if key in _ACCOUNT_LIMITS:
                values[key] = self.read_limit(value, f"account {key}", *_ACCOUNT_LIMITS[key])
                continue
            text = self.text(value, f"account {key}", required=True)
            if text is None:
                continue
            if key == "name" and not _FILTER_NAME_RE.fullmatch(text):
                self.problem(value, f"account name {text!r} must be letters, digits, '_', '.' or '-' (it names assets and pools)")
            elif key.endswith("_env") and not _ENV_NAME_RE.fullmatch(text):
                self.problem(value, f"account {key} must name an environment variable (e.g. TL_MAIN_PASSWORD), not {text!r}")
            values[key] = text
        missing = [repr(required) for required in ("name", "username", "password_env") if required not in values]
        if missing and len(self.problems) == before:  # an empty or invalid value already has its own problem
            self.problem(node, f"account has no {', '.join(missing)}")
        if len(self.problems) > before:
            return None
        return AccountDef(**values, line=_line(node))  # type: ignore[arg-type]

    def read_limit(self, node: Node, what: str, least: int, most: int | None) -> int | None:
        if isinstance(node, ScalarNode) and node.tag == _INT_TAG and _INT_RE.fullmatch(node.value):
            number = int(node.value)
            if number >= least and (most is None or number <= most):
                return number
        bounds = f"from {least} to {most}" if most is not None else f"{least} or more"
        self.problem(node, f"{what} must be a whole number {bounds}, not {_kind(node)}")
        return None
