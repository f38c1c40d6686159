"""Tests that pip-install an older release skip, with the reason, when the package index
cannot give it (no network), and fail on any other pip error or when CI says so."""

from __future__ import annotations

import pytest

from tests import conftest

UNREACHABLE = "http://127.0.0.1:9/simple"  # the discard port: connection refused


@pytest.fixture
def offline(monkeypatch, tmp_path):
    monkeypatch.setenv("BUFFERHOUSE_TEST_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PIP_INDEX_URL", UNREACHABLE)
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "")
    monkeypatch.setenv("PIP_FIND_LINKS", "")
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.delenv(conftest.NEED_INDEX, raising=False)
    return monkeypatch


def test_an_unreachable_index_skips_with_the_reason(offline, tmp_path):
    with pytest.raises(pytest.skip.Exception, match="the package index cannot give"):
        conftest.pip_target("bufferhouse-no-such-package==0.0.1", "no-such-package")
    assert not list((tmp_path / "cache").glob("*/.complete"))


def test_ci_fails_instead_of_skipping(offline):
    offline.setenv(conftest.NEED_INDEX, "1")
    with pytest.raises(pytest.fail.Exception, match="cannot pip install"):
        conftest.pip_target("bufferhouse-no-such-package==0.0.1", "no-such-package")


def test_another_pip_error_fails(monkeypatch, tmp_path):
    """A spec pip cannot even read is no network problem: the test fails."""
    monkeypatch.setenv("BUFFERHOUSE_TEST_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(conftest.NEED_INDEX, raising=False)
    with pytest.raises(pytest.fail.Exception, match="cannot pip install"):
        conftest.pip_target("not a requirement ===", "bad-spec")
