import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED_GSM8K = ROOT.parent / "shared" / "data" / "gsm8k"

# Tests never reach the HF hub: GSM8K comes from GSM8K_DIR (CI points it at ../shared/data/gsm8k).
if not os.environ.get("GSM8K_DIR") and SHARED_GSM8K.is_dir():
    os.environ["GSM8K_DIR"] = str(SHARED_GSM8K)
# One conversion of the packaged GGUF to a transformers folder (~20 s) serves every test and kernel, whatever
# runs folder (COURSE_RUNS_DIR) each one makes; the project's own runs/ keeps it between sessions.
os.environ.setdefault("COURSE_MODELS_DIR", str(ROOT / "runs" / "models"))
# Training and the model servers use a fixed share of the cores: a 2-second CPU sample at a busy moment (another
# test's clean-up) must not halve the speed of a whole notebook run (helpers.grpo.backends.default_threads). With
# pytest-xdist (`bash scripts/test.sh -n 2`, opt-in) each worker gets its share, for torch (OMP_NUM_THREADS, read when
# torch loads) and for every llama.cpp server it starts: two servers spinning on the same cores fall under 1 token/s a
# slot.
WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
os.environ.setdefault("COURSE_THREADS", str(max(1, (os.cpu_count() or 1) // WORKERS)))
if WORKERS > 1:
    os.environ.setdefault("OMP_NUM_THREADS", os.environ["COURSE_THREADS"])
# Whatever the developer has exported, tests run the local default and never send keys anywhere.
for key in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL", "WANDB_API_KEY"):
    os.environ.pop(key, None)


@pytest.fixture(autouse=True)
def no_environment_leaks():
    """What a test (or a library it calls) writes into os.environ stays in that test. transformers'
    TrainingArguments writes ACCELERATE_MIXED_PRECISION=bf16 for a bf16 config and later CPU configs keep
    it: leaked, it made notebook 02's kernel train under emulated bfloat16, ~10x slower on an AVX2 CPU."""
    before = dict(os.environ)
    yield
    if dict(os.environ) != before:
        os.environ.clear()
        os.environ.update(before)


@pytest.fixture(scope="session")
def gsm8k_dir() -> Path:
    path = os.environ.get("GSM8K_DIR")
    if not path:
        pytest.fail("GSM8K_DIR is not set and ../shared/data/gsm8k does not exist")
    return Path(path)


@pytest.fixture(scope="session")
def local_server():
    """One real llama.cpp server (SmolLM2-135M) for the whole session, stopped at the end."""
    from helpers.serving.llama_server import LocalModelServer

    with LocalModelServer(parallel=4, startup_timeout_s=180) as server:  # generous on a busy runner
        yield server


@pytest.fixture(scope="session")
def local_client(local_server):
    import openai

    return openai.OpenAI(base_url=local_server.base_url, api_key=local_server.api_key)


@pytest.fixture
def uninstall_learner_module(tmp_path):
    """Notebook 03 installs the learner's module (editable) from COURSE_RUNS_DIR into .venv; undo it when that is
    ours. One such test at a time (a lock beside .venv): two xdist workers installing and removing the same
    module into one environment would break each other's run."""
    import fcntl

    with open(ROOT / ".venv" / ".learner-module.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield
        from helpers.notebook_runner import uninstall_learner_module as uninstall

        uninstall(tmp_path)


# The longest files first: pytest-xdist's --dist loadfile hands whole files to idle workers in this order, so the
# long ones start early instead of one of them running alone at the end (tests-<date>.json has each file's seconds).
LONGEST_FIRST = ("test_notebook_02.py", "test_notebook_04.py", "test_grpo.py", "test_hub.py", "test_browser.py",
                 "test_exercises.py", "test_notebook_03.py", "test_notebooks.py", "test_policy_server.py")


def pytest_collection_modifyitems(config, items):
    rank = {name: position for position, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: each file's own order is kept
