"""helpers.tracing.v1_bridge.read_run on files an editor or a hand touched: a UTF-8 BOM dropped the first episode
(json read it as "not JSON"), and a saved config that is a list or null was a bare AttributeError in log_run.

verifiers 0.4 lives in .venv-v1 (made by notebook 04's tests); here its few names read_run uses are stand-ins,
so the bridge's own reading is tested in the main environment, in milliseconds."""

import json
import sys
import types
import warnings
from types import SimpleNamespace

import pytest

from helpers.tracing import v1_bridge


@pytest.fixture
def v1_stand_ins(monkeypatch):
    """verifiers.v1's names that read_run imports: the episode as a namespace, a trace as it is."""
    modules = {
        "verifiers.v1": types.ModuleType("verifiers.v1"),
        "verifiers.v1.cli": types.ModuleType("verifiers.v1.cli"),
        "verifiers.v1.cli.output": types.ModuleType("verifiers.v1.cli.output"),
        "verifiers.v1.episode": types.ModuleType("verifiers.v1.episode"),
        "verifiers.v1.utils": types.ModuleType("verifiers.v1.utils"),
        "verifiers.v1.utils.trace_store": types.ModuleType("verifiers.v1.utils.trace_store"),
    }
    modules["verifiers.v1"].WireTrace = dict
    modules["verifiers.v1.cli.output"].saved_config_path = (
        lambda run_dir: run_dir / "config.json" if (run_dir / "config.json").is_file() else None)
    modules["verifiers.v1.episode"].WireEpisode = SimpleNamespace(model_validate=lambda row: SimpleNamespace(**row))
    modules["verifiers.v1.utils.trace_store"].TRACES_FILE = "traces.jsonl"
    modules["verifiers.v1.utils.trace_store"].type_adapter = lambda kind: SimpleNamespace(validate_python=lambda t: t)
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)


def _run(tmp_path, config: bytes | None, bom: bool = False):
    lines = "".join(json.dumps({"id": i, "traces": [{"n": i}]}) + "\n" for i in range(3)).encode()
    (tmp_path / "traces.jsonl").write_bytes((b"\xef\xbb\xbf" if bom else b"") + lines)
    if config is not None:
        (tmp_path / "config.json").write_bytes(config)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        config, episodes = v1_bridge.read_run(tmp_path)
    return config, episodes, [str(w.message) for w in caught]


def test_a_bom_keeps_the_first_episode_and_the_config(tmp_path, v1_stand_ins):
    config, episodes, said = _run(tmp_path, b"\xef\xbb\xbf" + json.dumps({"model": "m"}).encode(), bom=True)
    assert [e.id for e in episodes] == [0, 1, 2] and said == [], said
    assert config == {"model": "m"}


@pytest.mark.parametrize("saved", [b"[1, 2]", b"null", b'"text"'])
def test_a_saved_config_that_is_not_an_object_is_named_and_left_out(tmp_path, v1_stand_ins, saved):
    config, episodes, said = _run(tmp_path, saved)
    assert config == {} and len(episodes) == 3
    assert len(said) == 1 and "not a JSON object; the run's calls are written without it" in said[0], said


@pytest.mark.parametrize("config", [{"env": []}, {"env": {"taskset": None, "agent": {"harness": "null"}}}, {}])
def test_log_runs_config_fields_read_any_shape(config):
    """log_run's fields of the config: a level that is not an object gives None, not an AttributeError."""
    assert v1_bridge._at(config, "env", "taskset", "id") is None
    assert v1_bridge._at(config, "env", "agent", "harness", "id") is None
    assert v1_bridge._at({"env": {"taskset": {"id": "gsm8k"}}}, "env", "taskset", "id") == "gsm8k"
