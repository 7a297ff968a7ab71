"""Patches of Beam's private names (Beam's vendored cloudpickle included) that keep what Beam computes and cache
or skip work Beam repeats for the same inputs: the same pipelines, the same results.

- `beam-state-cache-weigher`: the in-process runner's state cache weighs each side input with objsize, which first
  collects the ids of every loaded module's globals at every call; here they are collected again only when the set
  of loaded modules changed, and the same objsize traversal counts the same objects.
- `beam-signatures`: Beam reads `inspect.signature` of the same DoFn methods each time it builds or runs an
  operation; here a plain function's or bound method's signature is read once per function.
- `beam-dofn-specs`: Beam reads every method of a DoFn to find its state and timer parameters, again and again for
  the same DoFn; here once per DoFn object while it lives.
- `beam-options-views`: `PipelineOptions.view_as` parses every flag anew, twice per applied transform; here a view is
  made once per options object and class and given again while the flags and shared values are the same.
- `beam-payloads`: Beam's picklers compress every pickled DoFn and source with bz2 at its highest level; while a
  `payloads_in_process` block runs (workers in this process), they are stored in a zlib stream at level 0 instead.
  Beam's picklers read both.
- `beam-cloudpickle-submodules`: Beam's vendored cloudpickle (Beam 2.7x) scans the name of every loaded module for
  each package a pickled function refers to; here the loaded modules are indexed by package once per set of loaded
  modules. Beam 2.59 pickles with dill and has no vendored cloudpickle: nothing to do there.
"""

from __future__ import annotations

import bz2
import contextlib
import importlib
import sys
import threading
import types
import zlib
from typing import Any, Callable, Iterator

from tfxflow.pipeline.patches.patch import MARK, Patch

# The versions of the two locks (requirements-compat.lock, requirements-current.lock) these patches were read and
# tested at.
BEAM = ("2.59.0", "2.77.0")
OBJSIZE = ("0.7.1",)  # the state cache's weigher reads objsize's traversal settings

WEIGH = "get_deep_size"  # the state cache's weigher (apache_beam.runners.worker.statecache.get_deep_size)
# What Beam's weigher passes to objsize (its size, referents and filter functions), used as they are.
WEIGHER_PARTS = ("_size_func", "_get_referents_func", "_filter_func")
# The modules that hold Beam's get_signature under that name (imported from typehints.decorators).
SIGNATURE_HOLDERS = (
    "apache_beam.typehints.decorators",
    "apache_beam.transforms.core",
    "apache_beam.transforms.ptransform",
    "apache_beam.transforms.util",
)
# The modules that call get_dofn_specs by that name (the others call `userstate.get_dofn_specs`).
SPECS_HOLDERS = ("apache_beam.transforms.userstate", "apache_beam.runners.direct.transform_evaluator")
# Beam's picklers, which compress what they pickle through their module's `bz2`.
PICKLERS = ("apache_beam.internal.cloudpickle_pickler", "apache_beam.internal.dill_pickler")
BZ2_MAGIC = b"BZh"
IN_PROCESS_LEVEL = 0  # zlib's level for payloads that stay in this process: stored as they are
VENDORED_CLOUDPICKLE = "apache_beam.internal.cloudpickle.cloudpickle"
SUBMODULES = "_find_imported_submodules"


def _weigh_without_collecting_module_globals_per_call() -> None:
    from apache_beam.runners.worker import statecache

    if getattr(getattr(statecache, WEIGH), MARK, False):
        return
    weigh = module_globals_weigher(*(getattr(statecache, name) for name in WEIGHER_PARTS))
    setattr(weigh, MARK, True)
    setattr(statecache, WEIGH, weigh)


def module_globals_weigher(size: Callable, referents: Callable, keep: Callable) -> Callable[..., int]:
    """objsize.get_deep_size with these functions (Beam's), where the ids of the loaded modules' globals, which
    objsize leaves out of every size, are collected once per set of loaded modules instead of at every call."""
    from objsize import traverse

    settings = traverse.ObjSizeSettings(
        get_size_func=size, get_referents_func=referents, filter_func=keep, exclude_modules_globals=False
    )
    # The dicts are held, not only their ids: an id is not reused while its object lives.
    known = {"modules": (), "globals": [], "ids": set()}

    def get_deep_size(*objs: Any) -> int:
        modules = tuple(sys.modules.values())
        if modules != known["modules"]:  # a length first, then identities: no module's globals are read
            held = []
            for module in modules:
                try:
                    held.append(vars(module))
                except TypeError:  # objsize's rule: an object without a __dict__ has no globals to leave out
                    pass
            known.update(modules=modules, globals=held, ids={id(None), *map(id, held)})
        context = settings.new_context()
        context.exclude_set = known["ids"]  # read, never written, when the traversal is not of excluded objects
        return context.get_deep_size(*objs)

    return get_deep_size


