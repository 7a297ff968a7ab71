"""Costs of Beam (2.59 and 2.7x), TFX and TFDV that are not the pipeline's work, removed where this project runs Beam.

1. Beam's pickler turns dill's tracing off after every pickle and unpickle (`apache_beam/internal/dill_pickler.py`:
`dill.dill._trace(False)`), which sets the level of dill's logger; every Logger.setLevel clears the cache of
every logger of the process, and a pipeline run has thousands (TensorFlow, TFX, TFDV, TFMA): 8% of the samples
of a profile of Transform's in-process Beam job. Here the level is set only when it changes: what is pickled
and what dill logs are the same.

2. The in-process runner's state cache weighs every side input it loads with objsize
(`runners/worker/statecache.py`, get_deep_size), and objsize first collects the ids of the globals of every
loaded module (some 10,000 once TensorFlow is imported), at every call, so as not to count them: 27% of the
samples of Transform's job, against 2% for the weighing itself. Here those ids are collected again only when
the set of loaded modules has changed, and the same objsize traversal counts the same objects. (Turning the
cache off instead saved Transform 5 to 9 s on 2 cores but cost the Evaluator 5 s: TFMA reads its side inputs
again and again.)

3. Beam reads the signature of every method of a DoFn (`transforms/userstate.py`, get_dofn_specs, through
`typehints/decorators.py`' get_signature) each time it builds a pipeline or one of its operations: 12% of the
samples of Transform's job, most of it `inspect.signature` of the same methods again. Here the signature of a
function, or of a method bound to any object, is read once per function: a signature depends on the function
alone (its code, defaults and annotations), and Beam's own specializations (builtin method descriptors, types)
are left to Beam.

4. Beam reads every method of a DoFn (`transforms/userstate.py`, get_dofn_specs: `dir()`, then a MethodWrapper per
method) to find its state and timer parameters, again and again for the same DoFn: when the pipeline is built,
translated, checked and each time an operation runs it; 8,525 reads of 1,883 DoFns in a taxi run, 2.0 to 2.7 s.
Here the specs of a DoFn object are read once while it lives: they come from its methods' parameters, which
nothing changes once a DoFn is made. A DoFn that cannot be weakly referenced is read each time, as before.

5. Beam's TFRecord source (`io/tfrecordio.py`, `_TFRecordSource.read_records`, which StatisticsGen, Transform and
the Evaluator read examples through) reads each record with two small reads of its compressed-file wrapper (12
bytes, then the data) and checks both CRCs with crcmod (python-snappy, which Beam prefers, is not installed):
15.9 us a record of 506 bytes. Here records are cut from blocks of 1 MiB read through the same wrapper, and the
CRCs are google-crc32c's: 8.5 us. The same records, the same claims on the range tracker, Beam's errors for a
short or corrupt file.

6. Beam makes a new view of the pipeline options (`options/pipeline_options.py`, PipelineOptions.view_as: a new
argparse parser of the class's flags, then a parse of every flag) each time `Pipeline.apply` reads
`pipeline_type_check` (twice a transform: `apply` and `_infer_result_type`): 2 to 4 s of a taxi run's 316
transforms' building. Here a view is made once per options object and class and given again while the flags
and the shared values are the same objects with the same contents; a view holds nothing of its own (its
values live in the options' shared dict), so what a view reads and sets is what a new one would.

7. TFX's Beam executors (`tfx/dsl/components/base/base_beam_executor.py`) call
`dependency_utils.make_beam_dependency_flags` whenever the Beam arguments are not empty: unless a dependency
option is set, it runs `setup.py sdist` of the installed TFX in a subprocess (1.4 to 1.6 s a component on 2
cores) and adds `--extra_package=<sdist>` for remote workers to install. Workers of Beam's DirectRunner and its
in-process runner (named where Beam 2.7x would first fetch Prism, pipeline/beam_runners.py) and LOOPBACK workers
are this process or its children, with TFX already imported: there nothing would install the sdist, so the
arguments are left as given. Any other runner gets TFX's flags as before.

8. Each bundle's end waits for Beam's state sampler thread (`runners/worker/statesampler_fast.pyx`: `stop` joins a
thread that sleeps in steps growing from 2 ms to 200 ms, `sampling_period_ms`, between its samples of the time
spent in each step), so a bundle that ran for a second waits up to 200 ms more: 41 samples of 1,231 (0.8 s) of a
1x taxi run's main thread, across some 220 bundles. The in-process runner reports those times nowhere the
pipeline reads (TFX reads no Beam metric of them); here the steps grow from 1 ms to at most
`SAMPLER_PERIOD_MS`. The sampler samples as before, more often.

9. TFDV builds each numeric feature's equal-width histogram (`utils/quantiles_util.py`,
generate_equi_width_histogram) from a quantiles histogram of 1,000 buckets (`_NUM_QUANTILES_FACTOR_FOR_STD_HISTOGRAM`
x 10) made as a proto, bucket by bucket, then walked in Python for each of the 10 wide buckets: 44 samples of
StatisticsGen's 99 in a 1x taxi run (0.9 s for 31 features and splits). Here the same overlaps are computed over
arrays with the same arithmetic, each wide bucket's count summed in the same order, from TFDV's own bin weights
and infinities; input TFDV's own loop would refuse (a NaN bound) goes to TFDV's function. The protos are equal
to TFDV's, value for value.

10. Beam compresses each object it pickles into a pipeline (every DoFn, CombineFn and source with its arguments:
`internal/cloudpickle_pickler.py` and `dill_pickler.py`, `dumps`) with bz2 at its highest level, and decompresses
it each time it makes an operation of it: 0.7 s of a 1x taxi run's 2 cores (bz2's compress 0.53 s, decompress
0.16 s, on the 2.7x lane). Small payloads matter where they travel to remote workers and into the job's graph;
where the workers are this process (the DirectRunner in memory or in threads), `payloads_in_process` has them
stored in a zlib stream at level 0 (no compression: a taxi run pickles 3.4 MB in 2,319 payloads) while its block
runs. Beam's picklers read both, always: a bz2 stream starts with "BZh", a zlib stream never does. What is pickled,
and what an operation unpickles, is the same.

11. Beam's cloudpickle (`internal/cloudpickle/cloudpickle.py`, vendored since Beam 2.6x) finds the loaded
submodules a pickled function may reach through a package it refers to (`_find_imported_submodules`) by reading
the name of every loaded module, some 10,000 once TensorFlow is imported, for each package the function refers
to: 0.33 s of a 1x taxi run's main thread. Here the loaded modules are indexed by their packages once per set of
loaded modules, and each package's submodules are checked with cloudpickle's own rule, in sys.modules' order.
Beam 2.59 pickles with dill, which has no such search.

12. TFX's Transform executor asks tf.Transform which columns the analysis reads (`get_analyze_input_columns`,
twice) and which the transform reads (`get_transform_input_columns`), with the same arguments; each traces the
preprocessing_fn into a new graph (`impl_helper.trace_preprocessing_function`) and only reads it: 0.35 s a
trace in a 1x taxi run. Here the later inspections read the graph the first traced (the same function, equal
arguments), at most twice, and the graph is let go then.

`apply()` is called by this project's runners (the local runner and the Kubeflow step's entry point) before
they run TFX; tests/pipeline/test_beam_speedups.py checks the pinned Beam still does this and that pipelines
give the same results.
"""

