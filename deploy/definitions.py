"""The code location of a deployment: the one ``Definitions``, its nightly job on the executor
the deployment runs (``DEPLOY_EXECUTOR``: ``k8s``, ``celery`` or ``multiprocess``), with that
executor's run config from this folder (``k8s/run_config.yaml``, ``celery/run_config.yaml``) as
the job's default. Settings come from ``TOURNEYLAKE_*`` variables, which every step's process,
pod or Celery worker sees (passwords from a secret store, never from run config); with
``TOURNEYLAKE_STATE_URL`` the ledger, locks and documents are shared in PostgreSQL. Each
account's harvest is its own step (``player_summaries/<account>``, its own pool), so the
accounts of a night fetch side by side on whatever runs the steps. See ``deploy/README.md``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from dagster import Definitions, ExecutorDefinition, definitions, multiprocess_executor

from tourneylake.errors import ConfigError
from tourneylake.pipelines.definitions import definitions_from_env

HERE = Path(__file__).resolve().parent
EXECUTOR_ENV = "DEPLOY_EXECUTOR"
#: Executor name → where its run config lives (beside this file); multiprocess needs none.
RUN_CONFIGS = {"k8s": HERE / "k8s" / "run_config.yaml", "celery": HERE / "celery" / "run_config.yaml"}


def executor_named(name: str) -> ExecutorDefinition:
    """The executor a deployment runs the nightly job's steps on."""
    if name == "k8s":
        from dagster_k8s import k8s_job_executor

        return k8s_job_executor
    if name == "celery":
        from dagster_celery import celery_executor

        return celery_executor
    if name == "multiprocess":
        return multiprocess_executor
    raise ConfigError(f"{EXECUTOR_ENV}: expected k8s, celery or multiprocess (got {name!r})")


def run_config(name: str) -> dict[str, Any] | None:
    """The executor's run config shipped here (``None``: its defaults)."""
    path = RUN_CONFIGS.get(name)
    return yaml.safe_load(path.read_text(encoding="utf-8")) if path is not None else None


def deployment(name: str | None = None) -> Definitions:
    """The Definitions of a deployment on executor ``name`` (default: ``$DEPLOY_EXECUTOR``, else
    multiprocess)."""
    name = name or os.environ.get(EXECUTOR_ENV) or "multiprocess"
    return definitions_from_env(executor_named(name), run_config(name))


@definitions
def defs() -> Definitions:
    """What the deployment's code location loads, built from the environment when it loads (as
    ``tourneylake.pipelines.definitions.defs``)."""
    return deployment()
