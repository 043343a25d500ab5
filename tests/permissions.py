"""Making a test's subprocess obey file permissions, as a user's would (the tests may run as
root, for whom a mode of 000 or 555 changes nothing)."""

from __future__ import annotations

import os
import subprocess

import pytest

#: the prefix that drops root's override of file permissions (setpriv, util-linux)
NO_DAC = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search",
          "--inh-caps", "-dac_override,-dac_read_search", "--"]


def obeying_permissions() -> list[str]:
    """The command prefix that makes a subprocess obey file permissions: none for a user; as
    root, :data:`NO_DAC` (or the test is skipped where setpriv cannot drop the capability)."""
    if os.geteuid() != 0:
        return []
    try:
        ok = subprocess.run([*NO_DAC, "true"], capture_output=True).returncode == 0
    except OSError:
        ok = False
    if not ok:
        pytest.skip("running as root, and setpriv cannot drop CAP_DAC_OVERRIDE here")
    return NO_DAC
