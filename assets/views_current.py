"""What the models report when their views are current, without importing dagster-dbt.

A night changes what the views show, not what they are: when the last build's views are
current (:func:`~tourneylake.tables.models.views_current`) only the dbt tests run, in process
(:func:`~tourneylake.tables.models.check_current_views`). Their outcome is told to Dagster under
the same asset and check keys as dagster-dbt's build: by the ``models`` job's asset
(``assets.models``) as outputs and check results, or by ``tourneylake run`` as events reported
to the instance, with no job to set up and no dbt module imported.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dagster import AssetCheckEvaluation, AssetCheckKey, AssetCheckSeverity, AssetKey, AssetMaterialization

from assets.warehouse import table_key
from tourneylake.tables.models import CURRENT, ModelsBuild, manifest_document


@dataclass(frozen=True)
class CheckOutcome:
    """One dbt test's result as a Dagster check."""

    key: AssetCheckKey
    passed: bool
    severity: AssetCheckSeverity
    metadata: dict[str, Any]


def check_key_of_test(manifest: Mapping[str, Any], unique_id: str) -> AssetCheckKey | None:
    """A dbt test's check key as dagster-dbt names it: the test's name, on the asset of the node
    it tests (a generic test's ``attached_node``; a singular test's one dependency)."""
    node = manifest["nodes"][unique_id]
    upstream = node["depends_on"]["nodes"]
    attached = upstream[0] if len(upstream) == 1 else node.get("attached_node")
    target = (manifest["nodes"].get(attached) or manifest["sources"].get(attached)) if attached else None
    return AssetCheckKey(table_key(target["name"]), node["name"]) if target else None


def current_views_outcome(tested: ModelsBuild) -> tuple[dict[AssetKey, dict[str, Any]], list[CheckOutcome]]:
    """Each model's asset and its metadata (its view as it was), and each test's outcome."""
    manifest = manifest_document()
    models: dict[AssetKey, dict[str, Any]] = {}
    tests: list[CheckOutcome] = []
    for name, uid in tested.unique_ids.items():
        node = manifest["nodes"][uid]
        if node["resource_type"] == "model":
            models[table_key(node["name"])] = {"unique_id": uid, "status": CURRENT}
            continue
        key = check_key_of_test(manifest, uid)
        if key is None:
            continue
        status = tested.statuses[name]
        severity = AssetCheckSeverity.WARN if status == "warn" else AssetCheckSeverity.ERROR
        failing = tested.failures.get(uid, 0)
        tests.append(
            CheckOutcome(
                key, status == "pass", severity, {"unique_id": uid, "status": status, "dagster_dbt/failed_row_count": failing}
            )
        )
    return models, tests


def reported_events(tested: ModelsBuild) -> list[AssetMaterialization | AssetCheckEvaluation]:
    """The same outcome as events reported to an instance outside a run."""
    models, tests = current_views_outcome(tested)
    events: list[AssetMaterialization | AssetCheckEvaluation] = [
        AssetMaterialization(key, metadata=metadata) for key, metadata in models.items()
    ]
    events += [
        AssetCheckEvaluation(
            asset_key=test.key.asset_key,
            check_name=test.key.name,
            passed=test.passed,
            severity=test.severity,
            metadata=test.metadata,
        )
        for test in tests
    ]
    return events
