"""Fingerprints of what a student wrote, for comparing a cohort's submissions: normalised
tokens, their k-grams hashed, and winnowing (Schleimer, Wilkerson and Aiken, "Winnowing:
local algorithms for document fingerprinting", SIGMOD 2003), as MOSS does.

A submission is cut into ``Document`` s, each compared on its own, so that moving one
whole unit elsewhere changes none of its fingerprints:

- **code** (``code_documents``): each top-level function, each method of a top-level
  class, each class's other statements, and a module's other statements together. A
  unit's tokens come from its syntax tree, so whitespace, comments, docstrings and
  parentheses are gone; a name the file binds becomes a placeholder of its kind (``F`` a
  function it defines, ``C`` a class, ``V`` any other: a variable, a parameter, a
  constant), so renaming changes nothing; a name it imports stays the imported name, a
  builtin stays itself; strings are ``S`` and numbers ``N``;
- **text** (``text_documents``, FAILURES.md): its words, case-folded, HTML comments (the
  hand-out's hints) left out;
- **cassettes** (``cassette_documents``): each recorded prompt and each answer, as text.

A k-gram of token ids is hashed with a Rabin-Karp rolling hash modulo ``2**61 - 1``;
a token's id is the first 64 bits of its BLAKE2b digest, so a fingerprint is the same in
every process, whatever its hash seed. Winnowing keeps the least hash of every window of
``WINDOW`` k-grams: any run of ``WINDOW + k - 1`` tokens two documents share yields a
fingerprint both hold, and nothing shorter than ``k`` tokens does.
"""

from __future__ import annotations

import ast
import copy
import functools
import hashlib
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

__all__ = [
    "CODE_K",
    "TEXT_K",
    "WINDOW",
    "Document",
    "cassette_documents",
    "code_documents",
    "fingerprints",
    "positioned",
    "text_documents",
]

CODE_K = 12  # tokens of a code k-gram: about two lines
TEXT_K = 8  # words of a text k-gram
WINDOW = 8  # k-grams a winnowing window spans
_PRIME = (1 << 61) - 1
_BASE = 0x1F3D5B79A2C4E6F1 % _PRIME  # any fixed number below the prime: part of the format
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


@dataclass(frozen=True, slots=True)
class Document:
    """One unit compared on its own: its normalised tokens, the line each token stands on
    (1-based, in ``text``), where it is (``label``) and the text those lines are from."""

    label: str
    tokens: tuple[str, ...]
    lines: tuple[int, ...]
    text: str
    k: int