from __future__ import annotations

import bz2
import contextlib
import importlib
import logging
import sys
import threading
import types
import zlib
from typing import Any, Callable, Iterator

TRACE = "_trace"  # dill's function that Beam's pickler calls after every pickle (dill.dill._trace)
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
MARK = "tfxflow_speedup"
TFRECORD_SOURCE = "_TFRecordSource"  # apache_beam.io.tfrecordio's source class, whose read_records is replaced
TFRECORD_BLOCK = 1 << 20  # bytes of a TFRecord file read at a time
# The longest step of Beam's state sampler, so the longest a bundle's end waits for it (Beam's: 200 ms). Its first
# step is a hundredth of this, at least 1 ms.
SAMPLER_PERIOD_MS = 5
EQUI_WIDTH = "generate_equi_width_histogram"  # TFDV's function in tensorflow_data_validation.utils.quantiles_util
# TFDV's helpers of that function, used as they are: its infinities stripped, its quantiles' bin weights.
EQUI_WIDTH_PARTS = ("_strip_infinities", "_get_bin_weights")
# Beam's picklers, which compress what they pickle through their module's `bz2`; the vendored cloudpickle whose
# submodule search is replaced (Beam 2.7x; Beam 2.59 has none).
PICKLERS = ("apache_beam.internal.cloudpickle_pickler", "apache_beam.internal.dill_pickler")
BZ2_MAGIC = b"BZh"
IN_PROCESS_LEVEL = 0  # zlib's level for payloads that stay in this process: stored as they are
VENDORED_CLOUDPICKLE = "apache_beam.internal.cloudpickle.cloudpickle"
SUBMODULES = "_find_imported_submodules"
INSPECTIONS = "tensorflow_transform.inspect_preprocessing_fn"  # its two functions read impl_helper's trace


