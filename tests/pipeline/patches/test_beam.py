"""pipeline/patches/beam.py against the pinned Beam: each name it replaces is still where it was and still does
the work the patch saves, and what the patch puts in its place gives Beam's results."""

import importlib
import inspect
import json
import subprocess
import sys
import textwrap
import types

import pytest

from tfxflow.pipeline import beam_runners, patches
from tfxflow.pipeline.patches import beam as beam_patches
from tfxflow.pipeline.patches.patch import MARK


def test_the_pinned_beam_still_weighs_every_loaded_side_input_with_objsize():
    from apache_beam.runners.worker import statecache

    assert inspect.getsource(statecache.StateCache).count("weight = get_deep_size(value)") == 2  # get and put
    weigher = inspect.getsource(statecache.get_deep_size)
    assert "objsize.get_deep_size(" in weigher
    for name in beam_patches.WEIGHER_PARTS:  # what is passed to objsize, reused by the patch
        assert f"={name}" in weigher


class _Holder:
    def __init__(self, *values):
        self.values = values


def test_side_inputs_weigh_what_beams_weigher_says():
    import types
    import weakref

    import numpy as np
    from apache_beam.runners.worker import statecache

    weigh = beam_patches.module_globals_weigher(*(getattr(statecache, n) for n in beam_patches.WEIGHER_PARTS))
    shared = list(range(100))
    module = types.ModuleType("tfxflow_test_module")
    module.payload = ["x" * 1000]
    sys.modules[module.__name__] = module
    try:
        values = [
            [1.5, "two", b"three", None, (4, 5)],
            {"counts": np.arange(1000), "names": ["a" * 50] * 20, "nested": {"k": shared}},
            [shared, shared, shared],  # counted once
            _Holder(np.zeros((64, 64), np.float32), {"w": weakref.ref(module)}, len),
            [vars(np), vars(module), module.payload],  # a module's globals are left out, what they hold is not
            [vars(module)],
        ]
        for value in values:
            assert weigh(value) == statecache.get_deep_size(value), value
        assert weigh([vars(module)]) < weigh([module.payload])
        # A module loaded after the ids were collected: its globals are left out from then on, as Beam's are.
        late = types.ModuleType("tfxflow_test_late")
        late.big = list(range(10_000))
        holder = {"g": vars(late)}
        before = weigh(holder)
        sys.modules[late.__name__] = late
        assert weigh(holder) == statecache.get_deep_size(holder) < before
    finally:
        sys.modules.pop("tfxflow_test_module", None)
        sys.modules.pop("tfxflow_test_late", None)


def test_weighing_does_not_collect_the_module_globals_per_call(monkeypatch):
    from apache_beam.runners.worker import statecache
    from objsize import traverse

    weigh = beam_patches.module_globals_weigher(*(getattr(statecache, n) for n in beam_patches.WEIGHER_PARTS))
    expected = statecache.get_deep_size([1, 2, 3])
    assert weigh([1, 2, 3]) == expected  # the modules' globals collected once

    def collected(*_):
        raise AssertionError("the globals of every module collected again")

    monkeypatch.setattr(traverse, "_iter_modules_globals", collected)
    with pytest.raises(AssertionError):
        statecache.get_deep_size([1, 2, 3])  # Beam's, at every call
    assert weigh([1, 2, 3]) == expected


def test_the_pinned_beam_imports_get_signature_by_name_where_the_patch_replaces_it():

    for name in beam_patches.SIGNATURE_HOLDERS[1:]:
        source = inspect.getsource(importlib.import_module(name))
        assert "from apache_beam.typehints.decorators import get_signature" in source, name
    from apache_beam.transforms import userstate

    # What reads every method's signature again for every DoFn it looks at.
    assert "MethodWrapper(dofn, method_name)" in inspect.getsource(userstate.get_dofn_specs)


class _Doer:
    def process(self, element, side=None, *args, flag: bool = True, **kwargs) -> int:
        return element

    @classmethod
    def build(cls, value: str) -> "_Doer":
        return cls()

    def __call__(self, x, y=2):
        return x


