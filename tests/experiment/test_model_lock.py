"""The model lock of make test's workers: one holder at a time, and none outside a worker."""

from __future__ import annotations

from types import SimpleNamespace

import model_lock
import pytest


def request_of(tmp_path, *, worker: bool) -> SimpleNamespace:
    """A request whose lock lies in this test's own directory: the run's real lock is held by
    whichever worker is generating turns, and a test of the lock must not wait on it."""
    config = SimpleNamespace(workerinput={}) if worker else SimpleNamespace()
    factory = SimpleNamespace(getbasetemp=lambda: tmp_path / "basetemp")
    return SimpleNamespace(config=config, getfixturevalue=lambda _name: factory)


def test_a_second_worker_waits_for_the_first_and_gives_up_at_the_deadline(tmp_path, monkeypatch):
    monkeypatch.setattr(model_lock, "WAIT", 0.5)
    first, second = (request_of(tmp_path, worker=True) for _ in range(2))
    with (
        model_lock.one_model_at_a_time(first),
        pytest.raises(TimeoutError, match="the model lock"),
        model_lock.one_model_at_a_time(second),
    ):
        pass
    with model_lock.one_model_at_a_time(request_of(tmp_path, worker=True)):
        pass  # released: the next holder gets it at once


def test_outside_a_worker_nothing_is_locked(tmp_path, monkeypatch):
    monkeypatch.setattr(model_lock, "WAIT", 0.5)
    with (
        model_lock.one_model_at_a_time(request_of(tmp_path, worker=True)),
        model_lock.one_model_at_a_time(request_of(tmp_path, worker=False)),
    ):
        pass  # the pytest of a make check run never waits for its parent's lock


def test_a_check_started_by_a_worker_takes_the_lock_it_was_handed(tmp_path, monkeypatch):
    """The pytest of a ``make check`` run a worker starts is no worker: it takes the path from
    ENV, and so waits while a worker holds the lock."""
    monkeypatch.setattr(model_lock, "WAIT", 0.5)
    worker = request_of(tmp_path, worker=True)
    monkeypatch.setenv(model_lock.ENV, str(model_lock.lock_path(worker)))
    with (
        model_lock.one_model_at_a_time(worker),
        pytest.raises(TimeoutError, match="the model lock"),
        model_lock.one_model_at_a_time(request_of(tmp_path, worker=False)),
    ):
        pass