# -- hashing -----------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1 << 17)
def _token_id(token: str) -> int:
    return (
        int.from_bytes(
            hashlib.blake2b(token.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "big"
        )
        % _PRIME
    )


def _kgrams(document: Document) -> list[int]:
    """The rolling hash of each k-gram of the document's tokens, in order."""
    ids = [_token_id(token) for token in document.tokens]
    k = document.k
    if len(ids) < k:
        return []
    top = pow(_BASE, k - 1, _PRIME)
    value = 0
    for token in ids[:k]:
        value = (value * _BASE + token) % _PRIME
    hashes = [value]
    for gone, token in zip(ids, ids[k:], strict=False):
        value = ((value - gone * top) * _BASE + token) % _PRIME
        hashes.append(value)
    return hashes


def fingerprints(document: Document) -> set[int]:
    """The hashes winnowing selects from the document: each window's least."""
    hashes = _kgrams(document)
    if len(hashes) <= WINDOW:
        return {min(hashes)} if hashes else set()
    return set(map(min, zip(*(hashes[shift:] for shift in range(WINDOW)), strict=False)))


def positioned(document: Document) -> list[tuple[int, int]]:
    """``fingerprints`` with the token each selected k-gram starts at: each window's
    rightmost least, recorded once however many windows select it."""
    hashes = _kgrams(document)
    chosen: list[tuple[int, int]] = []
    for start in range(max(1, len(hashes) - WINDOW + 1) if hashes else 0):
        window = hashes[start : start + WINDOW]
        least = min(window)
        at = start + len(window) - 1 - window[::-1].index(least)
        if not chosen or chosen[-1][1] != at:
            chosen.append((least, at))
    return chosen


# -- code --------------------------------------------------------------------------------------


def code_documents(path: str, source: bytes) -> list[Document]:
    """The units of one Python file (none when it does not parse: nothing imports it)."""
    try:
        tree = ast.parse(source)
        walk = _Walk()
        for statement in tree.body:
            if isinstance(statement, ast.Import | ast.ImportFrom):
                walk.names.note_imports(statement)
        raw = [walk.unit(unit) for unit in _units(tree)]  # every binding seen first
    except (SyntaxError, ValueError, RecursionError):
        return []
    text = source.decode("utf-8", "replace")
    return [
        Document(
            path, tuple(walk.names.resolve(token) for token in tokens), tuple(lines), text, CODE_K
        )
        for tokens, lines in raw
    ]


def _units(tree: ast.Module) -> Iterator[Sequence[ast.AST]]:
    """Each def, each method of a class, each class's other statements, and the module's
    other statements but its imports: the units compared apart, in the file's order."""
    rest: list[ast.AST] = []
    for statement in tree.body:
        if _docstring(statement) or isinstance(statement, ast.Import | ast.ImportFrom):
            continue  # what a name is imported as is in the tokens of every use of it
        if isinstance(statement, _DEFS):
            yield [statement]
        elif isinstance(statement, ast.ClassDef):
            methods = [s for s in statement.body if isinstance(s, _DEFS)]
            shell = copy.copy(statement)  # the class without its methods
            shell.body = [s for s in statement.body if not isinstance(s, _DEFS)]
            yield [shell]
            yield from ([method] for method in methods)
        else:
            rest.append(statement)
    if rest:
        yield rest


# A token whose word waits for the whole file: a name, an attribute's name, a keyword's.
_Deferred = tuple[str, str]
_Token = str | _Deferred


class _Names:
    """What each name the file uses is: defined here (by kind), imported, or neither."""

    def __init__(self) -> None:
        self.functions: set[str] = set()
        self.classes: set[str] = set()
        self.variables: set[str] = set()
        self.imported: dict[str, str] = {}  # the name bound -> the name imported
        self.attributes: set[str] = set()  # assigned as an attribute: ``self.x = ...``

    def note(self, node: ast.AST) -> None:
        """Whatever name ``node`` binds."""
        if isinstance(node, _DEFS):
            self.functions.add(node.name)
        elif isinstance(node, ast.ClassDef):
            self.classes.add(node.name)
        elif isinstance(node, ast.arg):
            self.variables.add(node.arg)
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            self.variables.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            self.attributes.add(node.attr)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            self.note_imports(node)
        elif isinstance(node, ast.Global | ast.Nonlocal):
            self.variables.update(node.names)
        elif isinstance(node, ast.ExceptHandler | ast.MatchAs | ast.MatchStar) and node.name:
            self.variables.add(node.name)

    def note_imports(self, node: ast.Import | ast.ImportFrom) -> None:
        """The names an import binds, each to what it imports."""
        for alias in node.names:
            bound = alias.asname or alias.name.partition(".")[0]
            self.imported[bound] = alias.name if alias.asname else bound

    def resolve(self, token: _Token) -> str:
        """A token's word, once the whole file's bindings are known."""
        if isinstance(token, str):
            return token
        kind, name = token
        if kind == "attribute":
            return f"Attribute {self._attribute(name)}"
        shown = self._name(name)
        return f"keyword {shown}" if kind == "keyword" else shown

    def _name(self, name: str) -> str:
        """A placeholder of its kind when the file binds the name; else the name imported,
        or the name itself (a builtin)."""
        if name in self.functions:
            return "F"
        if name in self.classes:
            return "C"
        if name in self.variables:
            return "V"
        return self.imported.get(name, name)

    def _attribute(self, name: str) -> str:
        if name in self.functions:
            return ".F"
        if name in self.classes:
            return ".C"
        return ".V" if name in self.attributes or name in self.variables else f".{name}"


_SKIPPED = frozenset(("ctx", "type_comment", "name", "id", "attr", "arg", "asname"))


class _Walk:
    """Tokens of a file's units, pre-order, each with its line, and the file's bindings
    noted on the way (one pass over the tree)."""

    def __init__(self) -> None:
        self.names = _Names()
        self._tokens: list[_Token] = []
        self._lines: list[int] = []

    def unit(self, nodes: Sequence[ast.AST]) -> tuple[list[_Token], list[int]]:
        self._tokens, self._lines = [], []
        for node in nodes:
            self._visit(node, getattr(node, "lineno", 1))
        return self._tokens, self._lines

    def _visit(self, node: ast.AST, line: int) -> None:
        line = getattr(node, "lineno", line)
        self.names.note(node)
        self._tokens.append(_word(node))
        self._lines.append(line)
        if isinstance(node, ast.Name | ast.Constant):
            return
        for field in node._fields:
            if field in _SKIPPED:
                continue
            value = getattr(node, field, None)
            if isinstance(value, ast.AST):
                self._visit(value, line)
            elif isinstance(value, list):
                for item in value:
                    if isinstance(item, ast.AST) and not _docstring(item):
                        self._visit(item, line)


def _docstring(node: ast.AST) -> bool:
    """A statement that is only a string: a docstring, or text kept as a statement."""
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def _word(node: ast.AST) -> _Token:
    """The node's own token: its kind, with a name, a constant's kind or an import's."""
    if isinstance(node, ast.Name):
        return ("name", node.id)
    if isinstance(node, ast.Constant):
        return _constant(node.value)
    kind = type(node).__name__
    if isinstance(node, _DEFS):
        return f"{kind} F"
    if isinstance(node, ast.ClassDef):
        return f"{kind} C"
    if isinstance(node, ast.Attribute):
        return ("attribute", node.attr)
    if isinstance(node, ast.keyword):
        return ("keyword", node.arg) if node.arg else "keyword **"
    if isinstance(node, ast.alias):
        return f"{kind} {node.name}"
    if isinstance(node, ast.ImportFrom):
        return f"{kind} {node.module or ''}"
    return kind


def _constant(value: object) -> str:
    if isinstance(value, str):
        return "S"
    if isinstance(value, bytes):
        return "B"
    if value is None or isinstance(value, bool):
        return repr(value)
    return "..." if value is Ellipsis else "N"


# -- text --------------------------------------------------------------------------------------

_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
_WORD = re.compile(r"\w+")


def text_documents(label: str, text: str) -> list[Document]:
    """A text as one document of its words, case-folded; an HTML comment (a hand-out's
    hint) is left out, its lines kept, so each word keeps its line."""
    shown = _COMMENT.sub(lambda match: "\n" * match[0].count("\n"), text)
    tokens: list[str] = []
    lines: list[int] = []
    for number, line in enumerate(shown.casefold().splitlines(), 1):
        words = _WORD.findall(line)
        tokens += words
        lines += [number] * len(words)
    return [Document(label, tuple(tokens), tuple(lines), text, TEXT_K)] if tokens else []


def cassette_documents(path: str, data: bytes) -> list[Document]:
    """Each prompt and each answer of a cassette (``gradekit.cassette/1``, or the flat form
    of earlier labs) as a text; none for a file that is not one."""
    try:
        document = json.loads(data)
    except (ValueError, RecursionError):
        return []
    entries = document.get("entries", document) if isinstance(document, dict) else None
    if not isinstance(entries, dict):
        return []
    return [
        text for key, entry in sorted(entries.items()) for text in _entry_texts(path, key, entry)
    ]


def _entry_texts(path: str, key: str, entry: object) -> Iterable[Document]:
    fields: Sequence[tuple[str, object]] = (
        (("prompt", entry.get("prompt")), ("answer", entry.get("response")))
        if isinstance(entry, dict)
        else (("answer", entry),)
    )
    for role, text in fields:
        if isinstance(text, str):
            yield from text_documents(f"{path} {key} {role}", text)
