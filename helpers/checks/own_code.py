"""Is a learner's answer the course's own code? A check runs the learner's answer next to the course's
reference; the reference itself, imported from helpers or from one of the course's environment modules,
agrees with it on every input and teaches nothing, so the check asks for the learner's own code instead.

"Your own code" means: the computation is written in the learner's code. It may call the course's helpers
(canonical_number, a parser, verifiers' and torch's functions), but not the exercise's reference (nor the
checks' own code, nor a library's finished version of it, such as TRL's loss), not a copy of the reference's
compiled code, and it may not look up the stack of the code that calls it (where a check keeps what it
expects). What the learner's code reaches is read from its bytecode: the globals, closure values and imports it
names, and their attributes it names; a function of the learner's that it names is read in turn.

This module imports in both environments (the course's, and notebook 04's .venv-v1)."""

from __future__ import annotations

import dis
import functools
import inspect
import sys
import sysconfig
import types
from pathlib import Path

ENVIRONMENTS = Path(__file__).resolve().parents[2] / "environments"
CHECKS_PACKAGE = __name__.rsplit(".", 1)[0]  # "helpers.checks": the checks' own code, references included
# Attribute names that only code walking the interpreter's stack uses (a frame's caller, its variables)
FRAME_ATTRIBUTES = frozenset({"f_back", "f_locals", "f_globals", "tb_frame", "gi_frame", "cr_frame", "ag_frame"})
READS = {"LOAD_GLOBAL": "global", "LOAD_NAME": "global", "LOAD_ATTR": "attribute", "LOAD_METHOD": "attribute",
         "IMPORT_FROM": "attribute", "IMPORT_NAME": "module", "STORE_ATTR": "attribute"}


@functools.cache
def course_modules() -> frozenset[str]:
    """The top-level names of the course's own modules: helpers, and each module of environments/."""
    return frozenset({"helpers", *(path.stem for path in ENVIRONMENTS.glob("*/*.py"))})


@functools.cache
def _library_folders() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    return tuple({str(Path(paths[key]).resolve()) for key in ("stdlib", "platstdlib", "purelib", "platlib")})


def _module_of(target) -> str | None:
    """Where `target` was written: a function's own globals (functools.wraps copies __module__, not __globals__),
    else its __module__."""
    globals_ = getattr(target, "__globals__", None)
    module = globals_.get("__name__") if isinstance(globals_, dict) else getattr(target, "__module__", None)
    return module if isinstance(module, str) else None


def _is_course(target) -> bool:
    module = _module_of(target)
    return bool(module) and module.split(".")[0] in course_modules()


def _is_library(target) -> bool:
    """A function whose code lives in the standard library or an installed package (a decorator's wrapper)."""
    code = getattr(target, "__code__", None)
    if code is None:
        return False
    return str(Path(code.co_filename).resolve()).startswith(_library_folders())


def _unwrapped(value):
    """The function or class behind a partial, a bound method, or a library's decorator (weave.op, ...). A
    wrapper the learner wrote (functools.wraps copies the wrapped function's __module__ and __wrapped__ onto it)
    is the learner's code: it is not followed."""
    for _ in range(20):  # a chain of wrappers is short; a loop of them must not hang the check
        if isinstance(value, functools.partial):
            value = value.func
        elif inspect.ismethod(value) or isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        elif (getattr(value, "__wrapped__", None) is not None and not _is_course(value)
              and (_is_library(value) or not isinstance(value, types.FunctionType))):
            value = value.__wrapped__
        else:
            break
    return value


def _name(target) -> str:
    return f"{_module_of(target)}.{getattr(target, '__qualname__', getattr(target, '__name__', type(target).__name__))}"


def course_code(value) -> str | None:
    """'module.name' when `value` is defined in one of the course's own modules, else None."""
    target = _unwrapped(value)
    return _name(target) if _is_course(target) else None


def _learner_function(target) -> bool:
    return isinstance(target, types.FunctionType) and not _is_course(target) and not _is_library(target)


def _reads(code: types.CodeType) -> dict[str, set[str]]:
    """{'global' | 'attribute' | 'module' | 'closure': names} that `code` and the code nested in it read."""
    reads: dict[str, set[str]] = {"global": set(), "attribute": set(), "module": set(), "closure": set()}
    codes = [code]
    while codes:
        current = codes.pop()
        codes += [c for c in current.co_consts if isinstance(c, types.CodeType)]
        for instruction in dis.get_instructions(current):
            kind = READS.get(instruction.opname)
            if instruction.opname in ("LOAD_DEREF", "LOAD_CLOSURE", "LOAD_CLASSDEREF"):
                kind = "closure"
            if kind and isinstance(instruction.argval, str):
                reads[kind].add(instruction.argval)
    return reads


def _attributes(obj, names: set[str], depth: int = 5) -> list:
    """The attributes among `names` of a module or class, and theirs in turn (trl.GRPOTrainer._compute_loss)."""
    found, level = [], [obj]
    for _ in range(depth):
        following = []
        for holder in level:
            if not isinstance(holder, (types.ModuleType, type)):
                continue
            for name in names:
                try:  # a module may load its attributes lazily (trl's do): getattr, not getattr_static
                    attribute = getattr(holder, name)
                except Exception:  # noqa: BLE001, S112 - no such attribute, or one that fails to load: nothing reached
                    continue
                found.append(attribute)
                following.append(attribute)
        level = following
    return found


