"""A node's files come back over ssh as a tar stream: its log is copied into the run's log as it arrives, never
held whole, and a stream cut short gives its whole files only."""

from __future__ import annotations

import io
import tarfile

from dlperf.launch.ssh import unpack


def _tar(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return out.getvalue()


LOG = b"".join(b"line %d \xff\n" % i for i in range(300_000))  # 4 MB, a byte no UTF-8 decoder keeps


def test_the_log_is_copied_as_it_comes_and_the_result_returned(tmp_path):
    stream = io.BufferedReader(io.BytesIO(_tar({"result.json": b'{"ok": true}', "run.log": LOG})), 1 << 16)
    assert unpack(stream, tmp_path / "run.log") == '{"ok": true}'
    assert (tmp_path / "run.log").read_bytes() == LOG  # as the node wrote it
    assert [p.name for p in tmp_path.iterdir()] == ["run.log"]


def test_a_stream_cut_in_the_log_keeps_the_result_and_writes_no_cut_log(tmp_path):
    whole = _tar({"result.json": b'{"ok": true}', "run.log": LOG})
    assert unpack(io.BytesIO(whole[: len(whole) // 2]), tmp_path / "run.log") == '{"ok": true}'
    assert list(tmp_path.iterdir()) == []  # no log, and no temporary file left
