"""The fake LLM shared by a test module (``llm``), emptied and released around each test (``fake``)."""

from __future__ import annotations

import pytest

from talaria_testing.fake_llm import FakeLLM


@pytest.fixture(scope="module")
def llm():
    with FakeLLM() as server:
        yield server


@pytest.fixture
def fake(llm):
    llm.reset()
    yield llm
    llm.release()