def _plain(a, b: int = 3, *, c):
    return a


def test_remembered_signatures_are_beams_and_each_function_is_read_once():
    import functools

    from apache_beam.typehints import decorators

    reads = []

    def counted(func):
        reads.append(func)
        return decorators.get_signature(func)

    remembered = beam_patches.signature_memo(counted)
    first, second = _Doer(), _Doer()
    callables = [
        _plain,
        lambda x, y=1: x,
        first.process,
        second.process,  # the same function bound to another object
        _Doer.process,  # the function itself: its own signature, with `self`
        _Doer.build,
        str.strip,  # Beam's specialization of builtin method descriptors
        int,  # and of types
        functools.partial(_plain, 1),
        first,  # a callable object
    ]
    for func in callables + callables:
        assert remembered(func) == decorators.get_signature(func), func
    assert str(remembered(first.process)) == "(element, side=None, *args, flag: bool = True, **kwargs) -> int"
    assert str(remembered(_Doer.process)).startswith("(self, element")
    # Read once: the plain function, the lambda, process (bound twice, one read), the unbound function, build;
    # the others each time.
    read_once = [_plain, _Doer.process, _Doer.build]
    assert sum(1 for f in reads if f in read_once) == 3
    assert sum(1 for f in reads if getattr(f, "__func__", None) is _Doer.process) == 1
    assert sum(1 for f in reads if f is str.strip) == 2 and sum(1 for f in reads if f is int) == 2


def test_the_pinned_beam_calls_get_dofn_specs_where_the_patch_replaces_it():

    for name in beam_patches.SPECS_HOLDERS[1:]:
        source = inspect.getsource(importlib.import_module(name))
        assert "from apache_beam.transforms.userstate import get_dofn_specs" in source, name
    # Every other caller reads it from the userstate module, where it is replaced (read as files: some of
    # these modules are compiled, and inspect cannot read their source).
    import pathlib

    import apache_beam

    root = pathlib.Path(apache_beam.__file__).parent
    callers = [
        path
        for path in root.rglob("*.py")
        if "get_dofn_specs(" in path.read_text(encoding="utf-8") and not path.name.endswith("_test.py")
    ]
    assert len(callers) >= 6
    for path in callers:
        source = path.read_text(encoding="utf-8")
        module = ".".join(path.relative_to(root.parent).with_suffix("").parts)
        if module in beam_patches.SPECS_HOLDERS:
            continue
        assert "import get_dofn_specs" not in source and "userstate.get_dofn_specs(" in source, module


def _stateful_dofn_class():
    import apache_beam as beam
    from apache_beam.coders import VarIntCoder
    from apache_beam.transforms.timeutil import TimeDomain
    from apache_beam.transforms.userstate import BagStateSpec, TimerSpec

    class Stateful(beam.DoFn):
        SEEN = BagStateSpec("seen", VarIntCoder())
        FLUSH = TimerSpec("flush", TimeDomain.WATERMARK)

        def process(
            self,
            element,
            seen=beam.DoFn.StateParam(SEEN),  # noqa: B008 (how Beam declares state)
            flush=beam.DoFn.TimerParam(FLUSH),  # noqa: B008
        ):
            seen.add(element[1])
            yield element

    return Stateful


def test_remembered_dofn_specs_are_beams_and_each_dofn_is_read_once():
    import gc

    import apache_beam as beam
    from apache_beam.transforms import core, userstate

    reads = []

    def counted(dofn):
        reads.append(type(dofn).__name__)
        return userstate.get_dofn_specs(dofn)

    remembered = beam_patches.specs_memo(counted)
    stateful, plain = _stateful_dofn_class()(), beam.DoFn()
    mapped = core.CallableWrapperDoFn(lambda x: x + 1)
    for dofn in (stateful, plain, mapped) * 3:
        assert remembered(dofn) == userstate.get_dofn_specs(dofn)
    assert reads == ["Stateful", "DoFn", "CallableWrapperDoFn"]
    state_specs, timer_specs = remembered(stateful)
    assert {s.name for s in state_specs} == {"seen"} and len(timer_specs) == 1
    state_specs.clear()  # each call gets its own sets
    assert {s.name for s in remembered(stateful)[0]} == {"seen"}
    # A DoFn made after another died is read, whatever id it gets.
    del stateful
    gc.collect()
    for _ in range(20):
        assert remembered(beam.DoFn()) == (set(), set())
    assert reads.count("DoFn") == 21


