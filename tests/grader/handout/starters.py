"""Reference labs for the starter's tests: a copy of the kit, or a small one, with its
``[tool.gradekit.starter]`` table set as a test needs it."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

REFERENCE = Path(__file__).resolve().parents[3]
BEGIN, END = "# BEGIN " + "SOLUTION", "# END " + "SOLUTION"  # no marker line in this file
MD_BEGIN, MD_END = "<!-- BEGIN " + "SOLUTION -->", "<!-- END " + "SOLUTION -->"
RUN = "def run(provider, task):\n"


def copy_reference(target: Path) -> Path:
    """A copy of the reference lab as it is now, without environments and caches."""
    shutil.copytree(
        REFERENCE,
        target,
        symlinks=True,
        ignore=shutil.ignore_patterns(
            ".git",
            ".venv*",
            "__pycache__",
            "build",
            "grades",
            "*.egg-info",
            ".*_cache",
            ".hypothesis",
        ),
    )
    return target


def with_table(
    root: Path,
    *,
    include: list[str] | None = None,
    ship: list[str] | None = None,
    readme: str | None = None,
    table: str | None = None,
) -> None:
    """Replace the ``[tool.gradekit.starter]`` table of ``root``'s pyproject.toml (add one
    when there is none): the keys given, or ``table``'s text; ``""`` removes it."""
    path = root / "pyproject.toml"
    text = re.sub(
        r"\n\[tool\.gradekit\.starter\]\n(?:(?!\n\[).)*",
        "",
        path.read_text("utf-8"),
        flags=re.DOTALL,
    )
    if table is None:
        keys = [
            f"{key} = {json.dumps(value)}"
            for key, value in (("include", include), ("ship", ship), ("readme", readme))
            if value is not None
        ]
        table = "[tool.gradekit.starter]\n" + "\n".join(keys) + "\n"
    path.write_text(text.rstrip("\n") + "\n" + (f"\n{table}" if table else ""), "utf-8")


def small_lab(
    root: Path,
    agent: str = RUN + "    return provider.complete(task)\n",
    *,
    include: tuple[str, ...] = ("lab/**", "FAILURES.md", "pyproject.toml"),
) -> Path:
    """A reference lab of a few files: ``lab/agent.py`` holds ``agent``."""
    (root / "lab").mkdir(parents=True)
    (root / "lab" / "__init__.py").write_text("", "utf-8")
    (root / "lab" / "agent.py").write_text(agent, "utf-8")
    (root / "FAILURES.md").write_text("# Failures\n", "utf-8")
    (root / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.gradekit]\nagent = "lab.agent:run"\n', "utf-8"
    )
    with_table(root, include=list(include))
    return root


def files(root: Path) -> dict[str, bytes]:
    """Every file under ``root``, by relative path."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }
