"""Tamper flags: the parent's static scan of a submission's Python source for code that
reaches for the harness or the process. Pure: files in a temporary folder, no sandbox.

It takes ``FLAGGED`` from ``grader._text`` on purpose: the words every tamper finding starts
with."""

from __future__ import annotations

import importlib.util
import json
import os
import random
import re
import secrets
import shutil
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from grader._text import FLAGGED
from grader.handout import build_starter
from grader.submission import FILE_CAP, Manifest, load_manifest, tamper_findings
from tests.submissions import REFERENCE, VARIANTS, Context, make_submission

FRAMES = "walks the call stack's frames"
LOCALS = "reads a frame's variables"
TRACE = "watches every call's frames"
GC = "searches the garbage collector's objects"
NATIVE = "reaches native code"
EXIT = "ends the process at once"
WRITE = "writes to a file descriptor it did not open"
MODULES = "edits the table of imported modules"
HARNESS = "reaches the harness's own module"
GRADER = "reaches the grader's own code"
MEMBERS = "reads every attribute of an object"
CLOSURE = "reads a function's variables"
RUN = "runs code the scan cannot read"
BUILD = "builds code the scan cannot read"
NAMED = "reaches an attribute named at run time"
LOADED = "reaches a module named at run time"
FORGERS = {"forges_outcome_via_main", "forges_result_on_channel"}


def scan(tmp_path: Path, source: str, name: str = "lab/agent.py") -> list[str]:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return tamper_findings(tmp_path)


def flags(*found: tuple[int, str, str], path: str = "lab/agent.py") -> list[str]:
    """The findings for ``(line, phrase, name)`` in ``path``, in the scan's order."""
    return [
        f"{FLAGGED}{path}:{line}: {phrase} ({name})"
        for line, phrase, name in sorted(found, key=lambda f: (f[0], f"{f[1]} ({f[2]})"))
    ]