def apply() -> None:
    """Applies the twelve (10 takes effect inside `payloads_in_process`); idempotent."""
    _set_dill_level_on_change()
    _weigh_without_collecting_module_globals_per_call()
    _read_each_functions_signature_once()
    _read_each_dofns_specs_once()
    _read_tfrecords_in_blocks()
    _make_each_options_view_once()
    _stage_no_sdist_for_local_workers()
    _stop_bundles_sooner()
    _merge_histograms_over_arrays()
    _compress_payloads_for_where_they_go()
    _index_loaded_submodules()
    _trace_once_for_the_inspections()


def _set_dill_level_on_change() -> None:
    import dill._dill as dill_module

    original = getattr(dill_module, TRACE)
    if getattr(original, MARK, False):
        return
    log = dill_module.log
    logger = getattr(log, "logger", log)  # dill 0.4 wraps its logger in an adapter, which has no level of its own

    def trace(boolean: bool) -> None:
        level = logging.INFO if boolean else logging.WARN
        if logger.level != level:
            log.setLevel(level)

    setattr(trace, MARK, True)
    trace.__doc__ = original.__doc__
    setattr(dill_module, TRACE, trace)


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
    import importlib

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
    import types
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


def _read_tfrecords_in_blocks() -> None:
    from apache_beam.io import tfrecordio

    from tfxflow.components.ingest.tf_example import masked_crc

    source = getattr(tfrecordio, TFRECORD_SOURCE)
    if getattr(source.read_records, MARK, False):
        return
    read_records = tfrecords_in_blocks(masked_crc)
    setattr(read_records, MARK, True)
    source.read_records = read_records


