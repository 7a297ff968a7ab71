"""pipeline/beam_speedups.py against the pinned Beam: what it changes is still where it was, a real Beam pipeline
gives the same results without setting dill's logger level at every pickle, and side inputs weigh what Beam's
own weigher says they weigh."""

import importlib
import inspect
import json
import subprocess
import sys
import textwrap
import types

import pytest

from tfxflow.pipeline import beam_runners, beam_speedups


def test_the_pinned_beam_still_sets_dills_level_after_every_pickle():
    from apache_beam.internal import dill_pickler

    pickler = inspect.getsource(dill_pickler)
    assert pickler.count("dill.dill._trace(False)") == 2  # after every dumps and every loads


def test_the_pinned_beam_still_weighs_every_loaded_side_input_with_objsize():
    from apache_beam.runners.worker import statecache

    from tfxflow.pipeline import beam_speedups

    assert inspect.getsource(statecache.StateCache).count("weight = get_deep_size(value)") == 2  # get and put
    weigher = inspect.getsource(statecache.get_deep_size)
    assert "objsize.get_deep_size(" in weigher
    for name in beam_speedups.WEIGHER_PARTS:  # what is passed to objsize, reused by beam_speedups
        assert f"={name}" in weigher


class _Holder:
    def __init__(self, *values):
        self.values = values


def test_side_inputs_weigh_what_beams_weigher_says():
    import types
    import weakref

    import numpy as np
    from apache_beam.runners.worker import statecache

    from tfxflow.pipeline import beam_speedups

    weigh = beam_speedups.module_globals_weigher(*(getattr(statecache, n) for n in beam_speedups.WEIGHER_PARTS))
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

    from tfxflow.pipeline import beam_speedups

    weigh = beam_speedups.module_globals_weigher(*(getattr(statecache, n) for n in beam_speedups.WEIGHER_PARTS))
    expected = statecache.get_deep_size([1, 2, 3])
    assert weigh([1, 2, 3]) == expected  # the modules' globals collected once

    def collected(*_):
        raise AssertionError("the globals of every module collected again")

    monkeypatch.setattr(traverse, "_iter_modules_globals", collected)
    with pytest.raises(AssertionError):
        statecache.get_deep_size([1, 2, 3])  # Beam's, at every call
    assert weigh([1, 2, 3]) == expected


def test_the_pinned_beam_imports_get_signature_by_name_where_beam_speedups_replaces_it():
    import importlib

    from tfxflow.pipeline import beam_speedups

    for name in beam_speedups.SIGNATURE_HOLDERS[1:]:
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

    from tfxflow.pipeline import beam_speedups

    reads = []

    def counted(func):
        reads.append(func)
        return decorators.get_signature(func)

    remembered = beam_speedups.signature_memo(counted)
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


