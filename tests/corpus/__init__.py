"""Student agents the kit did not write: one folder per way of structuring an agent.

Each ``<shape>/agent.py`` is an honest submission of that shape; every other module in the
folder is one mistake, written the way that shape's student would write it (often reusing
the honest module's pieces, as students do). ``tools.py`` and ``notes.txt`` are the lab's
read-only tools and their data, shared by every shape. ``tests/test_corpus.py`` records and
grades them; nothing here is imported by the test process itself.
"""
