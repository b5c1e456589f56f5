"""Where Ferry's development folders are: the dev dir (``FERRY_DEV_DIR``) and the jar folder
(``FERRY_JARS_DIR``).

The one place that says so, shared by the local stack (``ferry.devstack``), which fills them, and
``pipeline/spark.py``, which only reads the Spark connector's jars from them: a runtime package
finds the jars without importing the local stack.
"""

from __future__ import annotations

import os
from pathlib import Path

DEV_DIR_ENV = "FERRY_DEV_DIR"
JARS_DIR_ENV = "FERRY_JARS_DIR"

# The source checkout this module runs from (the folder holding setup.cfg), or None when Ferry
# runs installed from a wheel: then the stack's state goes to ./.dev of the current directory.
_PARENT = Path(__file__).resolve().parent.parent
REPO_ROOT: Path | None = _PARENT if (_PARENT / "setup.cfg").is_file() else None


def dev_dir() -> Path:
    default = (REPO_ROOT or Path.cwd()) / ".dev"
    return Path(os.environ.get(DEV_DIR_ENV, default)).resolve()


def jars_dir(kind: str | None = None) -> Path:
    """The one place that says where jars are: ``$FERRY_JARS_DIR`` (default ``<dev dir>/jars``), or
    its ``kind`` subfolder (``kafka``, ``zookeeper``, ``spark``, ``registry``)."""
    root = Path(os.environ.get(JARS_DIR_ENV, dev_dir() / "jars")).resolve()
    return root / kind if kind else root
