"""Where a run reads and writes: the home folder (`--home`, else $TFXFLOW_HOME, else ./tfxflow_home) and every
path under it."""

from __future__ import annotations

import dataclasses
import os
from typing import Mapping, Optional

HOME_ENV = "TFXFLOW_HOME"
DEFAULT_HOME = "tfxflow_home"


def resolve_home(flag: Optional[str], environ: Mapping[str, str]) -> str:
    """`--home`, else $TFXFLOW_HOME, else ./tfxflow_home."""
    return flag or environ.get(HOME_ENV) or os.path.join(os.getcwd(), DEFAULT_HOME)


@dataclasses.dataclass(frozen=True)
class Paths:
    """Where a run reads and writes. Every output lives under `home` unless set on its own."""

    home: str
    pipeline_root: str
    metadata_path: str
    serving_dir: str
    log_dir: str
    trainer_backup_dir: str

    @classmethod
    def under(
        cls,
        home: str,
        pipeline_root: Optional[str] = None,
        metadata_path: Optional[str] = None,
        serving_dir: Optional[str] = None,
    ) -> "Paths":
        home = os.path.abspath(home)
        return cls(
            home=home,
            pipeline_root=os.path.abspath(pipeline_root or os.path.join(home, "pipeline_root")),
            metadata_path=os.path.abspath(metadata_path or os.path.join(home, "metadata", "metadata.sqlite")),
            serving_dir=os.path.abspath(serving_dir or os.path.join(home, "serving")),
            log_dir=os.path.join(home, "logs"),
            trainer_backup_dir=os.path.join(home, "trainer_backup"),
        )

    @property
    def tuning_dir(self) -> str:
        """The tuning's Optuna studies (components/tuning/tuner.py): a killed tuning resumes from here."""
        return os.path.join(self.home, "tuning")

    @property
    def tracking_outbox(self) -> str:
        """What a run could not log to MLflow while its server did not answer (components/tracking/tracking_outbox.py):
        beside the metadata store, whose run lock guards both."""
        return os.path.join(os.path.dirname(self.metadata_path), "mlflow_outbox")
