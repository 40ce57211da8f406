"""The dbt models (``sql/``) as Dagster assets: every model an asset, every dbt test a check.

A model's lineage is its SQL's ``ref``/``source``, read from the manifest: a source is the
``warehouse/<table>`` asset the nightly load materialises, so each model hangs below the tables
it reads. Tests on a source are checks of that table's asset. Every build is dagster-dbt's
``dbt build`` on the settings' warehouse file: the views made, then their tests. They are built
by the ``models`` job, once after a night (``models_after_nightly``) or after the last night of
``tourneylake run``, not inside the partitioned nightly job.
"""

from collections.abc import Iterator, Mapping
from typing import Any

from dagster import AssetExecutionContext, AssetKey
from dagster_dbt import DagsterDbtTranslator, DagsterDbtTranslatorSettings, DbtCliResource, dbt_assets

from tourneylake.assets.pools import WAREHOUSE_POOL
from tourneylake.assets.resource import TourneylakeResource
from tourneylake.assets.warehouse import table_key
from tourneylake.tables.models import (
    PROJECT,
    dbt_executable,
    ensure_manifest,
    incremental_models_current,
    target_dir,
    warehouse_vars,
)

GROUP = "models"


class WarehouseTranslator(DagsterDbtTranslator):
    """dbt nodes → asset keys: ``warehouse/<table>`` for a source (the loaded table's own asset),
    ``warehouse/<model>`` for a model (a view in the same file), in the ``models`` group."""

    def get_asset_key(self, dbt_resource_props: Mapping[str, Any]) -> AssetKey:
        # A source (`source('warehouse', t)`, the only source) or a model: one name space, the file's.
        return table_key(dbt_resource_props["name"])

    def get_group_name(self, dbt_resource_props: Mapping[str, Any]) -> str | None:
        return GROUP


TRANSLATOR = WarehouseTranslator(DagsterDbtTranslatorSettings(enable_source_tests_as_checks=True))


def dbt_resource() -> DbtCliResource:
    """The dbt CLI on ``sql/``: this environment's dbt, whatever PATH says."""
    return DbtCliResource(project_dir=str(PROJECT), profiles_dir=str(PROJECT), dbt_executable=dbt_executable())


@dbt_assets(manifest=ensure_manifest(), dagster_dbt_translator=TRANSLATOR, name="dbt_models", pool=WAREHOUSE_POOL)
def dbt_models(context: AssetExecutionContext, dbt: DbtCliResource, tourneylake: TourneylakeResource) -> Iterator[Any]:
    """``dbt build`` of the selected models and their tests on the settings' warehouse file."""
    settings = tourneylake.settings()
    warehouse = settings.warehouse_path
    args = ["build", "--vars", warehouse_vars(warehouse, **settings.model_vars)]
    with incremental_models_current(warehouse, variables=settings.model_vars) as refreshed:
        if refreshed:
            context.log.info(f"the models changed since they were built: {', '.join(refreshed)} made again from every night")
        yield from dbt.cli(args, context=context, target_path=target_dir(warehouse)).stream()
