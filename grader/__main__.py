"""``python -m grader`` is the ``gradekit`` command."""

import sys

from grader.cli import main

sys.exit(main())
