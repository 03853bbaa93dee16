"""``notebooks/per_sample_batch.py`` runs as documented (slow: it compiles a zoo model)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "notebooks" / "per_sample_batch.py"


@pytest.mark.slow
def test_the_example_serves_a_batch_equal_to_eager_per_sample(tmp_path):
    done = subprocess.run([sys.executable, "-W", "ignore", str(EXAMPLE), str(tmp_path)], capture_output=True,
                          text=True, timeout=600, check=True)
    error = float(re.search(r"eager per sample\| = (\S+)", done.stdout).group(1))
    assert error <= 1e-4, done.stdout
    sizes = [int(size) for size in re.findall(r"\d+: (\d+)", done.stdout.splitlines()[-1])]
    assert sizes[0] == 16 and min(sizes) < 16, done.stdout  # the batch shrinks as samples exit
    assert (tmp_path / "sdn_resnet56" / "host.py").is_file()
