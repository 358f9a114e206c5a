"""Shared fixtures: the loopback OpenAI-compatible server, readers scripted against it,
and the integration test doubles of tests/doubles.py."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from openai_server import Behaviour, FakeOpenAIServer
from tenacity import RetryCallState


class RecordingWait:
    """A wait strategy that never sleeps and records what it was asked.

    Attributes:
        retry_afters: The Retry-After (seconds, or None) of the error before each wait.
        errors: The exception that ended each failed attempt.
    """

    def __init__(self) -> None:
        self.retry_afters: list[float | None] = []
        self.errors: list[BaseException | None] = []

    def __call__(self, retry_state: RetryCallState) -> float:
        from gold_panning_integrations.readers._limits import retry_after

        self.retry_afters.append(retry_after(retry_state))
        self.errors.append(retry_state.outcome.exception() if retry_state.outcome else None)
        return 0.0


@pytest.fixture(autouse=True)
def _forget_endpoint_formats() -> Iterator[None]:
    """Each test starts with no remembered response formats: a loopback port may be reused."""
    from gold_panning_integrations.readers.openai import forget_endpoint_formats

    forget_endpoint_formats()
    yield
    forget_endpoint_formats()


@pytest.fixture
def openai_server() -> Iterator[FakeOpenAIServer]:
    """A fresh fault-injection server on 127.0.0.1 for one test (stopped afterwards)."""
    server = FakeOpenAIServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def recording_wait() -> RecordingWait:
    """A non-sleeping wait that records the Retry-After values it saw."""
    return RecordingWait()


@pytest.fixture
def scripted_reader(openai_server: FakeOpenAIServer) -> Callable[..., Any]:
    """Factory: ``scripted_reader(*behaviours, **reader_kwargs) -> OpenAIReader``.

    Queues the behaviours on ``openai_server`` and returns an ``OpenAIReader`` bound to
    it with no waiting between attempts (``wait=0``) and a 2 s timeout unless overridden.
    """
    from gold_panning_integrations.readers.openai import OpenAIReader

    def make(*behaviours: Behaviour, **kwargs: Any) -> OpenAIReader:
        openai_server.script(*behaviours)
        kwargs.setdefault("model", "fake-model")
        kwargs.setdefault("base_url", openai_server.base_url)
        kwargs.setdefault("api_key", "test-key")
        kwargs.setdefault("wait", 0)
        kwargs.setdefault("timeout", 2.0)
        return OpenAIReader(**kwargs)

    return make


# ------------------------------------------------------- integration test doubles
# The classes live in tests/doubles.py (one definition each); these fixtures hand
# out fresh instances.


@pytest.fixture
def list_retriever() -> Callable[..., Any]:
    """Factory: ``list_retriever(docs) -> ListRetriever`` (LangChain, returns ``docs`` in order)."""
    from doubles import ListRetriever

    return lambda docs: ListRetriever(docs=list(docs))


@pytest.fixture
def needle_reader() -> Any:
    """A fresh :class:`doubles.ScriptedReader`: cites the documents that contain "needle"."""
    from doubles import ScriptedReader

    return ScriptedReader()


@pytest.fixture
def unlabelled_warning_reset(monkeypatch: pytest.MonkeyPatch) -> None:
    """Re-arm the one-time "takes no 'labels' argument" warnings of the reader adapter."""
    from gold_panning_integrations.readers import _adapted

    monkeypatch.setattr(_adapted, "_WARNED", set())


@pytest.fixture
def generic_warning_reset(monkeypatch: pytest.MonkeyPatch) -> None:
    """Re-arm the one-time "using the generic profile" warning for this test."""
    from gold_panning_integrations import profiles

    monkeypatch.setattr(profiles, "_warned_generic", False)


SLOW_TEST_TIMEOUT = 3600
"""Seconds a ``slow`` test may run (pytest-timeout), unless it sets its own; every other
test has the suite's 900 (pyproject.toml)."""


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist's file, scope or group scheduling (the README's ``--dist
    loadfile``) a crashed worker is not replaced unless ``--max-worker-restart`` says so:
    replacing it can hang the whole run (pytest-xdist issues #784 and #1378). The crash is
    reported as the failure of the test that was running, and the run ends."""
    scoped = getattr(config.option, "dist", "no") in ("loadfile", "loadscope", "loadgroup")
    if scoped and getattr(config.option, "maxworkerrestart", "given") is None:
        config.option.maxworkerrestart = "0"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``slow`` tests get :data:`SLOW_TEST_TIMEOUT` seconds instead of the suite's 900."""
    if not config.pluginmanager.hasplugin("timeout"):
        return
    for item in items:
        if item.get_closest_marker("slow") is not None and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(SLOW_TEST_TIMEOUT))


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start ``mypy`` as soon as its test is selected, so it runs beside the rest of the
    suite on the second core (``test_code_quality.start``)."""
    if hasattr(session.config, "workerinput"):
        return  # a pytest-xdist worker: the workers already share the cores
    if any(item.nodeid.endswith("test_the_package_passes[mypy]") for item in session.items):
        import test_code_quality

        test_code_quality.start(test_code_quality.MYPY)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """A background check whose test did not run to the end (``-x``, Ctrl-C) is stopped."""
    quality = sys.modules.get("test_code_quality")
    for proc in getattr(quality, "_started", {}).values():
        if proc.poll() is None:
            proc.kill()
