"""benchmarks/soak.py's verdict on hand-made curves, and its samples against /proc."""

import os

import pytest

from isaac_adapter.app.bench import soak


def curve(n=8, rss=lambda i: 800.0, files=lambda i: 7, time_s=lambda i: 0.5, tb=lambda i: 3.0 * i):
    return [{"iteration": 100 * i, "elapsed_s": 50.0 * i, "rss_mib": rss(i), "open_files": files(i), "threads": 3,
             "tensorboard_kib": tb(100 * i), "metrics_kib": 2.0 * 100 * i, "checkpoints": i // 5,
             "iteration_s": time_s(i)} for i in range(1, n + 1)]


def held(rows, **kw):
    return {line["quantity"]: line["held"] for line in soak.verdict(rows, **kw)}


def test_a_flat_curve_passes_every_line():
    assert all(held(curve()).values())
    assert set(held(curve())) == {"rss_mib", "iteration_s", "open_files", "threads", "tensorboard_kib per iteration",
                                  "metrics_kib per iteration"}


def test_leaks_and_slowdowns_fail_their_own_line():
    # samples 3-4 are the second quarter, 7-8 the last: RSS 800 -> 880 MiB is +10 % (tolerance 5 %)
    grows = held(curve(rss=lambda i: 800.0 + 20.0 * max(0, i - 3)))
    assert not grows["rss_mib"] and grows["iteration_s"]
    assert held(curve(rss=lambda i: 800.0 + 20.0 * max(0, i - 3)), rss_tolerance=0.15)["rss_mib"]
    assert not held(curve(files=lambda i: 7 + (i >= 7)))["open_files"]  # one descriptor more at the end
    assert not held(curve(time_s=lambda i: 0.5 if i < 6 else 0.6))["iteration_s"]  # +20 %
    # TensorBoard growing faster per iteration late in the run (a log that re-writes itself)
    assert not held(curve(tb=lambda it: 3.0 * it if it <= 500 else 1500 + 6.0 * (it - 500)))["tensorboard_kib per iteration"]


def test_a_verdict_needs_four_samples():
    with pytest.raises(ValueError, match="at least 4 samples"):
        soak.verdict(curve(n=3))


def test_samples_read_this_process():
    sample = soak.process_sample()
    r, w = os.pipe()
    try:
        assert soak.process_sample()["open_files"] == sample["open_files"] + 2
    finally:
        os.close(r)
        os.close(w)
    assert 10 < sample["rss_mib"] < 100_000 and sample["threads"] >= 1
