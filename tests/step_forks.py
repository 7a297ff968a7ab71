"""A fork server for the KFP harness's `python -m <module>` steps (tests/kfp_harness.py, `LocalKfp(fork_steps=...)`).

A step's process spends 10 to 15 s importing TensorFlow, TFX and Beam before its executor starts; a pipeline run has
about fourteen steps. This server imports them once, by running a warm-up command of the step's own module first
(the project's entry point has one: `--check-image` imports what every step names, after choosing Keras 2 as a step
does), and each step is a process forked from it that then runs the module as `python -m` would
(`runpy.run_module(..., run_name="__main__", alter_sys=True)`), with the pod's environment, working directory, argv
and output: the step's code from its `__main__` on is the same, in a new process. Modules a step names
(`--executor_class_path`) are imported here before the fork, so the same step of a later run starts with them. An
import that fails here is left to the step, which imports it again and fails with its own traceback in its own log,
as a fresh process would.

Run as `python -c <this file's source> MODULE ARG...` (not as a script: its folder would shadow installed packages):
it runs MODULE as `__main__` with the ARGs (its output goes to this server's stderr), answers `{"ready": ...}`, then
reads one JSON request per line on stdin, {"module", "argv", "env", "cwd", "out", "preload"}, and answers `{"pid":
N}` when the step starts and `{"exit": code}` when it ends (negative: the signal that ended it). It ends when stdin
closes. Nothing here imports the project's tests.
"""

import atexit
import importlib
import json
import os
import runpy
import sys
import traceback


def _exit_code(error: SystemExit) -> int:
    """The status `sys.exit(code)` gives a process, as the interpreter computes it."""
    if error.code is None:
        return 0
    if isinstance(error.code, int):
        return error.code & 0xFF
    print(error.code, file=sys.stderr)
    return 1


def _step(request: dict, control: tuple) -> None:
    """In the forked process: the request's process set-up, then its module as `__main__`; never returns."""
    code = 1
    try:
        for fd in control:
            os.close(fd)
        null = os.open(os.devnull, os.O_RDONLY)
        out = os.open(request["out"], os.O_WRONLY | os.O_APPEND)
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.close(null)
        os.close(out)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.path[0] = os.getcwd()  # `python -m` puts the working directory first
        sys.argv = [request["module"], *request["argv"]]
        try:
            runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as e:
            code = _exit_code(e)
        except BaseException:  # noqa: BLE001 (the interpreter prints any uncaught exception and exits 1)
            traceback.print_exc()
            code = 1
        atexit._run_exitfuncs()  # what the interpreter runs at exit; os._exit does not
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
    finally:
        os._exit(code)


def _preload(modules) -> int:
    failed = 0
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 (the step imports it again and reports its own error)
            failed += 1
    return failed


def _warm_up(argv) -> int:
    """Runs `python -m argv[0] argv[1:]` in this process; its exit status."""
    sys.argv = list(argv)
    try:
        runpy.run_module(argv[0], run_name="__main__", alter_sys=True)
    except SystemExit as e:
        return _exit_code(e)
    except Exception:  # noqa: BLE001 (reported; the steps then import what they need themselves)
        traceback.print_exc()
        return 1
    return 0


def serve(warm_up) -> None:
    # The control channel moves off fds 0 and 1, so that what imports print goes to the server's log (fd 2).
    requests, replies = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(2, 1)
    os.close(null)
    reader = os.fdopen(requests, "r", encoding="utf-8")

    def reply(message: dict) -> None:
        os.write(replies, (json.dumps(message) + "\n").encode())

    status = _warm_up(warm_up)
    reply({"ready": True, "warm_up": status, "modules": len(sys.modules)})
    for line in reader:
        request = json.loads(line)
        _preload(request.get("preload") or ())
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _step(request, (requests, replies))
        reply({"pid": pid})
        _, status = os.waitpid(pid, 0)
        reply({"exit": os.waitstatus_to_exitcode(status)})


if __name__ == "__main__":
    serve(sys.argv[1:])