def test_the_pinned_beam_calls_get_dofn_specs_where_beam_speedups_replaces_it():
    import importlib

    from tfxflow.pipeline import beam_speedups

    for name in beam_speedups.SPECS_HOLDERS[1:]:
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
        if module in beam_speedups.SPECS_HOLDERS:
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

    from tfxflow.pipeline import beam_speedups

    reads = []

    def counted(dofn):
        reads.append(type(dofn).__name__)
        return userstate.get_dofn_specs(dofn)

    remembered = beam_speedups.specs_memo(counted)
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
SCRIPT = textwrap.dedent(
    """
    import glob, json, logging, os, tempfile
    import apache_beam as beam
    from apache_beam.internal import pickler
    import dill._dill as dill_module
    from tfxflow.pipeline import beam_speedups

    levels = [0]
    # dill 0.4 wraps its logger in an adapter; Beam 2.7x pickles with cloudpickle, not dill, by default.
    dill_logger = getattr(dill_module.log, "logger", dill_module.log)
    original_set_level = dill_module.log.setLevel
    def counted_set_level(level):
        levels[0] += 1
        original_set_level(level)
    dill_module.log.setLevel = counted_set_level

    from apache_beam.coders import VarIntCoder
    from apache_beam.transforms.userstate import ReadModifyWriteStateSpec

    class RunningSum(beam.DoFn):  # a stateful DoFn: its state parameter is what get_dofn_specs finds
        TOTAL = ReadModifyWriteStateSpec("total", VarIntCoder())

        def process(self, element, total=beam.DoFn.StateParam(TOTAL)):
            value = (total.read() or 0) + element[1]
            total.write(value)
            yield value

    def run():
        out = tempfile.mkdtemp()
        with beam.Pipeline() as p:
            side = p | "side" >> beam.Create([10, 20])
            (p | beam.Create([1, 2, 3])
               | beam.Map(lambda x, s: x + sum(s), s=beam.pvalue.AsList(side))
               | beam.io.WriteToText(os.path.join(out, "part")))
            (p | "keyed" >> beam.Create([("a", 1), ("a", 2), ("a", 4)])
               | beam.ParDo(RunningSum())
               | "sums" >> beam.io.WriteToText(os.path.join(out, "sums")))
        def read(prefix):
            return sorted(int(line) for name in glob.glob(os.path.join(out, prefix + "*")) for line in open(name))
        return read("part") + read("sums")

    def pickles():
        for i in range(50):
            pickler.loads(pickler.dumps({"i": i}))

    before = run(); pickles()
    counts = {"levels_before": levels[0]}
    beam_speedups.apply(); beam_speedups.apply()
    levels[0] = 0
    after = run(); pickles()
    from apache_beam.runners.worker import statecache
    from apache_beam.transforms import core, userstate
    from apache_beam.runners.worker import statesampler
    from tensorflow_data_validation.utils import quantiles_util
    counts.update(levels_after=levels[0], before=before, after=after,
                  level=dill_logger.level, weigher=statecache.get_deep_size.__module__,
                  signatures=core.get_signature.__module__, specs=userstate.get_dofn_specs.__module__,
                  sampler_period=statesampler.StateSampler.__init__.__defaults__,
                  histograms=getattr(quantiles_util.generate_equi_width_histogram, beam_speedups.MARK, False))
    dill_module._trace(True)
    counts["traced_level"] = dill_logger.level
    from apache_beam.internal import dill_pickler
    counts["pickles_with_dill"] = pickler.desired_pickle_lib is dill_pickler
    import bz2, zlib
    kinds = []
    for module in (bz2, zlib):  # how each payload is compressed, while the pipeline runs in this process
        def counted(data, *args, _original=module.compress, _name=module.__name__, **kwargs):
            kinds.append(f"{_name} {(list(args) + list(kwargs.values()) + ['default'])[0]}")
            return _original(data, *args, **kwargs)
        module.compress = counted
    with beam_speedups.payloads_in_process(True):
        counts["in_process"] = run()
    counts["in_process_kinds"] = sorted(set(kinds))
    kinds.clear()
    with beam_speedups.payloads_in_process(False):
        counts["for_remote_workers"] = run()
    counts["for_remote_workers_kinds"] = sorted(set(kinds))
    print(json.dumps(counts))
    """
)


@pytest.mark.integration
def test_a_pipeline_gives_the_same_results_without_setting_the_level_per_pickle():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    counts = json.loads(done.stdout.strip().splitlines()[-1])
    # The side input's sums, then the stateful DoFn's running sums of one key (1, 1+2, 1+2+4).
    assert counts["before"] == counts["after"] == [31, 32, 33, 1, 3, 7]
    # The same results with the payloads stored for this process (zlib's level 0), and for remote workers (bz2).
    assert counts["in_process"] == counts["for_remote_workers"] == counts["before"]
    # (Beam's coders are pickled with zlib at level 9 either way.)
    assert [k for k in counts["in_process_kinds"] if k != "zlib 9"] == [f"zlib {beam_speedups.IN_PROCESS_LEVEL}"]
    assert [k for k in counts["for_remote_workers_kinds"] if k != "zlib 9"] == ["bz2 9"]
    if counts["pickles_with_dill"]:  # Beam 2.59
        # Beam as pinned: dill's level is set at every pickle and unpickle.
        assert counts["levels_before"] >= 100
        # Applied: the level is never set again (it is WARN already), and tracing still switches it.
        assert counts["levels_after"] == 0
        assert counts["level"] == 30  # logging.WARN
    assert counts["traced_level"] == 20  # logging.INFO: tracing still switches it
    assert counts["weigher"] == "tfxflow.pipeline.beam_speedups"  # installed where the state cache calls it
    assert counts["signatures"] == "tfxflow.pipeline.beam_speedups"  # and where DoFns' methods are read
    assert counts["specs"] == "tfxflow.pipeline.beam_speedups"  # and where their state and timers are found
    assert counts["sampler_period"] == [beam_speedups.SAMPLER_PERIOD_MS]  # the period bundles' samplers get
    assert counts["histograms"] is True  # ours, where TFDV's generators call it