def tfrecords_in_blocks(masked_crc: Callable[[bytes], int], block: int = TFRECORD_BLOCK) -> Callable:
    """Beam's `_TFRecordSource.read_records`, with records cut from `block`-byte reads of the file and their CRCs
    checked by `masked_crc`. Each record's offset is claimed before it is read, as Beam does, and a short or
    corrupt file raises Beam's ValueError."""
    import codecs
    import struct

    unpack_from = struct.unpack_from

    def read_records(self, file_name, offset_range_tracker):
        if offset_range_tracker.start_position():
            raise ValueError("Start position not 0:%s" % offset_range_tracker.start_position())
        offset = offset_range_tracker.start_position()
        decode = self._coder.decode
        with self.open_file(file_name) as handle:
            buf, pos = b"", 0

            def fill(needed: int) -> None:
                """Reads until `needed` bytes from `pos` are held, or the file ends."""
                nonlocal buf, pos
                while len(buf) - pos < needed:
                    more = handle.read(max(block, needed - (len(buf) - pos)))
                    if not more:
                        return
                    buf, pos = buf[pos:] + more, 0

            while True:
                if not offset_range_tracker.try_claim(offset):
                    raise RuntimeError("Unable to claim position: %s" % offset)
                fill(12)
                if pos == len(buf):
                    return  # the end of the file
                if len(buf) - pos < 12:
                    raise ValueError("Not a valid TFRecord. Fewer than 12 bytes: %s" % codecs.encode(buf[pos:], "hex"))
                length, length_mask = unpack_from("<QI", buf, pos)
                if masked_crc(buf[pos : pos + 8]) != length_mask:
                    raise ValueError(
                        "Not a valid TFRecord. Mismatch of length mask: %s" % codecs.encode(buf[pos : pos + 12], "hex")
                    )
                pos += 12
                fill(length + 4)
                if len(buf) - pos < length + 4:
                    raise ValueError(
                        "Not a valid TFRecord. Fewer than %d bytes: %s" % (length + 4, codecs.encode(buf[pos:], "hex"))
                    )
                data = buf[pos : pos + length]
                if masked_crc(data) != unpack_from("<I", buf, pos + length)[0]:
                    raise ValueError(
                        "Not a valid TFRecord. Mismatch of data mask: %s"
                        % codecs.encode(buf[pos : pos + length + 4], "hex")
                    )
                pos += length + 4
                offset += 16 + length
                yield decode(data)

    return read_records


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


def _stage_no_sdist_for_local_workers() -> None:
    from tfx.utils import dependency_utils

    original = dependency_utils.make_beam_dependency_flags
    if getattr(original, MARK, False):
        return
    kept = local_workers_keep_args(original)
    setattr(kept, MARK, True)
    dependency_utils.make_beam_dependency_flags = kept


def local_workers_keep_args(make_flags: Callable[[list], list]) -> Callable[[list], list]:
    """`make_flags` (TFX's), except that arguments whose workers are this process or its children come back as
    given, with no sdist built."""
    import functools

    from tfxflow.pipeline.beam_runners import workers_are_remote_in

    @functools.wraps(make_flags)
    def kept(beam_pipeline_args: list) -> list:
        if not workers_are_remote_in(beam_pipeline_args):
            return beam_pipeline_args
        return make_flags(beam_pipeline_args)

    return kept


def _stop_bundles_sooner() -> None:
    from apache_beam.runners.worker import statesampler

    init = statesampler.StateSampler.__init__
    if getattr(init, MARK, False):
        return
    # Beam's bundle processor makes its samplers with the default period; nothing else in Beam changes.
    init.__defaults__ = (SAMPLER_PERIOD_MS,)
    setattr(init, MARK, True)


def _merge_histograms_over_arrays() -> None:
    from tensorflow_data_validation.utils import quantiles_util

    original = getattr(quantiles_util, EQUI_WIDTH)
    if getattr(original, MARK, False):
        return
    merged = equi_width_over_arrays(quantiles_util, original)
    setattr(merged, MARK, True)
    setattr(quantiles_util, EQUI_WIDTH, merged)