# Runs in a fresh interpreter: apply() changes the process it runs in.
def test_the_pinned_beam_makes_a_new_options_view_each_time_a_transform_is_applied():
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    assert "view = cls(self._flags)" in inspect.getsource(PipelineOptions.view_as)
    # Beam 2.7x moved the body of `apply` into `_apply_internal` (run under the options' scope).
    applying = getattr(beam.Pipeline, "_apply_internal", beam.Pipeline.apply)
    assert "self._options.view_as(TypeOptions)" in inspect.getsource(applying)
    assert "self._options.view_as(TypeOptions)" in inspect.getsource(beam.Pipeline._infer_result_type)


_OPTION_CLASSES = (
    "StandardOptions",
    "TypeOptions",
    "DirectOptions",
    "SetupOptions",
    "GoogleCloudOptions",
    "DebugOptions",
)


def _values(view):
    return {name: getattr(view, name) for name in view._visible_option_list()}


def test_remembered_options_views_read_and_set_what_beams_views_do():
    from apache_beam.options import pipeline_options

    original = pipeline_options.PipelineOptions.view_as
    original = getattr(original, "__wrapped__", original)  # Beam's, where an earlier test applied the patches
    made = []

    def counted(self, cls):
        made.append(cls.__name__)
        return original(self, cls)

    memo = beam_patches.views_memo(counted)
    flags = ["--direct_num_workers=3", "--experiments=a", "--no_pipeline_type_check", "--setup_file=/x/setup.py"]
    ours, beams = pipeline_options.PipelineOptions(list(flags)), pipeline_options.PipelineOptions(list(flags))
    for name in _OPTION_CLASSES:
        cls = getattr(pipeline_options, name)
        first = memo(ours, cls)
        assert memo(ours, cls) is first  # made once
        assert _values(first) == _values(original(beams, cls)) != {}
    assert sorted(made) == sorted(_OPTION_CLASSES)
    assert memo(ours, pipeline_options.DirectOptions).direct_num_workers == 3
    assert memo(ours, pipeline_options.TypeOptions).pipeline_type_check is False
    # A value set through a view is the options' value, as with Beam's views.
    memo(ours, pipeline_options.SetupOptions).save_main_session = True
    assert original(ours, pipeline_options.SetupOptions).save_main_session is True
    assert ours.get_all_options()["save_main_session"] is True
    memo(ours, pipeline_options.DebugOptions).experiments.append("b")  # a list value shared by every view
    assert original(ours, pipeline_options.DebugOptions).experiments == ["a", "b"]
    # Other flags (the same list changed, or another list), other shared values: a new view.
    made.clear()
    ours._flags.append("--direct_num_workers=5")
    assert memo(ours, pipeline_options.DirectOptions).direct_num_workers == 3  # set once, as in Beam's views
    assert made == ["DirectOptions"]
    ours._all_options = {}
    assert memo(ours, pipeline_options.DirectOptions).direct_num_workers == 5
    assert made == ["DirectOptions", "DirectOptions"]
    # A value dropped from the shared values is put back from the flags, as a new view of Beam's does.
    del ours._all_options["direct_num_workers"]
    assert memo(ours, pipeline_options.DirectOptions).direct_num_workers == 5
    assert made == ["DirectOptions", "DirectOptions"]
    # Options parsed from sys.argv (no flags): a new view each time.
    argv_options = pipeline_options.PipelineOptions(None)
    made.clear()
    memo(argv_options, pipeline_options.StandardOptions)
    memo(argv_options, pipeline_options.StandardOptions)
    assert made == ["StandardOptions", "StandardOptions"]