def test_the_pinned_beam_reads_each_tfrecord_in_two_small_reads_checked_by_crcmod():
    import importlib.util

    from apache_beam.io import tfrecordio

    from tfxflow.pipeline import beam_speedups

    source = getattr(tfrecordio, beam_speedups.TFRECORD_SOURCE)
    reader = inspect.getsource(source.read_records)
    if not getattr(source.read_records, beam_speedups.MARK, False):  # not yet replaced in this process
        assert "_TFRecordUtil.read_record(file_handle)" in reader and "try_claim(current_offset)" in reader
    record = inspect.getsource(tfrecordio._TFRecordUtil.read_record)
    assert record.count("file_handle.read(buf_length_expected)") == 2
    assert "crcmod.predefined.mkPredefinedCrcFun('crc-32c')" in inspect.getsource(tfrecordio._default_crc32c_fn)
    assert importlib.util.find_spec("snappy") is None  # so Beam checks every record with crcmod


class _Tracker:
    """A range tracker from 0 that records every claim."""

    def __init__(self):
        self.claims = []

    def start_position(self):
        return 0

    def try_claim(self, position):
        self.claims.append(position)
        return True


def _write_tfrecords(path, records, compression):
    import tensorflow as tf

    with tf.io.TFRecordWriter(path, options=compression or None) as writer:
        for record in records:
            writer.write(record)


def _records(seed=3):
    import random

    draw = random.Random(seed)
    sizes = [0, 1, 11, 12, 500, 70_000, *(draw.randrange(1, 3000) for _ in range(300))]
    return [bytes(draw.getrandbits(8) for _ in range(size)) for size in sizes]


@pytest.mark.parametrize("compression", ["GZIP", ""])
@pytest.mark.parametrize("block", [7, 4096, None])
def test_tfrecords_read_in_blocks_are_tensorflows_records_with_beams_claims(tmp_path, compression, block):
    import tensorflow as tf
    from apache_beam import coders
    from apache_beam.io import tfrecordio
    from apache_beam.io.filesystem import CompressionTypes

    from tfxflow.components.ingest.tf_example import masked_crc
    from tfxflow.pipeline import beam_speedups

    records = _records()
    path = str(tmp_path / ("data.gz" if compression else "data"))
    _write_tfrecords(path, records, compression)
    expected = [r.numpy() for r in tf.data.TFRecordDataset(path, compression_type=compression)]
    assert expected == records
    source = tfrecordio._TFRecordSource(path, coders.BytesCoder(), CompressionTypes.AUTO, validate=False)
    read = beam_speedups.tfrecords_in_blocks(masked_crc, *([block] if block else []))
    tracker = _Tracker()
    assert list(read(source, path, tracker)) == records
    # A claim before each record and one at the end, at the offsets Beam claims: 16 framing bytes a record.
    offsets = [0]
    for record in records:
        offsets.append(offsets[-1] + 16 + len(record))
    assert tracker.claims == offsets