def _reached(value, handed: set | None = None) -> tuple[list, list]:
    """(the learner's functions behind `value`, everything their code names): read from their bytecode. The ids of
    what came from closure cells and default values (which may hold what a check handed the code, such as a
    rubric's functions) are added to `handed`."""
    handed = set() if handed is None else handed
    start = _unwrapped(value)
    pending = list(vars(start).values()) if isinstance(start, type) and not _is_course(start) else [start]
    learner, reached, seen = [], [], set()
    while pending and len(learner) < 200:
        target = _unwrapped(pending.pop())
        if id(target) in seen or not _learner_function(target):
            continue
        seen.add(id(target))
        learner.append(target)
        reads = _reads(target.__code__)
        named = [target.__globals__[n] for n in reads["global"] if n in target.__globals__]
        named += [sys.modules[n] for n in reads["module"] if n in sys.modules]
        values = [cell.cell_contents for cell in target.__closure__ or () if _filled(cell)]
        values += list(target.__defaults__ or ()) + list((target.__kwdefaults__ or {}).values())
        for from_values, objects in ((False, named), (True, values)):
            for obj in objects:
                found = [obj, *_attributes(obj, reads["attribute"])]
                reached += found
                if from_values:
                    handed.update(id(o) for o in found)
        pending += [obj for obj in reached if _learner_function(_unwrapped(obj))]
        pending += [v for obj in named + values
                    if isinstance(obj, type) and not _is_course(obj) and not _is_library_class(obj)
                    for v in vars(obj).values()]
    return learner, reached


def _filled(cell) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises
    except ValueError:
        return False
    return True


def _is_library_class(cls: type) -> bool:
    module = sys.modules.get(getattr(cls, "__module__", ""), None)
    file = getattr(module, "__file__", None)
    return not file or str(Path(file).resolve()).startswith(_library_folders())


@functools.cache
def _frame_tools() -> tuple:
    """The functions that hand code the frames of its callers."""
    import traceback

    return (sys._getframe, inspect.currentframe, inspect.stack, inspect.getouterframes, inspect.trace,
            traceback.extract_stack, traceback.walk_stack, traceback.format_stack, traceback.print_stack)


def _same(a, b) -> bool:
    a, b = _unwrapped(a), _unwrapped(b)
    code = getattr(a, "__code__", None)
    return a is b or (code is not None and code is getattr(b, "__code__", 0))


def _copied_code(func, reference) -> bool:
    """`func` runs the reference's compiled code: the same code object (types.FunctionType(ref.__code__, ...)),
    or the same code compiled again from its source text by exec/compile (a file name like '<string>')."""
    mine, theirs = func.__code__, getattr(_unwrapped(reference), "__code__", None)
    if theirs is None:
        return False
    if mine is theirs:
        return True
    try:
        moved = mine.replace(co_filename=theirs.co_filename, co_firstlineno=theirs.co_firstlineno)
    except (TypeError, ValueError):
        return False
    return mine.co_filename.startswith("<") and moved.co_code == theirs.co_code and moved.co_consts == theirs.co_consts


def borrowed(value, references=()) -> str | None:
    """What in the learner's `value` is not the learner's own work, in words, else None: it reaches the exercise's
    reference (a def that calls it), the checks' own code, a library's finished version given in `references`, a
    copy of the reference's compiled code, or the frames of its callers."""
    references, handed = tuple(references), set()
    learner, reached = _reached(value, handed)
    for func in learner:
        for reference in references:
            if _copied_code(func, reference):
                return f"{func.__qualname__} is a copy of {_name(_unwrapped(reference))} (its compiled code)"
        frame_attributes = _reads(func.__code__)["attribute"] & FRAME_ATTRIBUTES
        if frame_attributes:
            return (f"{func.__qualname__} reads frames ({', '.join(sorted(frame_attributes))}): it looks at the code "
                    "that calls it")
    for obj in reached:
        if any(_same(obj, tool) for tool in _frame_tools()):
            return f"it calls {getattr(obj, '__qualname__', obj)}, which looks at the code that calls it (its frames)"
        target = _unwrapped(obj)
        if any(_same(obj, reference) for reference in references):
            return f"it calls {_name(target)}"
        module = _module_of(target) or ""
        checks_code = module == CHECKS_PACKAGE or module.startswith(CHECKS_PACKAGE + ".")
        if checks_code and callable(target) and id(obj) not in handed:  # named by the code, not handed to it
            return f"it calls the checks' own {_name(target)}"
    return None


def not_your_own(*values, references=()) -> str | None:
    """The hint for an answer that is (or hands back) the course's own code, or that only calls the exercise's
    reference (`references`), else None."""
    for value in values:
        name = course_code(value)
        if name:
            return (f"this is the course's own {name}, imported: the check compares your code with the course's, "
                    "so it needs your own code. Write it in the exercise cell")
    for value in values:
        why = borrowed(value, references)
        if why:
            return (f"{why}: the check compares your code with the course's, so it needs your own code, written in "
                    "the exercise cell (the course's helpers the exercise names, such as canonical_number or the "
                    "parser, are fine; the exercise's answer itself, and the stack of the code that calls yours, "
                    "are not)")
    return None