# Each: the source (its flagged line marked by "# <-" on it), the phrase and the name.
FLAGGED_FORMS = [
    ("import sys\nsys._getframe(1)  # <-", FRAMES, "sys._getframe"),
    ("import sys\nframes = sys._current_frames()  # <-", FRAMES, "sys._current_frames"),
    ("def up(frame):\n    return frame.f_back  # <-", FRAMES, ".f_back"),
    ("def where(exc):\n    return exc.__traceback__.tb_frame  # <-", FRAMES, ".tb_frame"),
    ("def peek(frame):\n    return frame.f_locals['verdict']  # <-", LOCALS, ".f_locals"),
    ("def peek(frame):\n    return frame.f_globals  # <-", LOCALS, ".f_globals"),
    ("import inspect\nhere = inspect.currentframe()  # <-", FRAMES, "inspect.currentframe"),
    ("import inspect\nfor info in inspect.stack():  # <-\n    pass", FRAMES, "inspect.stack"),
    ("import inspect\ninspect.trace()  # <-", FRAMES, "inspect.trace"),
    (
        "import inspect\ndef f(x):\n    return inspect.getouterframes(x)  # <-",
        FRAMES,
        "inspect.getouterframes",
    ),
    (
        "import inspect\ndef f(x):\n    return inspect.getargvalues(x)  # <-",
        LOCALS,
        "inspect.getargvalues",
    ),
    (
        "import traceback\nfor f, n in traceback.walk_stack(None):  # <-\n    pass",
        FRAMES,
        "traceback.walk_stack",
    ),
    ("import sys\nsys.settrace(print)  # <-", TRACE, "sys.settrace"),
    ("import threading\nthreading.setprofile(print)  # <-", TRACE, "threading.setprofile"),
    ("import gc\nfor o in gc.get_objects():  # <-\n    pass", GC, "gc.get_objects"),
    ("import gc\ngc.get_referrers(print)  # <-", GC, "gc.get_referrers"),
    ("import gc\ngc.get_referents(print)  # <-", GC, "gc.get_referents"),
    ("import ctypes  # <-", NATIVE, "ctypes"),
    ("import ctypes.util  # <-", NATIVE, "ctypes"),
    ("from ctypes import CDLL  # <-", NATIVE, "ctypes"),
    ("import _ctypes as c  # <-", NATIVE, "_ctypes"),
    ("from cffi import FFI  # <-", NATIVE, "cffi"),
    ("libc = __import__('ctypes')  # <-", NATIVE, "ctypes"),
    ("import importlib\nimportlib.import_module('ctypes.util')  # <-", NATIVE, "ctypes"),
    ("import os\nos._exit(0)  # <-", EXIT, "os._exit"),
    ("import posix\nposix._exit(0)  # <-", EXIT, "posix._exit"),
    ("from os import _exit\n_exit(0)  # <-", EXIT, "os._exit"),
    ("import os\nos.write(1, b'x')  # <-", WRITE, "os.write"),
    (
        "import os\ndef say(provider, line):\n"
        "    os.write(provider._channel._write_fd, line)  # <-",
        WRITE,
        "os.write",
    ),
    ("import os\nfor fd in range(3, 9):\n    os.writev(fd, [b'x'])  # <-", WRITE, "os.writev"),
    ("import os\nos.pwrite(4, b'x', 0)  # <-", WRITE, "os.pwrite"),
    ("import os\npipe = os.fdopen(4, 'w')  # <-", WRITE, "os.fdopen"),
    ("from os import write as w\nw(4, b'x')  # <-", WRITE, "os.write"),
    ("import sys\nsys.modules['lab'] = None  # <-", MODULES, "sys.modules"),
    ("import sys\ndel sys.modules['lab']  # <-", MODULES, "sys.modules"),
    ("import sys\nsys.modules.pop('lab')  # <-", MODULES, "sys.modules.pop"),
    ("import sys\nsys.modules.update({})  # <-", MODULES, "sys.modules.update"),
    ("import sys\nsys.modules.setdefault('x', sys)  # <-", MODULES, "sys.modules.setdefault"),
    ("import sys\nsys.modules.clear()  # <-", MODULES, "sys.modules.clear"),
    ("import sys\nsys.modules.__setitem__('x', sys)  # <-", MODULES, "sys.modules.__setitem__"),
    ("import sys\nsys.modules = {}  # <-", MODULES, "sys.modules"),
    ("import sys\nsys.modules |= {}  # <-", MODULES, "sys.modules"),
    ("import sys\nsetattr(sys, 'modules', {})  # <-", MODULES, "sys.modules"),
    ("import sys\nmain = sys.modules['__main__']  # <-", HARNESS, "__main__"),
    ("import sys\nmain = sys.modules.get('__main__')  # <-", HARNESS, "__main__"),
    ("import __main__  # <-", HARNESS, "__main__"),
    ("from __main__ import outcome  # <-", HARNESS, "__main__"),
    ("import grader.sandbox  # <-", GRADER, "grader"),
    # aliases
    ("import sys as s\ns._getframe()  # <-", FRAMES, "sys._getframe"),
    ("from sys import _getframe as g\nframe = g()  # <-", FRAMES, "sys._getframe"),
    ("from inspect import currentframe\ncurrentframe()  # <-", FRAMES, "inspect.currentframe"),
    ("from inspect import *\nstack()  # <-", FRAMES, "inspect.stack"),
    ("import sys\ngetattr(sys, '_getframe')()  # <-", FRAMES, "sys._getframe"),
    ("def up(frame):\n    return getattr(frame, 'f_back')  # <-", FRAMES, ".f_back"),
    ("def up(x):\n    return getattr(x, '_getframe')  # <-", FRAMES, "sys._getframe"),
    ("def up(x):\n    return getattr(x, 'get_referrers')  # <-", GC, "gc.get_referrers"),
    ("def up(frame):\n    return frame.__getattribute__('f_locals')  # <-", LOCALS, ".f_locals"),
    (
        "def up(frame):\n    return object.__getattribute__(frame, 'f_back')  # <-",
        FRAMES,
        ".f_back",
    ),
    ("import operator\nup = operator.attrgetter('f_back')  # <-", FRAMES, ".f_back"),
    (
        "from operator import attrgetter\nup = attrgetter('f_code.co_name.f_locals')  # <-",
        LOCALS,
        ".f_locals",
    ),
    ("import sys\nvars(sys)['modules']['lab'] = None  # <-", MODULES, "sys.modules"),
    ("import sys\nsys.__dict__['_getframe']()  # <-", FRAMES, "sys._getframe"),
    ("import sys\nm = sys.modules\nm['lab'] = None  # <-", MODULES, "sys.modules"),
    ("from sys import modules\nmodules.pop('lab')  # <-", MODULES, "sys.modules.pop"),
    ("getattr(__import__('os'), '_exit')(0)  # <-", EXIT, "os._exit"),
    ("import sys\nsys.modules['os']._exit(0)  # <-", EXIT, "os._exit"),
    ("ga = getattr\nimport sys\nga(sys, '_getframe')  # <-", FRAMES, "sys._getframe"),
    # a generator's, a coroutine's, an async generator's frame
    ("def f(gen):\n    return gen.gi_frame.f_lineno  # <-", FRAMES, ".gi_frame"),
    ("async def f(coro):\n    return coro.cr_frame  # <-", FRAMES, ".cr_frame"),
    ("def f(agen):\n    return agen.ag_frame  # <-", FRAMES, ".ag_frame"),
    ("def f(gen):\n    return getattr(gen, 'gi_frame')  # <-", FRAMES, ".gi_frame"),
    ("import operator\nframe_of = operator.attrgetter('cr_frame')  # <-", FRAMES, ".cr_frame"),
    # every attribute at once, whatever it is asked of
    ("import inspect\ninspect.getmembers(object())  # <-", MEMBERS, "inspect.getmembers"),
    (
        "import inspect\ndef f(x):\n    return inspect.getmembers_static(x)  # <-",
        MEMBERS,
        "inspect.getmembers_static",
    ),
    (
        "from inspect import getmembers as members\nmembers(print)  # <-",
        MEMBERS,
        "inspect.getmembers",
    ),
    ("import inspect as i\nlist(map(i.getmembers, [print]))  # <-", MEMBERS, "inspect.getmembers"),
    (
        "def f(x):\n    return getattr(x, 'getmembers_static')  # <-",
        MEMBERS,
        "inspect.getmembers_static",
    ),
    # a function's variables: its module's globals, its closure's cells
    ("def f(fn):\n    return fn.__globals__['verdict']  # <-", CLOSURE, ".__globals__"),
    ("def f(fn):\n    return fn.__closure__  # <-", CLOSURE, ".__closure__"),
    ("def f(cell):\n    return cell.cell_contents  # <-", CLOSURE, ".cell_contents"),
    ("def f(fn):\n    return getattr(fn, '__globals__')  # <-", CLOSURE, ".__globals__"),
    ("def f(fn):\n    return getattr(fn, '__closure__', None)  # <-", CLOSURE, ".__closure__"),
    ("def f(cell):\n    return getattr(cell, 'cell_contents')  # <-", CLOSURE, ".cell_contents"),
    ("def f(fn):\n    return vars(fn)['__closure__']  # <-", CLOSURE, ".__closure__"),
    # a name built at run time, which the scan cannot read
    ("def f(x, name):\n    return getattr(x, name)  # <-", NAMED, "builtins.getattr"),
    ("def f(x):\n    return getattr(x, 'f_' + 'back')  # <-", NAMED, "builtins.getattr"),
    ("def f(x, name):\n    return getattr(x, f'{name}', None)  # <-", NAMED, "builtins.getattr"),
    ("def f(x, args):\n    return getattr(x, *args)  # <-", NAMED, "builtins.getattr"),
    ("def f(x, name):\n    setattr(x, name, None)  # <-", NAMED, "builtins.setattr"),
    ("def f(x, name):\n    delattr(x, name)  # <-", NAMED, "builtins.delattr"),
    (
        "import inspect\ndef f(x, name):\n    return inspect.getattr_static(x, name)  # <-",
        NAMED,
        "inspect.getattr_static",
    ),
    ("def f(x, name):\n    return x.__getattribute__(name)  # <-", NAMED, ".__getattribute__"),
    (
        "def f(x, name):\n    return object.__getattribute__(x, name)  # <-",
        NAMED,
        ".__getattribute__",
    ),
    (
        "import operator\ndef f(name):\n    return operator.attrgetter('a', name)  # <-",
        NAMED,
        "operator.attrgetter",
    ),
    (
        "from functools import partial\nup = partial(getattr, object())  # <-",
        NAMED,
        "builtins.getattr",
    ),
    (
        "def f(xs, names):\n    return list(map(getattr, xs, names))  # <-",
        NAMED,
        "builtins.getattr",
    ),
    ("def f(x, name, look=getattr):  # <-\n    return look(x, name)", NAMED, "builtins.getattr"),
    ("import sys\ndef f(name):\n    return vars(sys)[name]  # <-", NAMED, "builtins.vars"),
    ("import gc\ndef f(name):\n    return gc.__dict__[name]  # <-", NAMED, ".__dict__"),
    ("def f(name):\n    return __builtins__[name]  # <-", NAMED, "builtins"),
    ("def f(name):\n    return __import__(name)  # <-", LOADED, "builtins.__import__"),
    (
        "import importlib\ndef f(name):\n    return importlib.import_module(name)  # <-",
        LOADED,
        "importlib.import_module",
    ),
    (
        "from importlib import import_module as load\nm = load('o' + 's')  # <-",
        LOADED,
        "importlib.import_module",
    ),
    (
        "import importlib\ndef f(name):\n    return importlib.__import__(name)  # <-",
        LOADED,
        "importlib.__import__",
    ),
    ("import sys\ndef f(name):\n    return sys.modules[name]  # <-", LOADED, "sys.modules"),
    ("import sys\ndef f(name):\n    return sys.modules.get(name)  # <-", LOADED, "sys.modules.get"),
    # a module's own __getattr__ is let hand on its name only to a module the scan does not
    # watch, a name it does not rebuild, and a name it imported
    (
        "import sys\ndef __getattr__(name):\n    return getattr(sys, name)  # <-",
        NAMED,
        "builtins.getattr",
    ),
    (
        "import json\ndef __getattr__(name):\n    name = '_' + name\n    return getattr(json, name)"
        "  # <-",
        NAMED,
        "builtins.getattr",
    ),
    (
        "import json\njson = json.decoder\ndef __getattr__(name):\n    return getattr(json, name)"
        "  # <-",
        NAMED,
        "builtins.getattr",
    ),
    ("def __getattr__(name):\n    return getattr(object(), name)  # <-", NAMED, "builtins.getattr"),
    (
        "import json\ndef __getattr__(name):\n    get = lambda name: getattr(json, name)  # <-\n"
        "    return get('_' + name)",
        NAMED,
        "builtins.getattr",
    ),
    (
        "import json\nclass Proxy:\n    def __getattr__(self, name):\n"
        "        return getattr(json, name)  # <-",
        NAMED,
        "builtins.getattr",
    ),
    # code the scan cannot read, through any name
    ("exec('x = 1')  # <-", RUN, "builtins.exec"),
    ("x = eval('1 + 1')  # <-", RUN, "builtins.eval"),
    ("code = compile('x = 1', 'x', 'exec')  # <-", BUILD, "builtins.compile"),
    ("import builtins\nbuiltins.exec('x = 1')  # <-", RUN, "builtins.exec"),
    ("import builtins as b\nb.eval('1')  # <-", RUN, "builtins.eval"),
    ("from builtins import compile as c\nc('1', 'x', 'eval')  # <-", BUILD, "builtins.compile"),
    ("import builtins\ngetattr(builtins, 'exec')('x = 1')  # <-", RUN, "builtins.exec"),
    ("getattr(__builtins__, 'eval')('1')  # <-", RUN, "builtins.eval"),
    ("__builtins__['exec']('x = 1')  # <-", RUN, "builtins.exec"),
    ("__builtins__.get('exec')('x = 1')  # <-", RUN, "builtins.exec"),
    (
        "import builtins\nvars(builtins)['compile']('1', 'x', 'eval')  # <-",
        BUILD,
        "builtins.compile",
    ),
    ("def run(source, runner=exec):  # <-\n    runner(source)", RUN, "builtins.exec"),
]


