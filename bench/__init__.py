"""gradekit benchmarks: scripts that print Markdown tables, never tests.

Run ``python bench/run.py`` (or ``make bench``); ``--quick`` is the smoke-sized run.
"""