VIEWS_SCRIPT = textwrap.dedent(
    """
    import json
    import apache_beam as beam
    from apache_beam.options import pipeline_options
    from tfxflow.pipeline import patches
    from tfxflow.pipeline.patches.patch import MARK

    patches.apply()
    made = [0]
    remembered = pipeline_options.PipelineOptions.view_as
    original_init = pipeline_options._BeamArgumentParser.__init__
    def counted(self, *args, **kwargs):
        made[0] += 1
        original_init(self, *args, **kwargs)
    pipeline_options._BeamArgumentParser.__init__ = counted

    def build(flags):
        p = beam.Pipeline(options=pipeline_options.PipelineOptions(flags))
        pcoll = p | beam.Create([1, 2, 3])
        for i in range(100):
            pcoll = pcoll | f"add{i}" >> beam.Map(lambda x: x + 1)
        return p, pcoll

    out = {"marked": getattr(remembered, MARK, False)}
    p, _ = build([])
    out["parsers_for_100_maps"] = made[0]
    try:  # type checking is on by default: a str transform on ints is refused when the pipeline is built
        p, pcoll = build([])
        pcoll | beam.Map(lambda x: x.upper()).with_input_types(str)
        out["checked"] = None
    except Exception as err:
        out["checked"] = type(err).__name__
    p, pcoll = build(["--no_pipeline_type_check"])
    pcoll | beam.Map(lambda x: x).with_input_types(str)
    out["unchecked"] = "built"
    print(json.dumps(out))
    """
)


