"""The commit a benchmark's results JSON records is the checkout's, marked when tracked files differ from it."""

import os
import subprocess

from benchmarks import provenance

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_the_commit_is_the_checkouts_head():
    head = subprocess.run(["git", "-C", REPO, "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
    changed = subprocess.run(
        ["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    found = provenance.commit()
    assert found.split("+")[0] == head.stdout.strip()[:12]
    assert found.endswith("+changes") == bool(changed)


def test_a_failed_runs_error_is_its_line_that_names_the_error():
    from benchmarks.provenance import error_line

    stderr = (
        "W tensorflow: something\n"
        "tensorflow.python.framework.errors_impl.InvalidArgumentError: Detected unsupported operations\n"
        "\t [[while/body/_1/while/StatefulPartitionedCall]] [Op:__inference_train_function_13964]\n"
    )
    assert error_line(stderr).startswith("tensorflow.python.framework.errors_impl.InvalidArgumentError: Detected")
    assert error_line("only this\n") == "only this" and error_line("") == "failed"
