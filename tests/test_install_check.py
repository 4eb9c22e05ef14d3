"""Notebook 00's install check: the hardware table names the backend notebook 02 will really pick."""

import pytest

from helpers import grpo, install_check


@pytest.mark.parametrize("gpus", [0, 1])
def test_the_hardware_table_names_the_backend_notebook_02_picks(monkeypatch, gpus):
    monkeypatch.setattr(install_check, "cuda_gpu_count", lambda: gpus)
    real_choose = grpo.choose_backend
    monkeypatch.setattr(grpo, "choose_backend", lambda backend="auto", **kw: real_choose(backend, gpus=gpus))
    shown = install_check.hardware_summary().loc["GRPO backend (auto)", "value"]
    assert shown.split()[0] == real_choose("auto", gpus=gpus), shown