def _read_each_functions_signature_once() -> None:
    from apache_beam.typehints import decorators

    _remember_in(SIGNATURE_HOLDERS, "get_signature", decorators.get_signature, signature_memo)


def _remember_in(holders: tuple, name: str, original: Callable, memo: Callable[[Callable], Callable]) -> None:
    """Puts memo(original) in place of `name` in every module of `holders` that has it, once."""
    if getattr(original, MARK, False):
        return
    remembered = memo(original)
    setattr(remembered, MARK, True)
    for module_name in holders:
        module = importlib.import_module(module_name)
        if getattr(module, name, None) is not None:
            setattr(module, name, remembered)


def signature_memo(get_signature: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """`get_signature` (Beam's), remembered per function for plain functions and bound methods; anything else
    (a builtin, a type, a callable object) is read each time, as before."""
    import weakref

    functions: "weakref.WeakKeyDictionary[Any, Any]" = weakref.WeakKeyDictionary()
    methods: "weakref.WeakKeyDictionary[Any, Any]" = weakref.WeakKeyDictionary()

    def remembered(func: Any) -> Any:
        if type(func) is types.FunctionType:
            cache, key = functions, func
        elif type(func) is types.MethodType and type(func.__func__) is types.FunctionType:
            cache, key = methods, func.__func__  # bound to whatever object: the same signature without `self`
        else:
            return get_signature(func)
        signature = cache.get(key)
        if signature is None:
            signature = cache[key] = get_signature(func)
        return signature

    return remembered


def _read_each_dofns_specs_once() -> None:
    from apache_beam.transforms import userstate

    _remember_in(SPECS_HOLDERS, "get_dofn_specs", userstate.get_dofn_specs, specs_memo)


def specs_memo(get_dofn_specs: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """`get_dofn_specs` (Beam's), read once per DoFn object while it lives; each call gets its own sets."""
    import weakref

    known: dict = {}  # id(dofn) -> (a weak reference to it, its specs)

    def remembered(dofn: Any) -> Any:
        key = id(dofn)
        entry = known.get(key)
        if entry is None or entry[0]() is not dofn:
            specs = get_dofn_specs(dofn)
            try:  # dropped when the DoFn dies, before its id can be another object's
                ref = weakref.ref(dofn, lambda _, key=key: known.pop(key, None))
            except TypeError:
                return specs
            entry = known[key] = (ref, specs)
        state_specs, timer_specs = entry[1]
        return set(state_specs), set(timer_specs)

    return remembered


def _make_each_options_view_once() -> None:
    from apache_beam.options.pipeline_options import PipelineOptions

    if getattr(PipelineOptions.view_as, MARK, False):
        return
    remembered = views_memo(PipelineOptions.view_as)
    setattr(remembered, MARK, True)
    PipelineOptions.view_as = remembered


def views_memo(view_as: Callable[[Any, type], Any]) -> Callable[[Any, type], Any]:
    """`view_as` (Beam's), one view per options object and class, made again when the options' flags or shared
    values changed (other objects, or other flags); options parsed from sys.argv (no flags) get a new view each
    time, as before."""
    import functools
    import weakref

    views: "weakref.WeakKeyDictionary[Any, dict]" = weakref.WeakKeyDictionary()

    @functools.wraps(view_as)
    def remembered(self: Any, cls: type) -> Any:
        state = vars(self)  # not attributes: PipelineOptions' __getattr__ reads options
        flags, shared = state.get("_flags"), state.get("_all_options")
        if flags is None:
            return view_as(self, cls)
        try:
            known = views.setdefault(self, {})
        except TypeError:  # an options object that cannot be weakly referenced
            return view_as(self, cls)
        entry = known.get(cls)
        if entry is not None and entry[0] is flags and entry[1] == tuple(flags):
            view = vars(entry[2])
            if view["_all_options"] is shared:
                parsed = view["_visible_options"]
                for name in dir(parsed):  # a value dropped from the shared dict is put back, as Beam's view does
                    if name[0] != "_" and name not in shared:
                        shared[name] = getattr(parsed, name)
                return entry[2]
        made = view_as(self, cls)
        known[cls] = (flags, tuple(flags), made)
        return made

    return remembered


class PayloadCompression:
    """Stands in for the `bz2` module in Beam's picklers: compresses with bz2, or stores in a zlib stream while a
    `payloads_in_process` block runs; decompresses either."""

    def __init__(self):
        self._in_process = 0
        self._lock = threading.Lock()
        setattr(self, MARK, True)

    def compress(self, data: bytes, compresslevel: int = 9) -> bytes:
        if self._in_process:
            return zlib.compress(data, IN_PROCESS_LEVEL)
        return bz2.compress(data, compresslevel)

    @staticmethod
    def decompress(data: bytes) -> bytes:
        return bz2.decompress(data) if bytes(data[:3]) == BZ2_MAGIC else zlib.decompress(data)

    @contextlib.contextmanager
    def in_process(self) -> Iterator[None]:
        with self._lock:
            self._in_process += 1
        try:
            yield
        finally:
            with self._lock:
                self._in_process -= 1


PAYLOADS = PayloadCompression()


def _compress_payloads_for_where_they_go() -> None:
    for name in PICKLERS:
        try:
            module = importlib.import_module(name)
        except ImportError:  # dill is Beam's optional pickler in 2.7x
            continue
        if not getattr(module.bz2, MARK, False):
            module.bz2 = PAYLOADS


@contextlib.contextmanager
def payloads_in_process(in_process: bool) -> Iterator[None]:
    """While the block runs, what Beam pickles is compressed for this process only when `in_process` (the
    pipelines' workers are this process: beam_runners.BeamRunner.workers_in_this_process); `apply()` first."""
    if not in_process:
        yield
        return
    with PAYLOADS.in_process():
        yield


def _index_loaded_submodules() -> None:
    try:
        cloudpickle = importlib.import_module(VENDORED_CLOUDPICKLE)
    except ImportError:  # Beam 2.59 pickles with dill
        return
    original = getattr(cloudpickle, SUBMODULES)
    if getattr(original, MARK, False):
        return
    find = submodules_index()
    setattr(find, MARK, True)
    find.__doc__ = original.__doc__
    setattr(cloudpickle, SUBMODULES, find)


def submodules_index() -> Callable[[types.CodeType, Any], list]:
    """cloudpickle's `_find_imported_submodules(code, top_level_dependencies)` with the loaded modules' names
    indexed by each package they are in ("a." and "a.b." for "a.b.c"), in sys.modules' order; the names loaded
    since the last call are added to it (it is made again where any was removed)."""
    known: dict = {"names": None, "index": {}}

    def add(names: list, index: dict) -> dict:
        for name in names:
            if name is None:  # cloudpickle's rule: older pytest puts a None key in sys.modules
                continue
            parts = name.split(".")
            for i in range(1, len(parts)):
                index.setdefault(".".join(parts[:i]) + ".", []).append(name)
        return index

    def find(code: types.CodeType, top_level_dependencies: Any) -> list:
        packages = [
            x
            for x in top_level_dependencies
            if isinstance(x, types.ModuleType) and hasattr(x, "__package__") and x.__package__
        ]
        if not packages:  # most functions: sys.modules is not read, as cloudpickle does not read it then
            return []
        names = list(sys.modules)  # a concurrent import may change sys.modules: a copy, as cloudpickle reads it
        seen = known["names"]
        if names != seen:
            if seen is not None and names[: len(seen)] == seen:
                add(names[len(seen) :], known["index"])
            else:
                known["index"] = add(names, {})
            known["names"] = names
        used = set(code.co_names)
        subimports = []
        for x in packages:
            prefix = x.__name__ + "."
            for name in known["index"].get(prefix, ()):
                if not set(name[len(prefix) :].split(".")) - used:
                    subimports.append(sys.modules[name])
        return subimports

    return find


PATCHES = (
    Patch(
        "beam-state-cache-weigher",
        {"apache-beam": BEAM, "objsize": OBJSIZE},
        _weigh_without_collecting_module_globals_per_call,
    ),
    Patch("beam-signatures", {"apache-beam": BEAM}, _read_each_functions_signature_once),
    Patch("beam-dofn-specs", {"apache-beam": BEAM}, _read_each_dofns_specs_once),
    Patch("beam-options-views", {"apache-beam": BEAM}, _make_each_options_view_once),
    Patch("beam-payloads", {"apache-beam": BEAM}, _compress_payloads_for_where_they_go),
    Patch("beam-cloudpickle-submodules", {"apache-beam": BEAM}, _index_loaded_submodules),
)
