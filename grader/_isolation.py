"""Which wall a sandboxed child runs behind: Linux namespaces (bubblewrap), or the process guard.

``choose_isolation("auto" | "namespaces" | "process")`` is decided once per grading
process, before any submission is run: ``namespaces`` refuses to start without a
working bubblewrap, ``auto`` takes it when it works and falls back to the process
guard otherwise, ``process`` never uses it.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from typing import Literal, get_args

from lab import UsageError

__all__ = ["INSTALL_HINT", "Isolation", "bubblewrap", "choose_isolation", "describe_isolation"]

Isolation = Literal["namespaces", "process"]
Requested = Literal["auto", "namespaces", "process"]
REQUESTS: tuple[str, ...] = get_args(Requested)
INSTALL_HINT = "install bubblewrap (Debian and Ubuntu: `sudo apt-get install bubblewrap`)"


@functools.cache
def bubblewrap() -> tuple[str | None, str]:
    """The path of a bubblewrap that can build a sandbox here, or None and why not."""
    path = shutil.which("bwrap")
    if path is None:
        return None, "bubblewrap (bwrap) is not installed"
    probe = [path, "--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc",
             "--unshare-uts", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
             "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "true"]
    try:
        done = subprocess.run(probe, stdin=subprocess.DEVNULL, capture_output=True, timeout=30,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"bubblewrap could not be started ({type(exc).__name__})"
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        why = said[-1] if said else f"exit status {done.returncode}"
        return None, f"bubblewrap cannot create namespaces here ({why})"
    return path, ""


def choose_isolation(requested: str) -> Isolation:
    """Resolve ``--isolation``; ``namespaces`` without a working bubblewrap is a usage error."""
    if requested not in REQUESTS:
        raise UsageError(f"--isolation {requested!r}: use one of {', '.join(REQUESTS)}")
    if requested == "process":
        return "process"
    path, why = bubblewrap()
    if path is not None:
        return "namespaces"
    if requested == "namespaces":
        raise UsageError(f"--isolation namespaces: {why}; {INSTALL_HINT}, or pass "
                         "--isolation process to grade behind the in-process guard only")
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        print(f"warning: grading as root without namespaces: {why}. Submission code runs "
              f"behind the in-process guard only; {INSTALL_HINT}.", file=sys.stderr)
    return "process"


def describe_isolation(isolation: Isolation) -> str:
    """One line for a report: which wall the submission's code ran behind."""
    if isolation == "namespaces":
        return ("namespaces (bubblewrap: own user, pid, network, ipc and uts namespaces, "
                "no capabilities, read-only view)")
    return "process guard only (no bubblewrap: resource limits and an audit hook)"