def test_masked_crc_is_beams(tmp_path):
    from apache_beam.io import tfrecordio

    from tfxflow.components.ingest.tf_example import masked_crc

    for record in _records(seed=5)[:50]:
        assert masked_crc(record) == tfrecordio._TFRecordUtil._masked_crc32c(record)


@pytest.mark.parametrize(
    "damage",
    ["length", "length mask", "data", "data mask", "cut in the header", "cut in the data"],
)
def test_a_corrupt_tfrecord_file_raises_beams_error(tmp_path, damage):
    from apache_beam import coders
    from apache_beam.io import tfrecordio
    from apache_beam.io.filesystem import CompressionTypes

    from tfxflow.components.ingest.tf_example import masked_crc
    from tfxflow.pipeline import beam_speedups

    records = _records()[:20]
    path = str(tmp_path / "data")
    _write_tfrecords(path, records, "")
    with open(path, "rb") as f:
        data = bytearray(f.read())
    start = sum(16 + len(r) for r in records[:5])  # the sixth record (500 bytes)
    where = {"length": start, "length mask": start + 9, "data": start + 100, "data mask": start + 12 + 500 + 1}
    if damage in where:
        data[where[damage]] ^= 0x01
    else:
        data = data[: start + (5 if damage == "cut in the header" else 300)]
    with open(path, "wb") as f:
        f.write(bytes(data))

    def error_of(read):
        try:
            list(read())
        except ValueError as e:
            return str(e)
        return None

    def beams():
        with open(path, "rb") as handle:
            while tfrecordio._TFRecordUtil.read_record(handle) is not None:
                yield

    source = tfrecordio._TFRecordSource(path, coders.BytesCoder(), CompressionTypes.AUTO, validate=False)
    ours = beam_speedups.tfrecords_in_blocks(masked_crc, 64)
    expected = error_of(beams)
    assert expected and expected.startswith("Not a valid TFRecord.")
    assert error_of(lambda: ours(source, path, _Tracker())) == expected


@pytest.mark.integration
def test_beams_tfrecord_source_reads_in_blocks_once_applied(tmp_path):
    import apache_beam as beam
    from apache_beam.io import tfrecordio
    from apache_beam.testing.util import assert_that, equal_to

    from tfxflow.pipeline import beam_speedups

    records = _records()
    path = str(tmp_path / "data.tfrecord.gz")
    _write_tfrecords(path, records, "GZIP")
    beam_speedups.apply()
    assert getattr(getattr(tfrecordio, beam_speedups.TFRECORD_SOURCE).read_records, beam_speedups.MARK)
    with beam.Pipeline() as p:
        assert_that(p | beam.io.ReadFromTFRecord(str(tmp_path / "*.gz")), equal_to(records))


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

    from tfxflow.pipeline import beam_speedups

    original = pipeline_options.PipelineOptions.view_as
    original = getattr(original, "__wrapped__", original)  # Beam's, where an earlier test applied the speedups
    made = []

    def counted(self, cls):
        made.append(cls.__name__)
        return original(self, cls)

    memo = beam_speedups.views_memo(counted)
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
    from tfxflow.pipeline import beam_speedups

    beam_speedups.apply()
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

    out = {"marked": getattr(remembered, beam_speedups.MARK, False)}
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


def test_the_pinned_tfx_builds_an_sdist_of_itself_for_any_beam_arguments():
    """What speedup 7 removes for local workers: TFX's Beam executors call make_beam_dependency_flags for any
    non-empty arguments, and it builds an sdist unless a dependency option is set."""
    from tfx.dsl.components.base import base_beam_executor
    from tfx.utils import dependency_utils

    executor = inspect.getsource(base_beam_executor.BaseBeamExecutor.__init__)
    assert "if self._beam_pipeline_args:" in executor
    assert "dependency_utils.make_beam_dependency_flags(" in executor
    flags = inspect.getsource(dependency_utils.make_beam_dependency_flags)
    assert "sdist_file = build_ephemeral_package()" in flags


