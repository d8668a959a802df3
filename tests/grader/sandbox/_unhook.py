"""Source the hostile agents here share: the one trick each starts with, switching the
sandbox's audit hook off from inside (``gc`` reaches the hook's closure, and the set of
threads it waves through takes the agent's own), so that what holds is the wall, not the
hook; and how each says what a call it tried gave."""

SWITCH_THE_HOOK_OFF = """
import gc as _gc, _thread as _threads


def switch_the_hook_off():
    for obj in _gc.get_objects():
        if getattr(obj, "__name__", "") == "guard" and getattr(obj, "__closure__", None):
            for cell in obj.__closure__:
                if isinstance(cell.cell_contents, set):
                    cell.cell_contents.add(_threads.get_ident())
                    return True
    return False
"""

TRIED = '''
import errno as _errno


def tried(call):
    """What ``call`` gave ("ok" for None), or the error it raised, as "Class:ERRNO"."""
    try:
        result = call()
    except OSError as exc:
        return f"{type(exc).__name__}:{_errno.errorcode.get(exc.errno, exc.errno)}"
    return "ok" if result is None else result


def libc_call(name, *args):
    """A C library call straight to the kernel, past Python: "ok" or its errno's name."""
    import ctypes  # with the hook off: it refuses loading the C library

    libc = ctypes.CDLL(None, use_errno=True)
    ctypes.set_errno(0)
    if getattr(libc, name)(*args) == -1:
        return _errno.errorcode.get(ctypes.get_errno(), "?")
    return "ok"
'''
