"""Atomic writes: errors name the target, temporary files of killed runs are cleaned up carefully."""

from __future__ import annotations

import errno
import fcntl
import os
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rcdiag.cli import app
from rcdiag.io import writer
from rcdiag.io.writer import atomic_write
from tests.dumps import simple_columns, write_table

OLD = time.time() - 3600


def stale(path: Path, mtime: float = OLD) -> Path:
    path.write_text("half a document")
    os.utime(path, (mtime, mtime))
    return path


def test_a_write_error_names_the_target_not_the_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    with pytest.raises(OSError) as caught, atomic_write(target) as handle:
        handle.write("{")
        raise OSError(errno.ENOSPC, "No space left on device")  # as a full disk reports it
    assert caught.value.filename == str(target) and caught.value.errno == errno.ENOSPC
    assert list(tmp_path.iterdir()) == [], "no temporary file left"


def test_a_failed_rename_names_the_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "ro.json"

    def refuse(src: str, dst: object) -> None:
        raise PermissionError(errno.EPERM, "Operation not permitted", src)

    monkeypatch.setattr(writer.os, "replace", refuse)
    with pytest.raises(PermissionError) as caught, atomic_write(target) as handle:
        handle.write("{}")
    assert caught.value.filename == str(target)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_cli_reports_a_full_device_with_the_target(tmp_path: Path) -> None:
    dump = write_table(tmp_path / "d.parquet", simple_columns())
    result = CliRunner().invoke(app, ["analyze", str(dump), "--json", "/dev/full", "-q"])
    assert result.exit_code == 2
    assert result.stderr.strip() == "Error: /dev/full: cannot write (No space left on device)"


def test_stale_temporary_files_of_the_same_target_are_removed(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    removed = [
        stale(tmp_path / ".out.json.a1b2_c3d.tmp"),
        stale(tmp_path / ".out.json.zzzzzzzz.tmp"),
    ]
    kept = [
        stale(tmp_path / ".out.json.abc.tmp"),  # not a name this writer makes
        stale(tmp_path / ".other.json.a1b2c3d4.tmp"),  # another target
        stale(tmp_path / "out.json.a1b2c3d4.tmp"),
        stale(tmp_path / ".out.json.A1B2C3D4.tmp"),
        stale(tmp_path / ".out.json.a1b2c3d4.tmp", mtime=time.time() + 60),  # newer than this run
    ]
    link = tmp_path / ".out.json.linkxxxx.tmp"
    link.symlink_to(kept[0])
    os.utime(link, (OLD, OLD), follow_symlinks=False)
    busy = stale(tmp_path / ".out.json.busyxxxx.tmp")
    with busy.open() as held:  # a writer that is still running holds this lock
        fcntl.flock(held, fcntl.LOCK_EX)
        with atomic_write(target) as handle:
            handle.write("{}")
    assert target.read_text() == "{}"
    assert not any(p.exists() for p in removed)
    assert all(p.exists() for p in [*kept, busy]) and link.is_symlink()


def test_the_temporary_file_is_locked_while_written(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    with atomic_write(target) as handle:
        (temporary,) = tmp_path.glob(".out.json.*.tmp")
        os.utime(temporary, (OLD, OLD))  # even when it looks old
        assert writer.remove_stale_temporary_files(target) == []
        handle.write("{}")
    assert target.read_text() == "{}" and not list(tmp_path.glob(".*.tmp"))