@pytest.mark.parametrize(
    "args, remote",
    [
        ([f"--runner={beam_runners.FN_API_RUNNER}"], False),
        (["--direct_running_mode=multi_processing", "--direct_num_workers=2"], False),
        (["--runner=PortableRunner", "--job_endpoint=embed", "--environment_type=LOOPBACK"], False),
        (["--runner=PortableRunner", "--job_endpoint=localhost:8099", "--environment_type=DOCKER"], True),
        (["--runner=FlinkRunner", "--flink_master=flink:8081"], True),
    ],
    ids=["in-process", "multi-processing", "loopback", "docker", "flink"],
)
def test_local_workers_keep_their_arguments_and_remote_ones_get_tfxs_flags(args, remote):
    calls = []

    def tfx_flags(given):
        calls.append(given)
        return given + ["--extra_package=/tmp/tfx.tar.gz"]

    out = beam_speedups.local_workers_keep_args(tfx_flags)(list(args))
    assert out == (args + ["--extra_package=/tmp/tfx.tar.gz"] if remote else args)
    assert calls == ([args] if remote else [])


SDIST_SCRIPT = textwrap.dedent(
    """
    import json, sys, time
    from tfx.dsl.components.base.base_beam_executor import BaseBeamExecutor
    from tfxflow.pipeline import beam_speedups

    class Executor(BaseBeamExecutor):
        def Do(self, input_dict, output_dict, exec_properties):
            pass

    def args():
        started = time.monotonic()
        made = Executor(BaseBeamExecutor.Context(beam_pipeline_args=[sys.argv[1]]))._beam_pipeline_args
        seconds = time.monotonic() - started
        return made[: made.index("--labels")] if "--labels" in made else made, seconds  # TFX's telemetry labels follow

    before = args()
    beam_speedups.apply()
    print(json.dumps({"before": before, "after": args()}))
    """
)


