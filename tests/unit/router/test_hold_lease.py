"""A hold is kept alive by the apply that holds it: renewed while it runs, gone when released, and no
one's once its lease lapses (the apply was killed), long before the hold's own bound."""

from __future__ import annotations

import re
import time

from aigo_apply.platforms.docker.hold_lease import LEASE_S, Leases, write_hold


def _fields(path):
    found = re.fullmatch(r"aigo-apply pid (\d+) until (\d+) lease (\d+)\n", path.read_text())
    assert found, path.read_text()
    return [int(x) for x in found.groups()]


def test_a_hold_is_written_with_its_bound_and_a_short_lease(tmp_path):
    leases = Leases(renew_s=0.05)
    path = tmp_path / "holds" / "models" / "chat"
    leases.hold(path, 1800)
    _, until, lease = _fields(path)
    now = time.time()
    assert until >= now + 1790 and now <= lease <= now + LEASE_S + 1 and lease < until
    leases.release(path)


def test_the_lease_is_renewed_while_held_and_the_file_goes_on_release(tmp_path):
    leases = Leases(renew_s=0.05)
    path = tmp_path / "chat"
    leases.hold(path, 600)
    write_hold(path, time.time() + 600, now=time.time() - 100)  # as if the lease were old
    deadline = time.monotonic() + 5
    while _fields(path)[2] < time.time():
        assert time.monotonic() < deadline, "the lease was not renewed"
        time.sleep(0.02)
    leases.release(path)
    time.sleep(0.2)
    assert not path.exists()  # and the renewer did not write it back
    assert leases.held() == []


def test_a_hold_removed_by_someone_else_stays_removed(tmp_path):
    leases = Leases(renew_s=0.05)
    path = tmp_path / "group"
    leases.hold(path, 600)
    path.unlink()
    time.sleep(0.3)
    assert not path.exists() and leases.held() == []


def test_no_half_written_file_is_ever_seen(tmp_path):
    path = tmp_path / "chat"
    write_hold(path, time.time() + 60)
    assert [p.name for p in tmp_path.iterdir()] == ["chat"]  # the temporary file was renamed in place
