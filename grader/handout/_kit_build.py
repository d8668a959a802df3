"""The build backend of the autograder's copy of the kit (PEP 517), standard library only.

``gradekit gradescope build`` copies this kit into ``kit/`` with a ``pyproject.toml`` that
names this module as its backend (``backend-path``), so ``pip install kit/`` builds the
wheel here, with nothing to download: setup.sh installs the kit with no setuptools from an
index, and the tests install it with ``pip --no-index``.

It reads ``[project]`` (name, version, requires-python, dependencies, optional-dependencies,
scripts) and ``[tool.kit-build] packages``: each package's own files (not its
sub-packages', which are listed in turn), caches left out. The wheel is the same bytes for
the same tree: its entries are sorted and dated 1980-01-01.

Imported by its file's folder (``grader/handout``) as a top-level module: it imports no
part of the kit.
"""

from __future__ import annotations

import base64
import hashlib
import re
import tomllib
import zipfile
from pathlib import Path
from typing import Any

__all__ = ["build_wheel", "get_requires_for_build_wheel"]

_DATE = (1980, 1, 1, 0, 0, 0)  # the earliest a zip entry can say: no build time in the bytes
_SKIPPED = ("__pycache__", ".pyc")


def get_requires_for_build_wheel(config_settings: dict[str, Any] | None = None) -> list[str]:
    """Nothing: the backend is the standard library."""
    return []


def build_wheel(
    wheel_directory: str,
    config_settings: dict[str, Any] | None = None,
    metadata_directory: str | None = None,
) -> str:
    """Write the kit's wheel into ``wheel_directory``; return its file name."""
    document = tomllib.loads(Path("pyproject.toml").read_text("utf-8"))
    project = document["project"]
    name = re.sub(r"[-_.]+", "_", project["name"]).lower()
    info = f"{name}-{project['version']}.dist-info"
    files: dict[str, bytes] = {}
    for package in document["tool"]["kit-build"]["packages"]:
        folder = Path(*package.split("."))
        for path in sorted(folder.iterdir()):
            if path.is_file() and not any(part in path.name for part in _SKIPPED):
                files[path.as_posix()] = path.read_bytes()
    files[f"{info}/METADATA"] = _metadata(project).encode("utf-8")
    files[f"{info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: gradekit-kit-build\n"
        b"Root-Is-Purelib: true\nTag: py3-none-any\n"
    )
    scripts = project.get("scripts", {})
    if scripts:
        lines = [f"{script} = {target}" for script, target in sorted(scripts.items())]
        files[f"{info}/entry_points.txt"] = (
            "[console_scripts]\n" + "\n".join(lines) + "\n"
        ).encode("utf-8")
    entries = [f"{path},sha256={_digest(data)},{len(data)}" for path, data in files.items()]
    files[f"{info}/RECORD"] = ("\n".join([*entries, f"{info}/RECORD,,"]) + "\n").encode("utf-8")
    wheel = f"{name}-{project['version']}-py3-none-any.whl"
    with zipfile.ZipFile(Path(wheel_directory) / wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        for entry_name, data in files.items():  # dist-info last, RECORD at the very end
            entry = zipfile.ZipInfo(entry_name, _DATE)
            entry.external_attr = 0o644 << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(entry, data)
    return wheel


def _metadata(project: dict[str, Any]) -> str:
    """The wheel's METADATA: name, version, Python and requirements, each extra's marked."""
    lines = ["Metadata-Version: 2.1", f"Name: {project['name']}", f"Version: {project['version']}"]
    if "requires-python" in project:
        lines.append(f"Requires-Python: {project['requires-python']}")
    lines += [f"Requires-Dist: {requirement}" for requirement in project.get("dependencies", [])]
    for extra, requirements in sorted(project.get("optional-dependencies", {}).items()):
        lines.append(f"Provides-Extra: {extra}")
        for requirement in requirements:
            text, _, marker = requirement.partition(";")
            marker = f"({marker.strip()}) and " if marker.strip() else ""
            lines.append(f'Requires-Dist: {text.strip()}; {marker}extra == "{extra}"')
    return "\n".join(lines) + "\n"


def _digest(data: bytes) -> str:
    """A RECORD hash: sha256, URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")
