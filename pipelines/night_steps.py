"""The code location the steps of ``tourneylake run``'s night load when its accounts are
harvested side by side (``pipelines.nightly``): ``pipelines.definitions.defs`` without the dbt
models, so a night's steps do not import dbt. A module of its own: Dagster loads one
``@definitions`` function per module."""

from __future__ import annotations

from dagster import Definitions, definitions

from pipelines.definitions import definitions_from_env


@definitions
def defs() -> Definitions:
    return definitions_from_env(with_models=False)
