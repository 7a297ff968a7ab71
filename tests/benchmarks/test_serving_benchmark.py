"""The batching parameters follow from the measured table as the benchmark's docstring says."""

from benchmarks import serving_benchmark


def _row(batch, p50_ms, per_s):
    return {"batch": batch, "p50_ms": p50_ms, "p99_ms": p50_ms * 2, "examples_per_s": per_s, "calls": 10}


def test_the_smallest_batch_within_ten_percent_of_the_best_and_a_lone_requests_latency():
    rows = [
        _row(1, 0.5, 2_000),
        _row(32, 1.0, 32_000),
        _row(128, 2.0, 91_000),
        _row(256, 3.0, 100_000),
        _row(512, 6.0, 95_000),
    ]
    parameters = serving_benchmark.derive(rows, cores=4)
    assert parameters == {
        "max_batch_size": 128,
        "batch_timeout_micros": 500,
        "num_batch_threads": 4,
        "max_enqueued_batches": 782,
    }  # 100,000 examples/s over batches of 128
    text = serving_benchmark.batching_text(parameters)
    assert text.splitlines() == [
        "max_batch_size { value: 128 }",
        "batch_timeout_micros { value: 500 }",
        "num_batch_threads { value: 4 }",
        "max_enqueued_batches { value: 782 }",
        "pad_variable_length_inputs: true",
    ]
