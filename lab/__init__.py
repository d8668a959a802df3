"""Your lab: the agent (``agent.py``), its tools (``tools.py``) and their data (``data/``).

These are the files you edit. The kit they run on is the ``gradekit`` package; this
module re-exports its public API, so ``from lab import Replay, Traced`` and
``replay = "lab:Replay"`` in the manifest work as they always did.
"""

from typing import TYPE_CHECKING

import gradekit
from gradekit import __all__ as __all__

if TYPE_CHECKING:
    from gradekit import *  # noqa: F403
else:
    # Only what gradekit has loaded: its live adapters (httpx) still load on first use.
    globals().update((name, vars(gradekit)[name]) for name in __all__ if name in vars(gradekit))

    def __getattr__(name: str) -> object:
        if name in __all__:
            return getattr(gradekit, name)
        raise AttributeError(f"module 'lab' has no attribute {name!r}")
