"""``python -m grader.batch BATCH_PID``: the batch's zygote, the process that imports the
grader once and forks a worker for each submission (``grader.batch._zygote``).

The batch starts it; nobody else needs to. It runs from here, not as ``-m
grader.batch._zygote``, because this package's door imports that module: run by its own
name it would be executed a second time, and Python would say so on every grading.
"""

from __future__ import annotations

import sys

from grader.batch._zygote import main

sys.exit(main(sys.argv))