def equi_width_over_arrays(quantiles_util: Any, original: Callable) -> Callable:
    """TFDV's generate_equi_width_histogram (`original`, of the module `quantiles_util`) with its loop over the
    quantiles histogram's buckets done over arrays: TFDV's cases of `_overlap` in its order, each wide bucket's
    sum over the buckets TFDV's loop visits, left to right."""
    import functools

    import numpy as np
    from tensorflow_metadata.proto.v0 import statistics_pb2

    strip_infinities, bin_weights = (getattr(quantiles_util, name) for name in EQUI_WIDTH_PARTS)

    def merge(quantiles, cumulative_counts, finite_min, finite_max, num_buckets, num_pos_inf):
        """The histogram, or None where TFDV's own function decides (no finite value, a NaN, an overflow)."""
        if not (np.isfinite(finite_min) and np.isfinite(finite_max)) or np.isnan(quantiles).any():
            return None
        assert np.all(quantiles[:-1] <= quantiles[1:])
        stripped, cumulative, num_neg_inf = strip_infinities(quantiles, cumulative_counts, finite_max, num_pos_inf)
        if finite_min == finite_max:
            boundaries = np.array([finite_min, finite_max])
        else:
            boundaries = np.linspace(finite_min, finite_max, num_buckets + 1)
            if not np.isfinite(boundaries).all():
                return None
        lows, highs, weights = (np.asarray(a, dtype=np.float64) for a in bin_weights(stripped, cumulative))
        sums = []
        start = 0
        with np.errstate(all="ignore"):  # every case is computed for every bucket; only its own is kept
            width = highs - lows
            point = lows == highs
            for i in range(boundaries.size - 1):
                low, high = boundaries[i], boundaries[i + 1]
                at_low = point & (lows == low)
                precedes = (at_low if i else np.zeros_like(point)) | (~at_low & (highs < low))
                follows = ~at_low & ~precedes & (lows > high)
                inside = (low <= lows) & (high >= highs)
                overlap = np.select(
                    [at_low, precedes, follows, inside, low <= lows, high >= highs, (low > lows) & (high < highs)],
                    [
                        1.0 if i == 0 else 0.0,
                        0.0,
                        0.0,
                        1.0,
                        (high - lows) / width,
                        (highs - low) / width,
                        (high - low) / width,
                    ],
                    np.nan,
                )
                following = np.flatnonzero(follows[start:])
                end = start + following[0] if following.size else lows.size
                if np.isnan(overlap[start:end]).any():  # TFDV raises its error for these buckets
                    return None
                sums.append(np.cumsum(overlap[start:end] * weights[start:end])[-1] if end > start else 0)
                before = np.flatnonzero(precedes[start:end])
                if before.size:
                    start += before[-1]
        result = statistics_pb2.Histogram(type=statistics_pb2.Histogram.STANDARD)
        if num_neg_inf:
            result.buckets.add(low_value=float("-inf"), high_value=float("-inf"), sample_count=num_neg_inf)
        for i, count in enumerate(sums):
            result.buckets.add(low_value=boundaries[i], high_value=boundaries[i + 1], sample_count=count)
        if num_pos_inf:
            result.buckets.add(low_value=float("inf"), high_value=float("inf"), sample_count=num_pos_inf)
        return result

    @functools.wraps(original)
    def generate(quantiles, cumulative_counts, finite_min, finite_max, num_buckets, num_pos_inf):
        # TFDV's generators pass these by name.
        args = (quantiles, cumulative_counts, finite_min, finite_max, num_buckets, num_pos_inf)
        merged = merge(*args)
        return original(*args) if merged is None else merged

    return generate


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


def _trace_once_for_the_inspections() -> None:
    inspect_module = importlib.import_module(INSPECTIONS)
    if getattr(inspect_module.impl_helper, MARK, False):
        return
    inspect_module.impl_helper = TraceReused(inspect_module.impl_helper)


class TraceReused:
    """tf.Transform's `impl_helper` module as its inspections see it: `trace_preprocessing_function` called
    again with the same function and equal arguments gives the trace of the call before, up to `REUSES` times
    (the executor's inspections of one run); everything else is the module's."""

    REUSES = 2

    def __init__(self, module: types.ModuleType):
        self._module = module
        self._last: list = []
        setattr(self, MARK, True)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._module, name)

    def trace_preprocessing_function(self, preprocessing_fn, input_specs, use_tf_compat_v1, base_temp_dir=None):
        args = (input_specs, use_tf_compat_v1, base_temp_dir)
        last = self._last
        if last and last[0] is preprocessing_fn and _equal(last[1], args) and last[3] > 0:
            last[3] -= 1
            traced = last[2]
            if not last[3]:
                self._last = []
            return traced
        self._last = []  # the previous trace is not held while this one is made
        traced = self._module.trace_preprocessing_function(preprocessing_fn, *args)
        self._last = [preprocessing_fn, args, traced, self.REUSES]
        return traced


def _equal(a: Any, b: Any) -> bool:
    """a == b, False where the comparison cannot say (a feature spec's default value as an array)."""
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return False
