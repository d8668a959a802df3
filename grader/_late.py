"""Late work: a lab's late policy, and what it makes of one submission's time.

The policy is ``late.toml`` beside the rubric (``[late]``: ``due``, ``grace``, ``penalty``
``per`` day or hour, ``cap``, ``cutoff``), the instructor's like the rubric, and never part
of it: moving a due date changes no rubric digest and no report, so no human review goes
stale. A submission's time and extension come from what the instructor trusts (a roster's
``submitted_at`` and ``extension`` columns, Gradescope's ``submission_metadata.json``),
never from the grading machine's clock and never from the submission (a commit's date is
whatever the student's machine said): the same submission gets the same penalty on any
grading day, in any time zone.

The penalty is a percent of the possible points per started day (or hour) past the due
time plus the student's extension, once past the grace period, at most ``cap`` percent;
after the cutoff (plus the extension) it is 100 percent. It is its own line beside the
automated points, as a review is: the report is never edited, and the final grade is the
total with its reviews, less the penalty, never below zero.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

from gradekit import UsageError

__all__ = [
    "LATE_FILE",
    "Late",
    "LatePolicy",
    "late_from_document",
    "lateness",
    "load_late_policy",
    "parse_duration",
    "parse_late_policy",
    "parse_time",
    "show_duration",
    "show_time",
]

LATE_FILE = "late.toml"  # beside the rubric
_KEYS = ("cap", "cutoff", "due", "grace", "penalty", "per")
_UNITS = {"day": 86400, "hour": 3600}
_DURATION = re.compile(r"(?:([0-9]{1,4})d)?(?:([0-9]{1,5})h)?(?:([0-9]{1,6})m)?")
_CENT = Decimal("0.01")
_EXAMPLE = "such as 2026-12-01T23:59:00-08:00 or 2026-12-02T07:59:00Z"


@dataclass(frozen=True, slots=True)
class LatePolicy:
    """A lab's late policy, as ``late.toml`` gives it; times are aware, durations seconds."""

    due: dt.datetime
    penalty: Decimal  # percent of the possible points per started unit
    per: str  # "day" or "hour"
    grace: int = 0
    cap: Decimal = Decimal(100)
    cutoff: dt.datetime | None = None
    source: str = LATE_FILE

    def document(self) -> dict[str, str]:
        """The policy as the ledger keeps it (UTC times, the percent as written)."""
        return {
            "due": show_time(self.due),
            "grace": show_duration(self.grace),
            "penalty": f"{self.penalty}% per {self.per}",
            "cap": f"{self.cap}%",
            **({"cutoff": show_time(self.cutoff)} if self.cutoff else {}),
        }


@dataclass(frozen=True, slots=True)
class Late:
    """What the policy makes of one submission: when it came, when it was due for this
    student, and the penalty in points (0 when on time, or when its time is unknown)."""

    due: str  # the student's due time (with their extension), UTC
    submitted: str  # "" when no time was given: no penalty, and the cell says so
    extension: int = 0  # seconds
    source: str = ""  # where the time came from: "roster", "gradescope"
    units: int = 0  # started days (hours) late, past the grace period
    per: str = "day"
    percent: Decimal = Decimal(0)
    penalty: Decimal = Decimal(0)  # points
    cutoff: bool = False  # after the cutoff: nothing is accepted

    def document(self) -> dict[str, Any]:
        """As results.json's ``extra_data.late`` and the ledger's run event keep it."""
        return {
            "due": self.due,
            "submitted": self.submitted,
            "extension": show_duration(self.extension),
            "source": self.source,
            "units": self.units,
            "per": self.per,
            "percent": str(self.percent),
            "penalty": f"{self.penalty.quantize(_CENT)}",
            "cutoff": self.cutoff,
        }

    def cell(self) -> str:
        """One line for people: the gradebook's ``late`` cell, Gradescope's test output."""
        if not self.submitted:
            return (
                f"no submission time, so no late penalty (due {self.due}): give the "
                "roster a submitted_at column"
            )
        extended = f" with a {show_duration(self.extension)} extension" if self.extension else ""
        when = f"submitted {self.submitted}, due {self.due}{extended}"
        if self.cutoff:
            return f"after the cutoff: -{self.penalty.quantize(_CENT)} (all points; {when})"
        if not self.units:
            return f"on time ({when})"
        unit = self.per if self.units == 1 else f"{self.per}s"
        return (
            f"{self.units} {unit} late: -{self.penalty.quantize(_CENT)} ({self.percent}% "
            f"of the possible points; {when})"
        )


def parse_time(value: object, where: str) -> dt.datetime:
    """A point in time with its offset: a TOML offset date-time, or its RFC 3339 text."""
    if isinstance(value, str):
        try:
            value = dt.datetime.fromisoformat(value.strip().replace("z", "Z"))
        except ValueError:
            raise UsageError(
                f"{where}: {value!r} is not a date and time: write one {_EXAMPLE}"
            ) from None
    if not isinstance(value, dt.datetime):
        raise UsageError(f"{where}: {value!r} is not a date and time: write one {_EXAMPLE}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise UsageError(
            f"{where}: {value.isoformat()} has no time zone offset, so it would "
            f"mean another time on another machine: add one, {_EXAMPLE}"
        )
    return value


def parse_duration(text: str, where: str) -> int:
    """``1d``, ``36h``, ``90m``, ``1d12h``, ``0`` as seconds."""
    match = _DURATION.fullmatch(text.strip())
    if text.strip() in ("0", ""):
        return 0
    if match is None or not any(match.groups()):
        raise UsageError(
            f"{where}: {text!r} is not a duration: write days, hours and minutes "
            "such as 1d, 36h, 90m or 1d12h"
        )
    days, hours, minutes = (int(part or 0) for part in match.groups())
    return ((days * 24 + hours) * 60 + minutes) * 60


