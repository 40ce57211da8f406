"""The reference data in force for a night, read from the lake's metadata tables.

Every night that ran the metadata step has its own metadata partition (a night whose metadata was
unchanged holds a copy of the snapshot in force, see ``from_raw.metadata_tables``), so a night's
rates, statistic types and filter catalogue are its own and never another night's: re-normalising
a night always converts money with that night's rates. A night without one (its metadata step
never ran) falls back to the latest earlier night's.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date
from functools import cached_property
from typing import Any

import pyarrow as pa

from tourneylake.api.filters import ConstraintDefinition, FilterCatalog
from tourneylake.lake.lake import Lake
from tourneylake.tables.normalize.metadata import Rates, axis_types, series_types, statistic_types

__all__ = ["InForce"]


class InForce:
    """Reference data in force for ``night`` in ``lake`` (each table read once, on first use).
    ``own``: the night's own tables as just made, in force whether or not they are committed
    yet (their partition is this night's: the latest)."""

    def __init__(self, lake: Lake, night: date, own: Mapping[str, pa.Table] | None = None) -> None:
        self.lake = lake
        self.night = night
        self.own = dict(own or {})

    def table(self, name: str) -> pa.Table | None:
        """The snapshot of ``name`` in force (the table's log read once)."""
        if name in self.own:
            return self.own[name]
        nights = self.lake.tables.parts(name)
        dates = [d for d in nights if d <= self.night]
        if not dates:
            return None
        return self.lake.tables.read_parts(dates[-1], [path for path, _ in nights[dates[-1]]])

    def normaliser_inputs(self) -> dict[str, Any]:
        """What a summary normaliser of the night takes from here (rates and types), as values
        another process can be handed (see :meth:`with_inputs`)."""
        return {
            "rates": self.rates,
            "statistic_types": self.statistic_types,
            "series_types": self.series_types,
            "axis_types": self.axis_types,
        }

    @classmethod
    def with_inputs(cls, lake: Lake, night: date, inputs: dict[str, Any]) -> InForce:
        """The night's reference data whose normaliser inputs are ``inputs`` (another process's
        :meth:`normaliser_inputs`): those are read from no table."""
        in_force = cls(lake, night)
        in_force.__dict__.update(inputs)  # what the cached properties would have read
        return in_force

    @cached_property
    def currencies(self) -> pa.Table | None:
        return self.table("currencies")

    @cached_property
    def rates(self) -> Rates:
        return Rates.from_table(self.currencies) if self.currencies is not None else Rates({})

    @cached_property
    def metadata_hash(self) -> str | None:
        """The hash of the metadata snapshot in force (sent with the next metadata call)."""
        table = self.currencies
        if table is None or table.num_rows == 0:
            return None
        return table.column("metadata_hash")[0].as_py()

    @cached_property
    def statistic_types(self) -> dict[str, str]:
        table = self.table("statistic_definitions")
        return statistic_types(table) if table is not None else {}

    @cached_property
    def series_types(self) -> dict[tuple[str, str], str]:
        table = self.table("dataset_definitions")
        return series_types(table) if table is not None else {}

    @cached_property
    def axis_types(self) -> dict[str, str]:
        table = self.table("dataset_definitions")
        return axis_types(table) if table is not None else {}

    @cached_property
    def filter_catalog(self) -> FilterCatalog | None:
        constraints = self.table("filter_constraints")
        if constraints is None:
            return None
        options = self.table("filter_options")
        by_constraint: dict[str, list[str]] = {}
        if options is not None:
            for row in options.select(["constraint_id", "option_id"]).to_pylist():
                by_constraint.setdefault(row["constraint_id"], []).append(row["option_id"])
        currencies = self.currencies
        return FilterCatalog(
            constraints={
                row["constraint_id"]: ConstraintDefinition(
                    row["constraint_id"], row["type"] or "", tuple(by_constraint.get(row["constraint_id"], ()))
                )
                for row in constraints.select(["constraint_id", "type"]).to_pylist()
            },
            currencies=frozenset(currencies.column("iso").to_pylist()) if currencies is not None else frozenset(),
        )

    @cached_property
    def known_networks(self) -> set[str] | None:
        table = self.table("networks")
        return set(table.column("name").to_pylist()) if table is not None else None

    @cached_property
    def currencies_without_rate(self) -> list[str]:
        table = self.currencies
        if table is None:
            return []
        return sorted(row["iso"] for row in table.select(["iso", "rate"]).to_pylist() if row["rate"] is None)
