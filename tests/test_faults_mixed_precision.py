"""ACCELERATE_MIXED_PRECISION=no set by the learner after the course was imported (a cell's os.environ[...] = "no")
was overwritten with bf16 by the CPU settings, silently: it is followed now, and an explicit precision that
overrides it says so. transformers' leftover "bf16" and the course's own earlier "no" are not mistaken for it."""

import os
import warnings

import pytest

from helpers.grpo import backends as backend


@pytest.fixture
def bf16_cpu(monkeypatch):
    monkeypatch.setattr(backend, "cpu_has_bf16", lambda cpuinfo=None: True)
    monkeypatch.setattr(backend, "_LEARNERS_MIXED_PRECISION", None)  # nothing set before the import
    monkeypatch.setattr(backend, "_course_wrote", None)
    monkeypatch.delenv("ACCELERATE_MIXED_PRECISION", raising=False)


def test_a_no_set_after_import_is_followed(bf16_cpu, monkeypatch):
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "no")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert backend.device_settings("cpu")["bf16"] is False
    assert os.environ["ACCELERATE_MIXED_PRECISION"] == "no"


def test_an_explicit_bfloat16_over_the_learners_no_says_so(bf16_cpu, monkeypatch):
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "no")
    with pytest.warns(UserWarning, match="ACCELERATE_MIXED_PRECISION='no' .your environment. is replaced by 'bf16'"):
        assert backend.device_settings("cpu", precision="bfloat16")["bf16"] is True


def test_the_courses_own_no_and_transformers_bf16_are_not_the_learners(bf16_cpu, monkeypatch):
    assert backend.device_settings("cpu", precision="float32")["bf16"] is False  # the course writes "no"
    assert backend.device_settings("cpu")["bf16"] is True  # auto on a bf16 CPU: its own "no" is not followed
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "bf16")  # as transformers leaves it
    assert backend.learners_mixed_precision() is None
