"""Worker results come back as typed messages: `deliver` posts the result or the error, nothing for a
cancelled worker; a burst of progress messages is handled once, merged (rows are not lost)."""
from __future__ import annotations

import threading

from textual import on, work
from textual.app import App

from accuscope.app.messages import CompareRows, Done, deliver
from appkit import drive, wait_for


class Answer(Done):
    pass


class Probe(App):
    def __init__(self) -> None:
        super().__init__()
        self.answers: list[Answer] = []
        self.rows: list[CompareRows] = []
        self.started, self.release = threading.Event(), threading.Event()
        self.finished = threading.Event()

    @work(thread=True, exclusive=True, group="probe", exit_on_error=False)
    def ask(self, call) -> None:
        deliver(self, Answer, call)
        self.finished.set()

    @on(Answer)
    def answered(self, message: Answer) -> None:
        self.answers.append(message)

    @on(CompareRows)
    def got_rows(self, message: CompareRows) -> None:
        self.rows.append(message)


def fail():
    raise ValueError("unreadable.npy: not a numpy file")


def test_deliver_posts_the_result_or_the_error():
    async def script(pilot):
        app = pilot.app
        app.ask(lambda: 42)
        await wait_for(pilot, lambda: len(app.answers) == 1)
        app.ask(fail)
        await wait_for(pilot, lambda: len(app.answers) == 2)
        ok, failed = app.answers
        assert ok.result == 42 and ok.error is None
        assert failed.result is None and isinstance(failed.error, ValueError)
        assert "unreadable.npy" in str(failed.error)
    drive(Probe(), script)


def test_a_cancelled_worker_posts_nothing():
    async def script(pilot):
        app = pilot.app
        worker = app.ask(lambda: (app.started.set(), app.release.wait(), "late")[-1])
        await wait_for(pilot, app.started.is_set)
        worker.cancel()  # as a newer worker of its exclusive group does
        app.release.set()
        await wait_for(pilot, app.finished.is_set)
        await pilot.pause()
        assert app.answers == []
    drive(Probe(), script)


def test_a_burst_of_progress_is_handled_once_with_every_row():
    async def script(pilot):
        app = pilot.app
        for i in range(50):  # queued before the app's loop runs again: one burst
            app.post_message(CompareRows([(i, {})], i + 1, f"comparing {i + 1:,}/50"))
        await pilot.pause()
        assert len(app.rows) == 1
        merged = app.rows[0]
        assert [index for index, _ in merged.rows] == list(range(50))
        assert merged.done == 50 and merged.text == "comparing 50/50"
    drive(Probe(), script)