def show_duration(seconds: int) -> str:
    """Seconds as ``parse_duration`` reads them back: ``1d``, ``1d12h``, ``0``."""
    if seconds <= 0:
        return "0"
    minutes, _ = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    return "".join(f"{n}{u}" for n, u in ((days, "d"), (hours, "h"), (minutes, "m")) if n)


def show_time(moment: dt.datetime) -> str:
    """A time in UTC, to the second, as ``2026-12-02T07:59:00Z``: the same on every machine."""
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def load_late_policy(folder: Path) -> LatePolicy | None:
    """The policy in ``folder/late.toml``; None when there is none."""
    path = folder / LATE_FILE
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UsageError(
            f"{path}: cannot be read ({exc.strerror or exc}): fix its "
            "permissions, or remove it to grade without a late policy"
        ) from exc
    return parse_late_policy(data, source=str(path))


def parse_late_policy(data: bytes, *, source: str) -> LatePolicy:
    """Validate ``late.toml``'s bytes; ``UsageError`` naming the key and the fix."""
    try:
        document = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"{source}: not TOML ({exc}): fix the line it names") from None
    table = document.get("late")
    if set(document) != {"late"} or not isinstance(table, dict):
        raise UsageError(
            f"{source}: must hold one [late] table (and nothing else) with due, penalty and per"
        )
    unknown = sorted(set(table) - set(_KEYS))
    if unknown:
        raise UsageError(f"{source}: [late] has no key {unknown[0]!r}: use {', '.join(_KEYS)}")
    for key in ("due", "penalty", "per"):
        if key not in table:
            raise UsageError(
                f"{source}: [late] needs {key} (due = {_EXAMPLE.split()[2]}, "
                'penalty = 10, per = "day")'
            )
    due = parse_time(table["due"], f"{source}: [late] due")
    per = table["per"]
    if per not in _UNITS:
        raise UsageError(f'{source}: [late] per = {per!r}: write "day" or "hour"')
    penalty, cap = (
        _percent(table.get(key, default), f"{source}: [late] {key}")
        for key, default in (("penalty", 0), ("cap", 100))
    )
    grace = table.get("grace", "0")
    if not isinstance(grace, str):
        raise UsageError(
            f'{source}: [late] grace = {grace!r}: write a duration in quotes, such as "15m"'
        )
    cutoff = table.get("cutoff")
    policy = LatePolicy(
        due,
        penalty,
        per,
        parse_duration(grace, f"{source}: [late] grace"),
        cap,
        None if cutoff is None else parse_time(cutoff, f"{source}: [late] cutoff"),
        source,
    )
    if policy.cutoff is not None and policy.cutoff < due:
        raise UsageError(
            f"{source}: [late] cutoff {show_time(policy.cutoff)} is before due "
            f"{show_time(due)}: move it after the due time, or remove it"
        )
    return policy


def _percent(value: object, where: str) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UsageError(f"{where} = {value!r}: write a percent from 0 to 100, such as 10")
    percent = Decimal(repr(value))
    if not 0 <= percent <= 100 or percent != percent.quantize(_CENT):
        raise UsageError(f"{where} = {value!r}: write a percent from 0 to 100, such as 10")
    return percent.normalize() if percent != percent.to_integral() else percent.quantize(1)


def lateness(
    policy: LatePolicy,
    most: Decimal,
    submitted: dt.datetime | None,
    extension: int = 0,
    source: str = "",
) -> Late:
    """What ``policy`` makes of a submission made at ``submitted`` (None: not known) by a
    student with ``extension`` seconds more, out of ``most`` possible points. Pure: no clock."""
    due = policy.due + dt.timedelta(seconds=extension)
    if submitted is None:
        return Late(show_time(due), "", extension, source, per=policy.per)
    shown = Late(show_time(due), show_time(submitted), extension, source, per=policy.per)
    if policy.cutoff is not None and submitted > policy.cutoff + dt.timedelta(seconds=extension):
        return _with(shown, 0, Decimal(100), most, cutoff=True)
    past = (submitted - due).total_seconds()
    if past <= policy.grace:
        return shown
    units = math.ceil(past / _UNITS[policy.per])
    return _with(shown, units, min(policy.cap, policy.penalty * units), most)


def _with(late: Late, units: int, percent: Decimal, most: Decimal, *, cutoff: bool = False) -> Late:
    penalty = (most * percent / 100).quantize(_CENT, rounding=ROUND_HALF_UP)
    return Late(
        late.due,
        late.submitted,
        late.extension,
        late.source,
        units,
        late.per,
        percent,
        penalty,
        cutoff,
    )


def late_from_document(document: Mapping[str, Any]) -> Late:
    """``Late.document()`` read back; ``ValueError`` when it is not one."""
    try:
        penalty = Decimal(str(document["penalty"]))
        if penalty != penalty.quantize(_CENT) or penalty < 0:
            raise ValueError("penalty is not points")
        late = Late(
            str(document["due"]),
            str(document["submitted"]),
            parse_duration(str(document["extension"]), "extension"),
            str(document["source"]),
            int(document["units"]),
            str(document["per"]),
            Decimal(str(document["percent"])),
            penalty,
            bool(document["cutoff"]),
        )
    except (KeyError, TypeError, ArithmeticError, UsageError) as exc:
        raise ValueError(f"not a late-policy entry ({exc})") from None
    if late.document() != dict(document):
        raise ValueError("not a late-policy entry as gradekit writes it")
    return late
