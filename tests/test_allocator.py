"""securefg.allocator: the command's process reuses freed large buffers (fewer page faults)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

glibc_only = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")

# 20 buffers of 64 MB, each written and freed: above glibc's largest default mmap threshold
# (32 MB) every one is a fresh mapping, faulted in page by page.
_CHURN = """
import resource, sys
from securefg.allocator import keep_large_buffers
tuned = keep_large_buffers()
start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    buf = bytearray(64 << 20)
    buf[::4096] = b"x" * len(buf[::4096])
    del buf
print(tuned, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - start)
"""


def _churn(**env: str) -> tuple[str, int]:
    out = subprocess.run([sys.executable, "-c", _CHURN], env={**os.environ, **env}, check=True,
                         capture_output=True, text=True).stdout.split()
    return out[0], int(out[1])


@glibc_only
def test_freed_large_buffers_are_reused_instead_of_faulted_in_again():
    tuned, tuned_faults = _churn()
    untuned, system_faults = _churn(SECUREFG_ALLOCATOR="system")
    assert (tuned, untuned) == ("True", "False")
    pages = (64 << 20) // 4096
    assert system_faults >= 10 * pages  # every buffer faulted in again
    assert tuned_faults < 3 * pages  # the first one, then reused


def test_the_command_tunes_its_process_and_main_does_not(monkeypatch):
    import securefg.allocator
    import securefg.cli

    calls: list[int] = []
    monkeypatch.setattr(securefg.allocator, "keep_large_buffers", lambda: calls.append(1) or True)
    with pytest.raises(SystemExit):  # the real main, as tests call it: parses, never tunes
        securefg.cli.main(["--help"])
    assert calls == []
    monkeypatch.setattr(securefg.cli, "main", lambda argv=None: 0)
    assert securefg.cli.console_main() == 0
    assert calls == [1]
