"""Progress reporting: silent by default, a bar on stderr when asked, a callback for one's own display."""

import sys

from ppo_bootstrap.progress import ProgressReporter


def count(progress, total=3):
    with ProgressReporter(total, "work", progress, unit="item") as bar:
        for _ in range(total or 3):
            bar.update()


def test_silent_unless_asked_or_on_a_terminal(capsys):
    count(False)
    count(None)  # pytest's captured stderr is no terminal
    assert capsys.readouterr().err == ""


def test_a_bar_on_stderr_when_asked(capsys):
    count(True)
    captured = capsys.readouterr()
    assert captured.out == "" and "work" in captured.err and "3/3" in captured.err


def test_a_plain_line_without_tqdm(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)  # as if not installed
    count(True)
    err = capsys.readouterr().err
    assert err.startswith("\rwork: 0/3 items") and "work: 3/3 items" in err and err.endswith("\n")
    count(True, total=None)  # work of unknown size
    assert "work: 3/? items" in capsys.readouterr().err


def test_callback_gets_done_and_total():
    calls = []
    count(lambda done, total: calls.append((done, total)))
    assert calls == [(1, 3), (2, 3), (3, 3)]
