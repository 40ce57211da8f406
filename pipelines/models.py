"""The models' code location (``workspace.yaml``'s ``tourneylake_models``): the dbt models, the
report and the ``models`` job, beside the nights' location (``tourneylake.pipelines.definitions``), so that
a night's run never loads dbt. A module of its own: Dagster loads one ``@definitions`` function
per module."""

from __future__ import annotations

from dagster import Definitions, definitions

from tourneylake.assets.resource import TourneylakeResource
from tourneylake.pipelines.definitions import models_location


@definitions
def defs() -> Definitions:
    return models_location(TourneylakeResource.from_env())
