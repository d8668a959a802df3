"""gradekit's grader: rubric, submissions and the ``gradekit`` command line.

The grader imports ``lab``; ``lab`` never imports the grader.
"""

from grader._manifest import Manifest, load_manifest
from grader._rubric import Case, RubricError, load_cases

__all__ = ["Case", "Manifest", "RubricError", "load_cases", "load_manifest"]