@pytest.mark.parametrize(
    ("source", "phrase", "name"),
    FLAGGED_FORMS,
    ids=[f"{n}-{i}" for i, (_, _, n) in enumerate(FLAGGED_FORMS)],
)
def test_each_reach_is_flagged_at_its_line_in_the_graders_words(
    tmp_path: Path, source: str, phrase: str, name: str
) -> None:
    line = next(n for n, text in enumerate(source.splitlines(), 1) if text.endswith("# <-"))
    assert scan(tmp_path, source) == flags((line, phrase, name))


# The red team's forgery: a generator's own frame, then every frame's attributes by name
# through inspect.getmembers, up to the harness's verdict function (its seal inside).
GENERATOR_FORGER = '''\
"""Reaches the caller's frames with no frame attribute spelled: getmembers hands them over."""

import inspect


def _climb():
    yield dict(inspect.getmembers(_walker.gi_frame))["f_back"]


_walker = _climb()


def forge(message):
    frame = next(_walker)  # the frame that called next(): this one
    while frame is not None:
        members = dict(inspect.getmembers(frame))
        verdict = members["f_locals"].get("verdict")
        if callable(verdict):
            verdict(message)
            return True
        frame = members["f_back"]
    return False
'''


def test_the_generator_frame_and_getmembers_forgery_is_flagged(tmp_path: Path) -> None:
    path = tmp_path / "lab" / "agent.py"
    found = scan(tmp_path, GENERATOR_FORGER)
    climb, walk = (
        n
        for n, text in enumerate(GENERATOR_FORGER.splitlines(), 1)
        if "inspect.getmembers(" in text
    )
    assert found == flags(
        (climb, FRAMES, ".gi_frame"),
        (climb, MEMBERS, "inspect.getmembers"),
        (walk, MEMBERS, "inspect.getmembers"),
    )
    # And it is a forgery: run, it finds a caller's sealed sender and sends through it.
    spec = importlib.util.spec_from_file_location("generator_forger", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sent: list[dict[str, object]] = []

    def harness() -> bool:
        def verdict(message: dict[str, object]) -> None:  # what only the harness holds
            sent.append(message)

        forged: bool = module.forge({"op": "result", "score": 100})
        return forged and callable(verdict)

    assert harness()
    assert sent == [{"op": "result", "score": 100}]


def test_code_the_scan_cannot_read_is_flagged_through_every_name(tmp_path: Path) -> None:
    source = """\
        import builtins
        from builtins import exec as run_it
        b = eval  # <- builtins.eval
        b("1")  # <- builtins.eval
        run = builtins.exec  # <- builtins.exec
        run("x = 1")  # <- builtins.exec
        run_it("x = 1")  # <- builtins.exec
        make = getattr(builtins, "compile")  # <- builtins.compile
        make("1", "x", "eval")  # <- builtins.compile
        """
    marked = [
        (n, text.rpartition("# <- ")[2])
        for n, text in enumerate(textwrap.dedent(source).splitlines(), 1)
        if "# <- " in text
    ]
    assert len(marked) == 7
    assert scan(tmp_path, source) == flags(
        *((line, BUILD if name.endswith("compile") else RUN, name) for line, name in marked)
    )


def test_a_name_built_at_run_time_stays_out_of_the_finding(tmp_path: Path) -> None:
    source = (
        "import importlib\ndef f(PRIVATE_NAME):\n"
        "    return importlib.import_module(PRIVATE_NAME + 'x'), getattr(f, PRIVATE_NAME)\n"
    )
    assert scan(tmp_path, source) == flags(
        (3, NAMED, "builtins.getattr"), (3, LOADED, "importlib.import_module")
    )


HONEST_FORMS = {
    "a descriptor it opened": """\
        import os
        fd = os.open("trace.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        os.write(fd, b"x")
        """,
    "a pipe it made": """\
        import os
        read, write = os.pipe()
        os.write(write, b"x")
        fds = os.pipe()
        os.write(fds[1], b"x")
        """,
    "a descriptor kept on self": """\
        import os
        class Log:
            def __init__(self, path):
                self._fd: int | None = os.open(path, os.O_WRONLY)
            def write(self, data):
                os.write(self._fd, data)
        """,
    "a file's own descriptor": """\
        import os, tempfile
        with open("x", "wb") as handle:
            os.write(handle.fileno(), b"x")
            os.fsync(handle.fileno())
        fd, tmp = tempfile.mkstemp()
        with os.fdopen(fd, "wb") as out:
            out.write(b"x")
        os.write(os.open("y", os.O_WRONLY), b"x")
        """,
    "sys.modules read": """\
        import sys
        lab = sys.modules.get("lab")
        loaded = "lab" in sys.modules and sys.modules["lab"]
        names = sorted(sys.modules)
        snapshot = dict(sys.modules)
        """,
    "the names in strings and comments": '''\
        """Never touches sys.modules, sys._getframe, os._exit or frame.f_back."""
        # sys._getframe().f_back.f_locals
        NOTE = "gc.get_referrers and import ctypes are forbidden"
        ''',
    "a variable named like a frame attribute": """\
        f_back = 3
        def walk(f_locals, tb_frame=None):
            f_globals = f_locals
            return f_back, f_globals, tb_frame
        """,
    "logging and tracebacks": """\
        import logging
        import sys
        import traceback
        log = logging.getLogger(__name__)
        try:
            1 / 0
        except ZeroDivisionError:
            log.exception("failed")
            text = traceback.format_exc()
            traceback.print_exc()
            summary = traceback.extract_stack()
            kind = sys.exc_info()[0]
        """,
    "a script's guard and an exit": """\
        import sys
        if __name__ == "__main__":
            sys.exit(0)
        """,
    "generic names asked of unknown objects": """\
        def f(obj, gen, coro, bucket):
            getattr(obj, "stack")
            getattr(obj, "write")(b"x")
            getattr(obj, "modules")
            bucket.get_objects()
            return gen.gi_running, coro.cr_running, gen.gi_code.co_name
        """,
    "os and inspect for ordinary things": """\
        import inspect
        import os.path
        def f(agent):
            return inspect.signature(agent), os.path.join("a", "b"), os.getpid()
        """,
    "attributes and modules named by constants, generators, compile of something else": """\
        import ast
        import importlib
        import operator
        import re
        import sys
        from re import compile as pattern_of
        WORD = re.compile(r"[a-z]+")
        DIGITS = pattern_of(r"[0-9]+")
        json = importlib.import_module("json")
        this = sys.modules[__name__]
        def words(text, obj):
            yield from WORD.findall(text)
            yield getattr(obj, "name", None), hasattr(obj, "name")
            setattr(obj, "seen", True)
            delattr(obj, "seen")
            yield operator.attrgetter("name", "id.value")(obj)
            yield __import__("math").pi, ast.literal_eval("[1]")
        class Query:
            def compile(self, text):
                return text
            def eval(self):
                return self.compile("x"), vars(self)["x"], self.__dict__.get("y")
        def every(obj, keys):
            return [vars(obj)[key] for key in keys], [obj.__dict__[key] for key in keys]
        async def ticks():
            yield 1
        gen = words("a b", Query())
        first = next(gen), gen.gi_running, ticks().ag_running
        Query().compile("x"), Query().eval(), WORD.pattern
        """,
    "a module's own __getattr__ that hands on its name, as the lab's does": """\
        import json
        from json import decoder
        __all__ = ["dumps", "JSONDecoder"]
        if True:
            def __getattr__(name: str) -> object:
                if name in __all__:
                    return getattr(json, name, None) or getattr(decoder, name)
                raise AttributeError(name)
        """,
}


@pytest.mark.parametrize("source", list(HONEST_FORMS.values()), ids=list(HONEST_FORMS))
def test_honest_code_has_no_flag(tmp_path: Path, source: str) -> None:
    assert scan(tmp_path, source) == []


def test_a_finding_names_only_the_path_and_line_never_the_code(tmp_path: Path) -> None:
    source = "import sys as PRIVATE_ALIAS\nPRIVATE_ALIAS._getframe()\n"
    (found,) = scan(tmp_path, source, name="lab/my agent\x1b[2J.py")
    assert found == f"{FLAGGED}lab/my agent\\x1b[2J.py:2: {FRAMES} (sys._getframe)"
    assert "PRIVATE_ALIAS" not in found


def test_every_file_is_scanned_and_the_findings_come_sorted_each_once(tmp_path: Path) -> None:
    (tmp_path / "lab" / "deep" / "er").mkdir(parents=True)
    (tmp_path / "lab" / "deep" / "er" / "x.py").write_text("import ctypes\n", "utf-8")
    (tmp_path / "top.py").write_text("import os\n\n\nos._exit(1); os._exit(2)\n", "utf-8")
    (tmp_path / "lab" / "b.py").write_text("import sys\nsys._getframe().f_back\n", "utf-8")
    (tmp_path / "lab" / "a.py").write_text("import gc\n\n\n\n\n\n\n\n\ngc.get_objects()\n", "utf-8")
    assert tamper_findings(tmp_path) == [
        *flags((10, GC, "gc.get_objects"), path="lab/a.py"),
        *flags((2, FRAMES, ".f_back"), (2, FRAMES, "sys._getframe"), path="lab/b.py"),
        *flags((1, NATIVE, "ctypes"), path="lab/deep/er/x.py"),
        *flags((4, EXIT, "os._exit"), path="top.py"),
    ]


def test_findings_past_twenty_are_counted(tmp_path: Path) -> None:
    found = scan(tmp_path, "import os\n" + "os._exit(0)\n" * 25)
    assert found[:20] == flags(*((line, EXIT, "os._exit") for line in range(2, 22)))
    assert found[20:] == [
        f"{FLAGGED}and 5 more place(s) in the source that reach for the harness or the process"
    ]


def test_ignored_names_and_the_kits_packages_are_not_scanned(tmp_path: Path) -> None:
    for folder in (
        ".venv",
        ".venv-model",
        "build",
        "__pycache__",
        "grades",
        ".git",
        "x.egg-info",
        "node_modules",
        "grader",
        "grader/sandbox",
        "gradekit",
    ):
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
        (tmp_path / folder / "evil.py").write_text("import ctypes\n", "utf-8")
    assert tamper_findings(tmp_path) == []
    for nested in ("lab/grader", "lab/gradekit"):  # only the top-level ones are the kit's
        (tmp_path / nested).mkdir(parents=True)
        (tmp_path / nested / "evil.py").write_text("import ctypes\n", "utf-8")
    assert tamper_findings(tmp_path) == [
        *flags((1, NATIVE, "ctypes"), path="lab/gradekit/evil.py"),
        *flags((1, NATIVE, "ctypes"), path="lab/grader/evil.py"),
    ]


def test_a_manifest_entry_in_the_graders_copy_or_the_harness_is_flagged(tmp_path: Path) -> None:
    honest = Manifest(root=tmp_path, agent="lab.agent:run", guard="lab.guard:ok")
    assert tamper_findings(tmp_path, honest) == []
    for entry, phrase, name in (
        ("grader.evil:run", GRADER, "grader"),
        ("__main__:outcome", HARNESS, "__main__"),
    ):
        manifest = Manifest(root=tmp_path, agent="lab.agent:run", incident_test=entry)
        assert tamper_findings(tmp_path, manifest) == [
            f"{FLAGGED}pyproject.toml: {phrase} ({name})"
        ]


def test_a_file_that_does_not_parse_is_skipped_and_a_declared_encoding_is_read(
    tmp_path: Path,
) -> None:
    lab = tmp_path / "lab"
    lab.mkdir()
    (lab / "broken.py").write_text("import ctypes\ndef (:\n", "utf-8")
    (lab / "latin.py").write_bytes(b"import ctypes\nx = '\xe9'\n")  # no declaration: not UTF-8
    (lab / "nul.py").write_bytes(b"import ctypes\n\0\n")
    assert tamper_findings(tmp_path) == []
    (lab / "declared.py").write_bytes(b"# -*- coding: latin-1 -*-\nx = '\xe9'\nimport ctypes\n")
    assert tamper_findings(tmp_path) == flags((3, NATIVE, "ctypes"), path="lab/declared.py")


def test_what_the_scan_cannot_read_is_flagged(tmp_path: Path) -> None:
    lab = tmp_path / "lab"
    lab.mkdir()
    (lab / "real.py").write_text("x = 1\n", "utf-8")
    (lab / "linked.py").symlink_to("real.py")
    (lab / "huge.py").write_text("#" * FILE_CAP + "\n", "utf-8")
    (lab / "native.cpython-311-x86_64-linux-gnu.so").write_bytes(b"\x7fELF")
    (lab / "chain.py").write_text("x = a" + ".b" * 900 + "\n", "utf-8")
    (lab / "deeper.py").write_text("x = a" + ".b" * 20000 + "\n", "utf-8")
    not_scanned = (
        "not scanned: a link, not a regular file, or over the scan's caps "
        "(1 MiB a file, 8 MiB in all)"
    )
    assert tamper_findings(tmp_path) == [
        f"{FLAGGED}lab/chain.py: nested too deeply to scan",
        f"{FLAGGED}lab/deeper.py: nested too deeply to scan",
        f"{FLAGGED}lab/huge.py: {not_scanned}",
        f"{FLAGGED}lab/linked.py: {not_scanned}",
        f"{FLAGGED}lab/native.cpython-311-x86_64-linux-gnu.so: a compiled extension module, "
        "which the scan cannot read",
    ]


def test_a_linked_folder_is_not_walked_and_one_named_like_a_module_is_flagged(
    tmp_path: Path,
) -> None:
    """The walk lists each folder once and tells folders by what they are, not by where a
    link points: a link to a folder outside is never entered."""
    outside = tmp_path / "outside"
    (outside / "deep").mkdir(parents=True)
    (outside / "deep" / "evil.py").write_text("import ctypes\n", "utf-8")
    submission = tmp_path / "submission"
    (submission / "lab" / "inner").mkdir(parents=True)
    (submission / "lab" / "inner" / "ok.py").write_text("import ctypes\n", "utf-8")
    (submission / "lab" / "elsewhere").symlink_to(outside)
    (submission / "lab" / "looks.py").symlink_to(outside / "deep")
    assert tamper_findings(submission) == [
        *flags((1, NATIVE, "ctypes"), path="lab/inner/ok.py"),
        f"{FLAGGED}lab/looks.py: not scanned: a link, not a regular file, or over the scan's "
        "caps (1 MiB a file, 8 MiB in all)",
    ]


def test_more_names_than_the_scan_reads_is_flagged(tmp_path: Path) -> None:
    folder = tmp_path / "many"
    folder.mkdir()
    for n in range(5001):
        (folder / f"{n}.txt").touch()
    assert tamper_findings(tmp_path) == [
        f"{FLAGGED}the submission holds more than the scan reads (5000 names, 1000 Python "
        "files, 16 folders deep): the rest was not scanned"
    ]


SEEDED = """\
import json, sys
from pathlib import Path
from grader.submission import tamper_findings
print(json.dumps(tamper_findings(Path(sys.argv[1]))))
"""


def test_the_findings_do_not_depend_on_the_hash_seed_or_the_file_order(tmp_path: Path) -> None:
    sources = [source for source, _, _ in FLAGGED_FORMS]
    random.Random(7).shuffle(sources)
    for n, source in enumerate(sources):
        (tmp_path / f"m{n % 7}").mkdir(exist_ok=True)
        (tmp_path / f"m{n % 7}" / f"f{n}.py").write_text(source + "\n", "utf-8")
    expected = tamper_findings(tmp_path)
    places = [finding.removeprefix(FLAGGED).split(":")[:2] for finding in expected[:20]]
    assert len(expected) == 21 and places == sorted(places, key=lambda p: (p[0], int(p[1])))
    runs = set()
    for seed in ("1", "4242"):
        done = subprocess.run(
            [sys.executable, "-c", SEEDED, str(tmp_path)],
            check=True,
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
            cwd=Path(__file__).resolve().parents[3],
        )
        runs.add(tuple(json.loads(done.stdout)))
    assert runs == {tuple(expected)}


# -- the honest corpus: no flag anywhere --------------------------------------------------


def phrases(found: list[str]) -> set[str]:
    """The phrases of ``found``, without their places and names."""
    return {
        re.sub(r"^[^:]*(:\d+)?: ", "", f.removeprefix(FLAGGED)).rpartition(" (")[0] for f in found
    }


@pytest.mark.parametrize(
    "folder",
    [
        "lab",
        "examples/openai-sdk",
        "tests/corpus",
        *sorted(
            str(p.relative_to(REFERENCE))
            for p in (REFERENCE / "tests" / "corpus").iterdir()
            if p.is_dir() and p.name != "__pycache__"
        ),
    ],
)
def test_the_kits_own_agents_have_no_flag(folder: str) -> None:
    assert tamper_findings(REFERENCE / folder) == []


def test_the_kits_library_reaches_nothing_and_its_copy_is_never_scanned(tmp_path: Path) -> None:
    """gradekit/ loads the HTTP library and its transports by names it is given at run time,
    which the scan flags where it reads them, and reaches for nothing else; a child imports
    the grader's own gradekit, so the copy a submission ships at its top is never read."""
    assert phrases(tamper_findings(REFERENCE / "gradekit")) <= {NAMED, LOADED}
    shutil.copytree(
        REFERENCE / "gradekit", tmp_path / "gradekit", ignore=shutil.ignore_patterns("__pycache__")
    )
    scan(tmp_path, "import gradekit\n")
    assert tamper_findings(tmp_path) == []


def test_the_starter_students_get_has_no_flag(tmp_path: Path) -> None:
    starter = tmp_path / "starter"
    build_starter(REFERENCE, starter)
    assert tamper_findings(starter, load_manifest(starter)) == []
    # Without its manifest every file is read: the handout's own tests load the manifest's
    # entries by the names written there, and are flagged for it, they alone.
    assert {f.removeprefix(FLAGGED).partition(":")[0] for f in tamper_findings(starter)} <= {
        "tests/test_lab.py"
    }


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_of_the_bad_submissions_only_the_forgers_are_flagged(tmp_path: Path, name: str) -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        context = Context(
            listener,
            tmp_path / "out",
            "sk-gradekit-" + secrets.token_hex(8),
            tmp_path / "spawned" / "marker",
        )
        root = make_submission(tmp_path / name)
        VARIANTS[name].mutate(root, context)
    found = tamper_findings(root)
    assert bool(found) is (name in FORGERS), found
    said = [
        match[1]
        for f in found
        if (match := re.fullmatch(rf"{re.escape(FLAGGED)}lab/agent\.py:\d+: (.*)", f))
    ]
    assert len(said) == len(found)
    if name == "forges_outcome_via_main":
        assert said == [f"{HARNESS} (__main__)"]
    if name == "forges_result_on_channel":
        assert said == [f"{WRITE} (os.write)", f"{EXIT} (os._exit)"]


def test_only_what_the_manifests_packages_import_is_scanned(tmp_path: Path) -> None:
    for relative, source in (
        ("lab/__init__.py", ""),
        ("lab/agent.py", "import helpers.deep\nfrom lab import tools\n"),
        ("lab/tools.py", "import gc\ngc.get_objects()\n"),
        ("helpers/__init__.py", ""),
        ("helpers/deep.py", "import os\nos._exit(0)\n"),
        ("tests/test_agent.py", "import ctypes\n"),  # never imported by the agent
        ("bench.py", "import ctypes\n"),
    ):
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(source, "utf-8")
    manifest = Manifest(root=tmp_path, agent="lab.agent:run")

    assert tamper_findings(tmp_path, manifest) == [
        *flags((2, EXIT, "os._exit"), path="helpers/deep.py"),
        *flags((2, GC, "gc.get_objects"), path="lab/tools.py"),
    ]
    everything = tamper_findings(tmp_path)  # no manifest: every file
    assert [f.removeprefix(FLAGGED).split(":")[0] for f in everything] == [
        "bench.py",
        "helpers/deep.py",
        "lab/tools.py",
        "tests/test_agent.py",
    ]
