"""Tests of the grader, one folder per package of grader/."""
