"""pipeline/patches/patch.py: a patch is installed only at the library versions of its table; elsewhere it is
skipped with one log line naming the patch, the library and the installed version."""

import dataclasses
import logging

from tfxflow.pipeline.patches import beam, patch


def _counted(real: patch.Patch):
    installs = []
    return dataclasses.replace(real, install=lambda: installs.append(real.name)), installs


def _skip_lines(caplog):
    return [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]


def test_a_version_outside_the_table_skips_the_patch_with_one_log_line(monkeypatch, caplog):
    monkeypatch.setattr(patch, "_reported", set())
    signatures, installs = _counted(next(p for p in beam.PATCHES if p.name == "beam-signatures"))
    caplog.set_level(logging.INFO)
    newer = {"apache-beam": "2.71.0"}.get
    assert signatures.outside(newer) == ("apache-beam", "2.71.0")
    assert signatures.apply(newer) is False and signatures.apply(newer) is False
    assert installs == []
    assert _skip_lines(caplog) == [
        "tfxflow: patch beam-signatures skipped: apache-beam 2.71.0 is not a version it was checked against "
        "(2.59.0, 2.77.0)"
    ]


def test_a_library_that_is_not_installed_skips_the_patch(monkeypatch, caplog):
    monkeypatch.setattr(patch, "_reported", set())
    weigher, installs = _counted(next(p for p in beam.PATCHES if p.name == "beam-state-cache-weigher"))
    caplog.set_level(logging.INFO)
    # Beam at a checked version, objsize (the second library it reads) missing.
    assert weigher.apply({"apache-beam": "2.59.0"}.get) is False and installs == []
    assert _skip_lines(caplog) == [
        "tfxflow: patch beam-state-cache-weigher skipped: objsize (not installed) is not a version it was checked "
        "against (0.7.1)"
    ]


def test_a_checked_version_installs_the_patch_and_logs_nothing(monkeypatch, caplog):
    monkeypatch.setattr(patch, "_reported", set())
    signatures, installs = _counted(next(p for p in beam.PATCHES if p.name == "beam-signatures"))
    caplog.set_level(logging.INFO)
    for version in beam.BEAM:
        assert signatures.apply({"apache-beam": version}.get) is True
    assert installs == ["beam-signatures"] * len(beam.BEAM) and _skip_lines(caplog) == []


def test_installed_version_reads_the_distribution():
    import apache_beam

    assert patch.installed_version("apache-beam") == apache_beam.__version__
    assert patch.installed_version("tfxflow-no-such-distribution") == ""