@pytest.mark.integration
def test_pipelines_make_each_options_view_once_and_still_check_types():
    done = subprocess.run(
        [sys.executable, "-c", VIEWS_SCRIPT], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["marked"] is True
    # Beam as pinned makes two views (two parsers) for each of the 101 transforms' applies.
    assert out["parsers_for_100_maps"] < 20
    assert out["checked"] == "TypeCheckError"  # Beam's type check still reads the option from a remembered view
    assert out["unchecked"] == "built"


def test_the_pinned_beams_picklers_compress_each_payload_with_bz2_through_their_module():
    """What `beam-payloads` replaces: each pickler compresses through its module's `bz2` (unless asked for zlib, which
    Beam's coders are) and decompresses the same way."""

    found = 0
    for name in beam_patches.PICKLERS:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        found += 1
        source = inspect.getsource(module)
        assert "import bz2" in source
        assert "c = bz2.compress(s, compresslevel=9)" in source
        assert "s = bz2.decompress(c)" in source
        assert source.count("bz2.") == 2
    assert found >= 1


@pytest.mark.parametrize("in_process", [True, False])
def test_payloads_are_read_back_by_beams_picklers_however_they_were_compressed(in_process):
    import base64

    from apache_beam.internal import pickler

    patches.apply()
    value = {"fn": _Holder, "values": list(range(1000)), "text": "payload " * 200}
    with beam_patches.payloads_in_process(in_process):
        encoded = pickler.dumps(value)
    raw = base64.b64decode(encoded)
    assert raw.startswith(b"BZh") is not in_process
    assert raw[:1] == (b"\x78" if in_process else b"B")
    for inside in (True, False):  # read back in either state
        with beam_patches.payloads_in_process(inside):
            assert pickler.loads(encoded) == value
    assert beam_patches.PAYLOADS._in_process == 0  # every block left


@pytest.mark.parametrize(
    "runner, inside",
    [
        (beam_runners.BeamRunner(), True),
        (beam_runners.BeamRunner(direct_mode="in_memory", direct_workers=2), True),
        (beam_runners.BeamRunner(direct_mode="multi_threading", direct_workers=2), True),
        (beam_runners.BeamRunner(direct_mode="multi_processing", direct_workers=2), False),
        (beam_runners.BeamRunner(runner="portable"), False),
        (beam_runners.BeamRunner(runner="flink", flink_master="flink:8081"), False),
    ],
    ids=["default", "in-memory", "threads", "processes", "portable", "flink"],
)
def test_only_workers_in_this_process_get_payloads_compressed_for_it(runner, inside):
    assert runner.workers_in_this_process is inside


def test_the_pinned_cloudpickle_reads_every_loaded_modules_name_for_each_package_a_function_refers_to():
    """What `beam-cloudpickle-submodules` replaces, where Beam vendors cloudpickle (2.7x); Beam 2.59 pickles with
    dill, which does not search for submodules."""
    import importlib.util

    from apache_beam.internal import pickler

    if importlib.util.find_spec("apache_beam.internal.cloudpickle") is None:
        from apache_beam.internal import dill_pickler

        assert pickler.desired_pickle_lib is dill_pickler
        return
    cloudpickle = importlib.import_module(beam_patches.VENDORED_CLOUDPICKLE)
    state = inspect.getsource(cloudpickle._function_getstate)
    assert 'slotstate["_cloudpickle_submodules"] = _find_imported_submodules(' in state
    original = getattr(cloudpickle, beam_patches.SUBMODULES)
    search = inspect.getsource(getattr(original, "__wrapped__", original))
    if not getattr(original, MARK, False):
        assert "for name in list(sys.modules):" in search
        assert 'tokens = set(name[len(prefix):].split("."))' in search


def _cloudpickles_search():
    """cloudpickle's own `_find_imported_submodules` (the installed package's, as Beam vendors it)."""
    import cloudpickle

    return cloudpickle.cloudpickle._find_imported_submodules


def test_indexed_submodules_are_cloudpickles_for_the_functions_of_the_loaded_modules():
    import tensorflow as tf  # noqa: F401 (some 10,000 modules, as in a run)

    original = _cloudpickles_search()
    find = beam_patches.submodules_index()
    compared = found = 0
    for module in list(sys.modules.values()):
        if module is None or compared >= 2000:
            continue
        try:
            members = list(vars(module).values())
        except TypeError:
            continue
        for fn in members[:20]:
            if not isinstance(fn, types.FunctionType):
                continue
            code = fn.__code__
            # The function's globals and closure, as cloudpickle passes them; those that refer to a package are
            # the ones either search reads the loaded modules for.
            deps = [fn.__globals__[n] for n in code.co_names if n in fn.__globals__]
            deps += [c.cell_contents for c in (fn.__closure__ or ()) if _filled(c)]
            if not any(isinstance(d, types.ModuleType) and getattr(d, "__package__", None) for d in deps):
                assert find(code, deps) == [] == original(code, deps)
                continue
            expected = original(code, deps)
            assert find(code, deps) == expected, (module.__name__, fn)
            compared += 1
            found += len(expected)
    assert compared >= 2000 and found >= 50  # submodules found: both searches gave the same non-empty lists too


def _filled(cell) -> bool:
    try:
        return cell.cell_contents is not _filled  # an empty cell raises
    except ValueError:
        return False


def test_the_submodule_index_is_made_again_when_a_module_is_loaded():
    import email

    find = beam_patches.submodules_index()
    code = compile("email.quoprimime", "<test>", "eval")
    before = find(code, [email])
    assert "email.quoprimime" not in sys.modules or before
    import email.quoprimime

    assert find(code, [email]) == [sys.modules["email.quoprimime"]]
    # One removed and another loaded: the index is made again.
    saved = sys.modules.pop("email.quoprimime")
    try:
        import email.base64mime

        code = compile("email.quoprimime, email.base64mime", "<test>", "eval")
        assert find(code, [email]) == _cloudpickles_search()(code, [email])
        assert sys.modules["email.base64mime"] in find(code, [email])
        assert saved not in find(code, [email])
    finally:
        sys.modules["email.quoprimime"] = saved
