import json
import socket
import threading
import time

import pytest
import verifiers as vf
from datasets import Dataset
from gsm8k_course import GSM8KUnavailable, _raw_from_dir, load_gsm8k


@pytest.mark.parametrize("n", [None, 5])
def test_folder_matches_verifiers_loader(gsm8k_dir, monkeypatch, n):
    """load_gsm8k gives what vf.load_example_dataset gives for the same raw GSM8K rows."""
    raw = _raw_from_dir(gsm8k_dir, "test")
    monkeypatch.setattr("verifiers.utils.data_utils.load_dataset",
                        lambda *args, **kw: {"test": raw})
    expected = vf.load_example_dataset("gsm8k", "test", n=n, seed=3)
    ours = load_gsm8k("test", n=n, seed=3)
    assert ours.column_names == expected.column_names == ["question", "answer"]
    assert ours.to_list() == expected.to_list()


def test_hub_source_uses_openai_gsm8k(gsm8k_dir, monkeypatch):
    """The hub path asks datasets for openai/gsm8k 'main' and prepares it the same way."""
    raw = _raw_from_dir(gsm8k_dir, "train")
    asked = {}

    def fake_load_dataset(name, config, split):
        asked.update(name=name, config=config, split=split)
        return raw.add_column("extra", [0] * len(raw))

    monkeypatch.delenv("GSM8K_DIR")
    monkeypatch.setattr("gsm8k_course._hub_reachable", lambda timeout=3.0: True)
    monkeypatch.setattr("datasets.load_dataset", fake_load_dataset)
    hub = load_gsm8k("train", n=4)
    monkeypatch.setenv("GSM8K_DIR", str(gsm8k_dir))
    assert asked == {"name": "openai/gsm8k", "config": "main", "split": "train"}
    assert hub.to_list() == load_gsm8k("train", n=4).to_list()


def test_answers_are_numbers(gsm8k_dir):
    rows = load_gsm8k("test", n=20)
    assert all(r["answer"] and "####" not in r["answer"] for r in rows)


def test_offline_without_dir_fails_fast(monkeypatch, tmp_path):
    monkeypatch.delenv("GSM8K_DIR")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens: as offline as it gets
    monkeypatch.setattr("datasets.config.HF_DATASETS_CACHE", str(tmp_path))
    start = time.monotonic()
    with pytest.raises(GSM8KUnavailable, match="Set GSM8K_DIR"):
        load_gsm8k("test")
    assert time.monotonic() - start < 5


def test_missing_folder(tmp_path):
    with pytest.raises(GSM8KUnavailable, match="not a folder"):
        load_gsm8k("test", data_dir=tmp_path / "absent")


def test_missing_split(tmp_path):
    (tmp_path / "train.jsonl").write_text(json.dumps({"question": "q", "answer": "#### 1"}) + "\n")
    with pytest.raises(GSM8KUnavailable, match=r"test\.jsonl is missing"):
        load_gsm8k("test", data_dir=tmp_path)


def test_malformed_line_names_file_and_line(tmp_path):
    good = json.dumps({"question": "q", "answer": "#### 1"})
    (tmp_path / "test.jsonl").write_text(f"{good}\n{good}\n{{not json\n")
    with pytest.raises(GSM8KUnavailable, match=r"test\.jsonl, line 3"):
        load_gsm8k("test", data_dir=tmp_path)


def test_bad_split():
    with pytest.raises(ValueError, match="split must be one of"):
        load_gsm8k("validation")
    assert isinstance(load_gsm8k("test", n=2), Dataset)


@pytest.mark.parametrize("line, why", [
    ({"question": "How many?", "answer": "Six apples and then some."}, "####"),  # the gold would be the whole text
    ({"question": "How many?", "answer": "so #### many"}, "####"),
    ({"question": None, "answer": "#### 6"}, "question"),
    ({"question": "  ", "answer": "#### 6"}, "question"),
    ({"answer": "#### 6"}, "question"),
])
def test_a_record_without_a_usable_question_or_gold_answer_is_refused(tmp_path, line, why):
    good = json.dumps({"question": "q", "answer": "1 + 1 = 2\n#### 2"})
    (tmp_path / "test.jsonl").write_text(f"{good}\n{json.dumps(line)}\n")
    with pytest.raises(GSM8KUnavailable, match=rf"test\.jsonl, line 2: .*{why}"):
        load_gsm8k("test", data_dir=tmp_path)


def test_zero_examples_is_refused_not_taken_as_all(gsm8k_dir):
    with pytest.raises(ValueError, match="positive number of examples or -1"):
        load_gsm8k("test", n=0)