@pytest.mark.integration
def test_tfxs_beam_executor_builds_no_sdist_for_the_in_process_runner_once_applied():
    runner = f"--runner={beam_runners.FN_API_RUNNER}"
    done = subprocess.run([sys.executable, "-c", SDIST_SCRIPT, runner], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    (given, package), _ = found["before"]
    assert given == runner and package.startswith("--extra_package=") and package.endswith(".tar.gz")
    after, seconds = found["after"]
    assert after == [runner] and seconds < 0.5


def test_the_pinned_beam_waits_for_its_state_sampler_at_each_bundles_end():
    """What speedup 8 shortens: a bundle's end joins the sampler's thread, which sleeps up to its period."""
    import pathlib

    from apache_beam.runners.worker import bundle_processor, statesampler, statesampler_fast

    made = inspect.getsource(bundle_processor.BundleProcessor.__init__)
    assert "statesampler.StateSampler(\n        'fnapi-step-%s' % self.process_bundle_descriptor.id,\n" in made
    assert "self.counter_factory)" in made  # the default period: what apply() sets
    assert "self.state_sampler.stop_if_still_running()" in inspect.getsource(bundle_processor.BundleProcessor)
    assert statesampler.DEFAULT_SAMPLING_PERIOD_MS == 200
    init = statesampler.StateSampler.__init__
    assert list(inspect.signature(init).parameters) == ["self", "prefix", "counter_factory", "sampling_period_ms"]
    if not getattr(init, beam_speedups.MARK, False):  # not yet applied in this process
        assert init.__defaults__ == (200,)
    source = pathlib.Path(statesampler_fast.__file__).with_name("statesampler_fast.pyx").read_text()
    assert "usleep(<int>sampling_period_us)" in source
    assert "self.sampling_thread.join()" in source
    assert "max(1, sampling_period_ms // 100)" in source


def test_a_sampler_made_after_apply_still_samples_each_state():
    import time

    from apache_beam.runners.worker import statesampler
    from apache_beam.utils.counters import CounterFactory

    beam_speedups.apply()
    sampler = statesampler.StateSampler("step", CounterFactory())
    assert sampler.sampling_period_ms == beam_speedups.SAMPLER_PERIOD_MS
    busy = sampler.scoped_state("busy", "process")
    idle = sampler.scoped_state("idle", "process")
    spent = {}
    sampler.start()
    for state, seconds in ((busy, 0.3), (idle, 0.1)):
        started = time.monotonic()
        with state:
            time.sleep(seconds)
        spent[state] = time.monotonic() - started
    sampler.stop()
    # The time in each state as Beam's sampler counts it: what was spent there, to within a few of its periods.
    for state in (busy, idle):
        assert abs(state.sampled_seconds() - spent[state]) < 0.05, (state, spent[state])


def test_the_pinned_tfdv_walks_a_quantiles_histogram_to_make_each_equal_width_one():
    """What speedup 9 replaces: TFDV's loop over the proto's buckets, called through the module by name."""
    from tensorflow_data_validation.statistics.generators import basic_stats_generator
    from tensorflow_data_validation.utils import quantiles_util

    tfdv_own = inspect.unwrap(getattr(quantiles_util, beam_speedups.EQUI_WIDTH))
    assert tfdv_own.__module__ == quantiles_util.__name__
    source = inspect.getsource(tfdv_own)
    assert "generate_quantiles_histogram(quantiles, cumulative_counts)" in source
    assert "_overlap(" in source and "_strip_infinities(" in source
    # The helpers it calls, which speedup 9 calls as they are.
    assert all(callable(getattr(quantiles_util, name)) for name in beam_speedups.EQUI_WIDTH_PARTS)
    assert "_get_bin_weights(" in inspect.getsource(quantiles_util.generate_quantiles_histogram)
    calls = inspect.getsource(basic_stats_generator).replace("\n", "").replace(" ", "")
    assert calls.count("quantiles_util.generate_equi_width_histogram(") == 3


def _histogram_inputs(count=600, seed=0):
    """Quantiles as TFDV's generators hand them: sorted boundaries with ties, point masses, infinities, counts
    and weights, any number of buckets."""
    import numpy as np

    draw = np.random.default_rng(seed)
    for trial in range(count):
        kind = trial % 6
        if kind == 0:
            values = draw.normal(size=5000)
        elif kind == 1:
            values = draw.integers(0, 5, size=5000).astype(float)
        elif kind == 2:
            values = np.concatenate([draw.exponential(size=3000), np.zeros(2000)])
        elif kind == 3:
            values = np.concatenate(
                [draw.normal(size=3000), [np.inf] * draw.integers(0, 50), [-np.inf] * draw.integers(0, 50)]
            )
        elif kind == 4:
            values = np.full(100, 3.5)
        else:
            values = draw.integers(-3, 3, size=draw.integers(1, 40)).astype(float)
        size = int(draw.integers(2, 1002))
        quantiles = np.quantile(np.sort(values), np.linspace(0, 1, size), method="inverted_cdf")
        if kind == 3:
            quantiles = np.sort(np.where(draw.random(size) < 0.02, np.inf, quantiles))
        counts = np.sort(draw.random(size) * 1000 if trial % 2 else np.linspace(0, len(values), size).round())
        finite = values[np.isfinite(values)]
        positive_inf = float((values == np.inf).sum()) if trial % 3 else 0.0
        yield quantiles, counts, finite.min(), finite.max(), int(draw.integers(1, 25)), positive_inf


def _made(function, args):
    try:
        return function(*(a.copy() if hasattr(a, "copy") else a for a in args)).SerializeToString(deterministic=True)
    except (AssertionError, ValueError) as err:
        return type(err)


def test_equal_width_histograms_over_arrays_are_tfdvs_bucket_for_bucket():
    import numpy as np
    from tensorflow_data_validation.utils import quantiles_util

    tfdv_own = inspect.unwrap(getattr(quantiles_util, beam_speedups.EQUI_WIDTH))
    ours = beam_speedups.equi_width_over_arrays(quantiles_util, tfdv_own)
    cases = list(_histogram_inputs())
    # What TFDV refuses or handles on its own: unsorted or NaN boundaries, no finite value, one value.
    q = np.array([0.0, 1.0, 2.0])
    cases += [
        (np.array([2.0, 1.0, 3.0]), np.array([1.0, 2.0, 3.0]), 1.0, 3.0, 10, 0.0),
        (np.array([0.0, np.nan, 1.0]), np.array([1.0, 2.0, 3.0]), 0.0, 1.0, 10, 0.0),
        (np.array([np.inf, np.inf]), np.array([1.0, 4.0]), np.inf, -np.inf, 10, 4.0),
        (np.array([5.0, 5.0]), np.array([3.0, 3.0]), 5.0, 5.0, 10, 0.0),
        (q, np.array([0.0, 5.0, 9.0]), 0.0, 2.0, 1, 0.0),
        (q, np.array([0.0, 5.0, 9.0]), 0.0, 2.0, 200, 0.0),
    ]
    results = [(_made(tfdv_own, case), _made(ours, case)) for case in cases]
    assert all(theirs == mine for theirs, mine in results), [i for i, (a, b) in enumerate(results) if a != b]
    # Every case of TFDV's: a proto of several buckets, a refusal.
    assert sum(isinstance(a, bytes) for a, _ in results) >= 600 and AssertionError in {a for a, _ in results}


def test_statistics_of_the_taxi_data_are_tfdvs_with_histograms_over_arrays(monkeypatch):
    """Real data through TFDV's own generators, as StatisticsGen and the drift check compute them."""
    import pandas as pd
    import tensorflow_data_validation as tfdv
    from tensorflow_data_validation.utils import quantiles_util

    from tfxflow.components.validation import drift
    from tfxflow.pipeline.config import bundled_taxi_data_root

    frame = pd.read_csv(f"{bundled_taxi_data_root()}/data.csv").sample(3000, random_state=1)
    tfdv_own = inspect.unwrap(getattr(quantiles_util, beam_speedups.EQUI_WIDTH))
    made = {}
    ours = beam_speedups.equi_width_over_arrays(quantiles_util, tfdv_own)
    for name, function in (("tfdv", tfdv_own), ("ours", ours)):
        monkeypatch.setattr(quantiles_util, beam_speedups.EQUI_WIDTH, function)
        made[name] = tfdv.generate_statistics_from_dataframe(frame, drift.stats_options())
    assert made["ours"] == made["tfdv"]
    histograms = [h for f in made["ours"].datasets[0].features for h in f.num_stats.histograms if h.type == h.STANDARD]
    assert len(histograms) >= 8 and all(sum(b.sample_count for b in h.buckets) > 0 for h in histograms)


def test_the_pinned_beams_picklers_compress_each_payload_with_bz2_through_their_module():
    """What speedup 10 replaces: each pickler compresses through its module's `bz2` (unless asked for zlib, which
    Beam's coders are) and decompresses the same way."""
    import importlib

    found = 0
    for name in beam_speedups.PICKLERS:
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

    beam_speedups.apply()
    value = {"fn": _Holder, "values": list(range(1000)), "text": "payload " * 200}
    with beam_speedups.payloads_in_process(in_process):
        encoded = pickler.dumps(value)
    raw = base64.b64decode(encoded)
    assert raw.startswith(b"BZh") is not in_process
    assert raw[:1] == (b"\x78" if in_process else b"B")
    for inside in (True, False):  # read back in either state
        with beam_speedups.payloads_in_process(inside):
            assert pickler.loads(encoded) == value
    assert beam_speedups.PAYLOADS._in_process == 0  # every block left


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
    """What speedup 11 replaces, where Beam vendors cloudpickle (2.7x); Beam 2.59 pickles with dill, which does not
    search for submodules."""
    import importlib.util

    from apache_beam.internal import pickler

    if importlib.util.find_spec("apache_beam.internal.cloudpickle") is None:
        from apache_beam.internal import dill_pickler

        assert pickler.desired_pickle_lib is dill_pickler
        return
    cloudpickle = importlib.import_module(beam_speedups.VENDORED_CLOUDPICKLE)
    state = inspect.getsource(cloudpickle._function_getstate)
    assert 'slotstate["_cloudpickle_submodules"] = _find_imported_submodules(' in state
    original = getattr(cloudpickle, beam_speedups.SUBMODULES)
    search = inspect.getsource(getattr(original, "__wrapped__", original))
    if not getattr(original, beam_speedups.MARK, False):
        assert "for name in list(sys.modules):" in search
        assert 'tokens = set(name[len(prefix):].split("."))' in search


def _cloudpickles_search():
    """cloudpickle's own `_find_imported_submodules` (the installed package's, as Beam vendors it)."""
    import cloudpickle

    return cloudpickle.cloudpickle._find_imported_submodules


def test_indexed_submodules_are_cloudpickles_for_the_functions_of_the_loaded_modules():
    import tensorflow as tf  # noqa: F401 (some 10,000 modules, as in a run)

    original = _cloudpickles_search()
    find = beam_speedups.submodules_index()
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

    find = beam_speedups.submodules_index()
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


def test_the_pinned_tfx_inspects_the_preprocessing_fn_three_times_with_the_same_arguments():
    """What speedup 12 shares: TFX's Transform executor inspects the columns twice for the analysis and once for
    the transform, and each inspection traces the preprocessing_fn through impl_helper."""
    import tensorflow_transform as tft
    from tfx.components.transform import executor

    source = inspect.getsource(executor.TransformProcessor.Transform) + inspect.getsource(
        executor.TransformProcessor._RunBeamImpl
    )
    assert source.count("tft.get_analyze_input_columns(") == 2
    assert source.count("tft.get_transform_input_columns(") == 1
    inspections = importlib.import_module(beam_speedups.INSPECTIONS)
    for fn in (tft.get_analyze_input_columns, tft.get_transform_input_columns):
        assert fn.__module__ == beam_speedups.INSPECTIONS
        assert inspect.getsource(fn).count("impl_helper.trace_preprocessing_function(") == 1
    assert "impl_helper" in vars(inspections)


def _preprocessing_fn(inputs):
    import tensorflow_transform as tft

    return {"x_scaled": tft.scale_to_z_score(inputs["x"]), "y": inputs["y"] * 2, "z": inputs["z"]}


def test_inspections_read_one_trace_and_give_tf_transforms_columns():
    import tensorflow as tf
    from tensorflow_transform import impl_helper

    specs = {name: tf.TensorSpec([None], tf.float32) for name in ("x", "y", "z", "unused")}
    traced = []

    class Counting:
        def __getattr__(self, name):
            return getattr(impl_helper, name)

        def trace_preprocessing_function(self, *args, **kwargs):
            traced.append(args[0])
            return impl_helper.trace_preprocessing_function(*args, **kwargs)

    inspections = importlib.import_module(beam_speedups.INSPECTIONS)
    shared = beam_speedups.TraceReused(Counting())
    saved = inspections.impl_helper
    try:

        def columns(helper):
            inspections.impl_helper = helper
            return (
                sorted(inspections.get_analyze_input_columns(_preprocessing_fn, specs, force_tf_compat_v1=True)),
                sorted(inspections.get_analyze_input_columns(_preprocessing_fn, dict(specs), force_tf_compat_v1=True)),
                sorted(inspections.get_transform_input_columns(_preprocessing_fn, specs, force_tf_compat_v1=True)),
            )

        expected = columns(impl_helper)  # tf.Transform's own: three traces
        assert expected == (["x"], ["x"], ["x", "y", "z"])
        assert columns(shared) == expected
        assert traced == [_preprocessing_fn]  # one trace for the three
        columns(shared)
        assert len(traced) == 2  # a fourth inspection traces again
        other = {**specs, "unused": tf.TensorSpec([None], tf.int64)}
        inspections.impl_helper = shared
        inspections.get_transform_input_columns(_preprocessing_fn, other, force_tf_compat_v1=True)
        assert len(traced) == 3  # other arguments: another trace
    finally:
        inspections.impl_helper = saved
