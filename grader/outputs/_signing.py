"""Instructor signatures: an HMAC-SHA256 over the canonical bytes of each output file.

A digest proves only that a file is self-consistent: whoever edits ``report.json`` can
recompute it. A signature needs the instructor's key, so a student (or anyone without
the key) cannot make an edited ``report.json`` or ``results.json`` pass ``gradekit
report verify --key-file``. The key comes from ``--key-file FILE``, else
``GRADEKIT_SIGNING_KEY_FILE``, else ``GRADEKIT_SIGNING_KEY``; without one nothing is
signed and every byte stays as it was (the digest never covers the signature).

Where a signature lives and what it covers (docs/formats.md "Signatures"):

- ``report.json``: a top-level ``signature``; the MAC covers ``CONTEXT["report"]``
  followed by the canonical JSON of the document without ``signature`` (``digest``
  included).
- ``results.json``: ``extra_data.signature``; the MAC covers ``CONTEXT["results"]``
  followed by the canonical JSON of the document without ``extra_data.signature``.

The key is read by the batch, which signs each finished submission's files itself
(``grader.ledger._folder.sign_outputs``): workers get an environment without the signing
variables, and sandboxed children get an environment built from nothing
(``grader.sandbox._layout.child_environment``).
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from gradekit import UsageError
from grader.outputs._report import canonical

__all__ = [
    "CONTEXT",
    "KEY_ENV",
    "KEY_FILE_ENV",
    "MIN_KEY_BYTES",
    "PREFIX",
    "Kind",
    "load_key",
    "sign",
    "sign_file",
    "signature_problem",
    "signed_bytes",
    "without_signing_key",
]

KEY_ENV = "GRADEKIT_SIGNING_KEY"
KEY_FILE_ENV = "GRADEKIT_SIGNING_KEY_FILE"
MIN_KEY_BYTES = 16
PREFIX = "hmac-sha256:"
Kind = Literal["report", "results"]
# A signature of one kind of file is never valid for the other.
CONTEXT: Mapping[Kind, bytes] = {
    "report": b"gradekit-signature/1 report.json\n",
    "results": b"gradekit-signature/1 results.json\n",
}
_SIGNATURE = re.compile(rf"{re.escape(PREFIX)}[0-9a-f]{{64}}")
_MAKE_KEY = "python3 -c 'import secrets; print(secrets.token_hex(32))' > grading.key"


def load_key(key_file: Path | None = None, env: Mapping[str, str] | None = None) -> bytes | None:
    """The instructor's key, or None when none is configured.

    ``UsageError`` (exit 2) for an unreadable file, both variables at once, or a key
    shorter than ``MIN_KEY_BYTES``: a grading that was meant to be signed must not run
    unsigned. A key file's final newline is not part of the key.
    """
    env = os.environ if env is None else env
    if key_file is None and KEY_FILE_ENV in env and KEY_ENV in env:
        raise UsageError(f"both {KEY_ENV} and {KEY_FILE_ENV} are set: unset one of them")
    if key_file is None and KEY_FILE_ENV in env:
        key_file = Path(env[KEY_FILE_ENV])
    if key_file is not None:
        try:
            key = key_file.read_bytes().rstrip(b"\r\n")
        except OSError as exc:
            raise UsageError(
                f"cannot read the signing key file {key_file} ({exc.strerror}): "
                f"check the path, or make one with `{_MAKE_KEY}`"
            ) from exc
        source = f"the key file {key_file}"
    elif KEY_ENV in env:
        key, source = env[KEY_ENV].encode("utf-8"), KEY_ENV
    else:
        return None
    if len(key) < MIN_KEY_BYTES:
        raise UsageError(
            f"{source} holds a signing key of {len(key)} bytes, fewer than "
            f"{MIN_KEY_BYTES}: use a random key of at least {MIN_KEY_BYTES} bytes "
            f"(make one with `{_MAKE_KEY}`), or unset {KEY_ENV} and "
            f"{KEY_FILE_ENV} to grade without signing"
        )
    return key


def without_signing_key(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` without the signing variables: for processes that never sign."""
    return {name: value for name, value in env.items() if name not in (KEY_ENV, KEY_FILE_ENV)}


def _strip(kind: Kind, document: Mapping[str, object]) -> tuple[dict[str, object], object]:
    """The document without its signature, and the signature (None when absent)."""
    stripped = copy.deepcopy(dict(document))
    if kind == "report":
        return stripped, stripped.pop("signature", None)
    extra = stripped.get("extra_data")
    if not isinstance(extra, dict):
        return stripped, None
    return stripped, extra.pop("signature", None)


def signed_bytes(kind: Kind, document: Mapping[str, object]) -> bytes:
    """The exact bytes the MAC covers: the context line, then the canonical document
    without its signature."""
    return CONTEXT[kind] + canonical(_strip(kind, document)[0])


def sign(kind: Kind, document: Mapping[str, object], key: bytes) -> str:
    """The signature of ``document``: ``hmac-sha256:`` and 64 hex digits."""
    return PREFIX + hmac.new(key, signed_bytes(kind, document), hashlib.sha256).hexdigest()


def signature_problem(
    kind: Kind, document: Mapping[str, object], key: bytes | None
) -> tuple[str | None, str]:
    """``(problem, note)``: ``problem`` is None when the signature is acceptable.

    Without a key the signature is not checked (only its form), and ``note`` says so.
    """
    _, signature = _strip(kind, document)
    if signature is not None and not (
        isinstance(signature, str) and _SIGNATURE.fullmatch(signature)
    ):
        return (
            f"the signature is not {PREFIX} and 64 hex digits: the file was edited; "
            "grade the submission again"
        ), ""
    if key is None:
        return None, (
            f"signature not checked: no key (pass --key-file FILE or set {KEY_ENV} to check it)"
        )
    if signature is None:
        return (
            "not signed, but a key was given: it was graded without the key, or the "
            "signature was removed; grade it again with the key"
        ), ""
    if not hmac.compare_digest(signature, sign(kind, document, key)):
        return (
            "the signature does not match: the file was edited after grading, or signed "
            "with another key; grade the submission again"
        ), ""
    return None, "signature valid"


def sign_file(path: Path, kind: Kind, key: bytes) -> None:
    """Sign the canonical JSON file at ``path`` in place (a temporary file, then a rename).

    The file is rewritten as canonical JSON plus one newline: exactly the form gradekit
    writes, so an unsigned file and its signed copy differ only in the signature.
    """
    document = json.loads(path.read_bytes())
    if kind == "report":
        document["signature"] = sign(kind, document, key)
    elif isinstance(document.get("extra_data"), dict):
        document["extra_data"]["signature"] = sign(kind, document, key)
    else:
        raise ValueError(f"{path} has no extra_data object to hold its signature")
    temporary = path.with_name(f".{path.name}.{os.getpid()}.sign")
    try:
        temporary.write_bytes(canonical(document) + b"\n")
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