@pytest.mark.slow
def test_a_hub_that_never_answers_fails_fast_naming_gsm8k_dir(monkeypatch, tmp_path):
    """A proxy or captive portal that accepts connections and then says nothing."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    held = []
    threading.Thread(target=lambda: [held.append(silent.accept()) for _ in range(16)], daemon=True).start()
    monkeypatch.delenv("GSM8K_DIR")
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{silent.getsockname()[1]}")
    monkeypatch.setattr("datasets.config.HF_DATASETS_CACHE", str(tmp_path))
    start = time.monotonic()
    try:
        with pytest.raises(GSM8KUnavailable, match="GSM8K_DIR"):
            load_gsm8k("test")
    finally:
        silent.close()
    assert time.monotonic() - start < 15


# ----------------------------------------------------------------------------- all three GSM8K modules
# gsm8k-course, gsm8k-feedback and gsm8k-calculator load GSM8K through one loader (gsm8k_course's), so
# each refuses the same bad inputs with the same plain message.

GSM8K_MODULES = ["gsm8k-course", "gsm8k-feedback", "gsm8k-calculator"]


def test_the_three_modules_share_one_loader():
    import gsm8k_calculator
    import gsm8k_course
    import gsm8k_feedback

    for module, names in ((gsm8k_feedback, ("load_gsm8k", "canonical_number", "extract_hash_answer")),
                          (gsm8k_calculator, ("load_gsm8k", "extract_hash_answer", "correct_answer"))):
        for name in names:
            assert getattr(module, name) is getattr(gsm8k_course, name), f"{module.__name__}.{name}"


@pytest.mark.parametrize("env_id", GSM8K_MODULES)
def test_each_module_has_the_course_rows(env_id):
    env = vf.load_environment(env_id, num_examples=3, num_eval_examples=5, seed=2)
    assert env.eval_dataset["answer"] == load_gsm8k("test", n=5, seed=2)["answer"]
    assert env.dataset["answer"] == load_gsm8k("train", n=3, seed=2)["answer"]


@pytest.mark.parametrize("env_id", GSM8K_MODULES)
@pytest.mark.parametrize("value, says", [
    (0, "num_eval_examples must be a positive number"),  # verifiers would read 0 (and -5) as all 1,319 rows
    (-5, "num_eval_examples must be a positive number"),
    ("5", "num_eval_examples must be a positive number"),
    (2.5, "num_eval_examples must be a positive number"),
    (100000, "more than the 1319 rows"),
])
def test_each_module_refuses_a_bad_number_of_examples(env_id, value, says):
    with pytest.raises(RuntimeError, match=says):  # vf.load_environment wraps the module's ValueError
        vf.load_environment(env_id, num_examples=1, num_eval_examples=value)


@pytest.mark.parametrize("env_id", GSM8K_MODULES)
@pytest.mark.parametrize("line, why", [
    (json.dumps({"question": "How many?", "answer": "Six apples."}), "'####"),
    (json.dumps({"question": "How many?", "answer": "#### five"}), "'####"),
    (json.dumps({"question": "", "answer": "#### 6"}), "question"),
    (json.dumps({"question": "How many?"}), "KeyError: 'answer'"),
    ('{"question": "How many?", "answer": "#### 6"', "JSONDecodeError"),
])
def test_each_module_names_the_file_and_line_of_a_bad_record(env_id, line, why, tmp_path, monkeypatch):
    good = json.dumps({"question": "q", "answer": "1 + 1 = 2\n#### 2"})
    (tmp_path / "train.jsonl").write_text(f"{good}\n")
    (tmp_path / "test.jsonl").write_text(f"{good}\n{line}\n")
    monkeypatch.setenv("GSM8K_DIR", str(tmp_path))
    with pytest.raises(RuntimeError, match=rf"test\.jsonl, line 2: .*{why}"):
        vf.load_environment(env_id, num_examples=1, num_eval_examples=1)


@pytest.mark.parametrize("env_id", GSM8K_MODULES)
def test_each_module_offline_without_gsm8k_dir_fails_fast_naming_it(env_id, monkeypatch, tmp_path):
    monkeypatch.delenv("GSM8K_DIR")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens: as offline as it gets
    monkeypatch.setattr("datasets.config.HF_DATASETS_CACHE", str(tmp_path))
    start = time.monotonic()
    with pytest.raises(RuntimeError, match="Set GSM8K_DIR"):
        vf.load_environment(env_id, num_examples=1, num_eval_examples=1)
    assert time.monotonic() - start < 5
