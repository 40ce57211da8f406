"""The dbt models (``sql/``) as Dagster assets: every model an asset, every dbt test a check.

A model's lineage is its SQL's ``ref``/``source``, read from the manifest: a source is the
``warehouse/<table>`` asset the nightly load materialises, so each model hangs below the tables
it reads. Tests on a source are checks of that table's asset. The models are views: building
them creates or replaces the views and runs the tests; the data is the tables', loaded each night,
so views already current are not made again (only their tests run, without dbt's start).
They are built by the ``models`` job, once after a night (``models_after_nightly``) or after the
last night of ``tourneylake run``, not inside the partitioned nightly job.
"""

from collections.abc import Iterator, Mapping, Sequence
from functools import cached_property
from typing import Any

from dagster import AssetCheckResult, AssetExecutionContext, AssetKey, Output
from dagster_dbt import DagsterDbtTranslator, DagsterDbtTranslatorSettings, DbtCliResource, dbt_assets
from dagster_dbt.compat import DBT_PYTHON_VERSION
from packaging.version import Version

from assets.partitions import WAREHOUSE_POOL
from assets.resource import TourneylakeResource
from assets.views_current import current_views_outcome
from assets.warehouse import table_key
from tourneylake.tables.models import (
    PROJECT,
    ModelsBuild,
    check_current_views,
    dbt_executable,
    ensure_manifest,
    target_dir,
    views_current,
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


class WarehouseDbt(DbtCliResource):
    """dagster-dbt's CLI resource without two costs of each build that buy nothing here: a
    ``dbt --version`` child process (the dbt is this environment's, whose version is known) and
    an adapter made in this process (for column metadata and row counts, which these views do
    not fetch)."""

    @cached_property
    def _cli_version(self) -> Version:
        assert DBT_PYTHON_VERSION is not None  # dbt-core is a dependency
        return DBT_PYTHON_VERSION

    def _initialize_dbt_core_adapter(self, args: Sequence[str]) -> Any:
        return None


def dbt_resource() -> DbtCliResource:
    """The dbt CLI on ``sql/``: this environment's dbt, whatever PATH says."""
    return WarehouseDbt(project_dir=str(PROJECT), profiles_dir=str(PROJECT), dbt_executable=dbt_executable())


@dbt_assets(manifest=ensure_manifest(), dagster_dbt_translator=TRANSLATOR, name="dbt_models", pool=WAREHOUSE_POOL)
def dbt_models(context: AssetExecutionContext, dbt: DbtCliResource, tourneylake: TourneylakeResource) -> Iterator[Any]:
    """``dbt build`` of the selected models and their tests on the settings' warehouse file; or,
    when its views are current (:func:`~tourneylake.tables.models.views_current`), their tests
    alone, run here."""
    settings = tourneylake.settings()
    warehouse = settings.warehouse_path
    if views_current(warehouse, settings.model_vars):
        yield from current_views_events(context, check_current_views(warehouse))
        return
    args = ["build", "--vars", warehouse_vars(warehouse, **settings.model_vars)]
    yield from dbt.cli(args, context=context, target_path=target_dir(warehouse)).stream()


def current_views_events(context: AssetExecutionContext, tested: ModelsBuild) -> Iterator[Output[None] | AssetCheckResult]:
    """What a dbt build would report, for views that were current: each selected model's output
    (its view as it was) and each selected test's check."""
    models, tests = current_views_outcome(tested)
    selected = context.op_execution_context.selected_output_names
    for key, metadata in models.items():
        if key.to_python_identifier() in selected:
            yield Output(None, output_name=key.to_python_identifier(), metadata=metadata)
    for test in tests:
        if test.key in context.selected_asset_check_keys:
            yield AssetCheckResult(
                passed=test.passed,
                asset_key=test.key.asset_key,
                check_name=test.key.name,
                severity=test.severity,
                metadata=test.metadata,
            )
