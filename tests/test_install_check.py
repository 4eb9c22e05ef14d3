"""Notebook 00's install check: the hardware table names the backend notebook 02 will really pick, and says
what its training will do here (precision, minutes, memory, platform), on faked machines and result files."""

import json
import time

import pytest

from helpers import install_check, machine_speed
from helpers.grpo import backends
from helpers.machine_speed import matmul_gflops

CPUINFO_BF16 = "processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512_bf16\n"
CPUINFO_AVX2 = "processor\t: 0\nflags\t\t: fpu sse2 avx2\n"


@pytest.mark.parametrize(("gpus", "capabilities"),
                         [(0, []), (1, [(7, 5)]), (2, [(7, 5), (7, 5)]), (2, [(8, 0), (8, 0)])])
def test_the_hardware_table_names_the_backend_notebook_02_picks(monkeypatch, gpus, capabilities):
    """Notebook 02 picks with choose_backend("auto"); the table of notebook 00 must say the same."""
    monkeypatch.setattr(backends, "cuda_gpu_count", lambda: gpus)
    monkeypatch.setattr(backends, "gpu_capabilities", lambda: capabilities)
    shown = install_check.hardware_summary().data.loc["GRPO backend (auto)", "value"]
    assert shown.split()[0] == backends.choose_backend("auto"), shown
    assert install_check.hardware_summary().data.loc["CUDA GPUs", "value"] == str(gpus)


def test_setup_refuses_a_venv_with_another_verifiers_and_says_why(tmp_path):
    """A .venv whose pins look installed (its stamp matches) but that holds verifiers 0.4.0 is refused."""
    import shutil
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    course = tmp_path / "course"
    for part in ("scripts/setup_env.sh", "requirements.txt", "requirements.lock", "requirements-cuda.lock",
                 "requirements-nodeps.txt", "pyproject.toml",
                 *[str(p.relative_to(root)) for p in root.glob("environments/*/pyproject.toml")]):
        (course / part).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(root / part, course / part)
    fake_python = course / ".venv" / "bin" / "python"
    fake_python.parent.mkdir(parents=True)
    fake_python.write_text("#!/bin/sh\necho 0.4.0\n")
    fake_python.chmod(0o755)
    stamp = subprocess.run("cat requirements.lock requirements-cuda.lock requirements-nodeps.txt pyproject.toml"
                           " environments/*/pyproject.toml | sha256sum | cut -c1-16", shell=True, cwd=course,
                           capture_output=True, text=True,
                           check=True).stdout.strip()
    (course / ".venv" / f".installed-{stamp}").touch()
    result = subprocess.run(["bash", "scripts/setup_env.sh"], cwd=course, capture_output=True, text=True, check=False)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "verifiers 0.4.0" in result.stderr and "0.1.5.post0" in result.stderr and "verifiers.v1" in result.stderr


# ----------------------------------------------------------------------------- what notebook 02 will do here


def machine(**changes) -> install_check.Machine:
    """A Linux laptop with 2 GB to spare beyond the fake file's peak, no GPU, float32; `changes` fake the rest."""
    fields = {"system": "Linux", "arch": "x86_64", "cpuinfo": CPUINFO_AVX2, "available_gb": 8.0, "total_gb": 16.0}
    return install_check.Machine(**{**fields, **changes})


def result_file(folder, name, *, precision="bfloat16", sec_per_step=21.0, peak=6.0, speed=None):
    """A result file shaped like benchmarks/bench_notebooks.py's run of notebook 02: 36 steps."""
    run = {"notebook": "02_traced_grpo_training", "minutes": 20.0, "peak_kernel_and_servers_gb": peak,
           "grpo": {"steps": 36, "sec_per_step": sec_per_step, "train_minutes": 36 * sec_per_step / 60}}
    record = {"bench": "notebooks", "date": "2026-12-07T10:00:00+00:00", "cpu": "Test CPU", "cores": 2,
              "notebooks": [run], "solved": True, "parameters": {"precision": precision},
              **({"machine_speed": speed} if speed else {})}
    (folder / name).write_text(json.dumps(record))
    return name


@pytest.fixture
def files(tmp_path, monkeypatch):
    """machine_speed reads result files from tmp_path, and FILES names none until a test sets it."""
    monkeypatch.setattr(machine_speed, "RESULTS_DIR", tmp_path)
    monkeypatch.setattr(machine_speed, "FILES", {"bfloat16": None, "float32": None})
    return tmp_path


def no_benchmark(precision):
    raise AssertionError("a file without machine_speed must not start the benchmark")


def test_without_proc_cpuinfo_the_precision_is_float32_and_says_why():
    ok, text = install_check.notebook_02_precision(machine(system="Darwin", arch="arm64", cpuinfo=None))
    assert ok and text.startswith("float32: ") and "no /proc/cpuinfo on macOS (arm64)" in text, text
    assert install_check.notebook_02_precision(machine(cpuinfo=CPUINFO_BF16))[1].startswith(
        "bfloat16 autocast: this CPU has bfloat16 instructions (avx512_bf16)")
    assert "no bfloat16 instructions" in install_check.notebook_02_precision(machine())[1]


def test_a_file_without_machine_speed_gives_its_own_minutes_and_says_the_speed_here_is_unknown(files):
    machine_speed.FILES["float32"] = result_file(files, "f32.json", precision="float32")
    ok, text = install_check.notebook_02_minutes(machine(), measure=no_benchmark)
    assert ok and text.startswith("~13 min of training, as measured on 2 cores of a Test CPU (f32.json, 2026-12-07)")
    assert "36 steps x 21.0 s" in text and "speed against that one is unknown" in text, text


def test_a_file_with_machine_speed_scales_its_minutes_by_this_machines_benchmark(files):
    machine_speed.FILES["bfloat16"] = result_file(
        files, "bf16.json", speed={"matmul_gflops": {"float32": 50.0, "bfloat16": 100.0}, "threads": 2})
    asked = []
    ok, text = install_check.notebook_02_minutes(machine(cpuinfo=CPUINFO_BF16),
                                                 measure=lambda precision: asked.append(precision) or 40.0)
    assert asked == ["bfloat16"]
    # 36 x 21 s = 12.6 min there; this machine multiplies at 40 against 100 GFLOP/s: 2.5 times as long
    assert ok and text.startswith("~32 min of training: 36 steps x 21.0 s as measured on 2 cores of a Test CPU")
    assert "x 2.50 for this machine's bfloat16 matrix multiply (40 GFLOP/s here, 100 there)" in text, text


def test_a_record_from_machine_record_scales_minutes_with_a_real_benchmark(files):
    """The other end of the interface: what machine_record() writes into a result file is what the verdict reads.
    Measured twice on the same machine, the scale is near 1 (a loose bound: other programs share the cores)."""
    record = machine_speed.machine_record()
    assert set(record) == {"matmul_gflops", "threads"} and set(record["matmul_gflops"]) == {"float32", "bfloat16"}
    assert all(gflops > 0 for gflops in record["matmul_gflops"].values()) and record["threads"] >= 1
    machine_speed.FILES["float32"] = result_file(files, "f32.json", precision="float32", speed=record)
    text = install_check.notebook_02_minutes(machine())[1]
    scale = float(text.split(" x ")[2].split()[0])
    assert 0.2 < scale < 5, text


def test_a_precision_without_a_file_is_not_measured(files):
    ok, text = install_check.notebook_02_minutes(machine(), measure=no_benchmark)
    assert ok and text == "not measured: no result file of notebook 02's defaults in float32 yet", text
    machine_speed.FILES["bfloat16"] = result_file(files, "bf16.json")
    text = install_check.notebook_02_minutes(machine(), measure=no_benchmark)[1]
    assert text.endswith("yet (in bfloat16: ~13 min on 2 cores of a Test CPU (bf16.json, 2026-12-07))"), text


@pytest.mark.parametrize(("available_gb", "verdict", "ok"), [(4.0, "will not fit", False), (6.5, "tight", True),
                                                              (12.0, "fits", True)])
def test_the_memory_verdict_against_the_files_peak(files, available_gb, verdict, ok):
    machine_speed.FILES["float32"] = result_file(files, "f32.json", precision="float32")  # peak 6.0 GB
    fits, text = install_check.notebook_02_memory(machine(available_gb=available_gb))
    assert fits is ok and text.startswith(f"{verdict}: {available_gb:.1f} of 16.0 GB available; notebook 02 peaked "
                                          "at 6.0 GB resident, kernel and llama.cpp server together (f32.json)"), text
    if verdict == "will not fit":
        assert "instructor's trained run" in text and "hack_steps = 0" in text and "browser tabs" in text
        shown = install_check.hardware_summary(machine(available_gb=available_gb)).data
        assert shown.loc["notebook 02 memory", "value"] == text
    if verdict == "tight":
        assert "close other programs, kernels and browser tabs" in text


def test_the_memory_verdict_reads_its_own_precision_and_borrows_the_others_saying_so(files):
    """Each precision's own peak where its file exists; where not, the other precision's, named as such."""
    machine_speed.FILES["bfloat16"] = result_file(files, "bf16.json", peak=3.2)
    fits, text = install_check.notebook_02_memory(machine(available_gb=3.0))  # a float32 laptop, no float32 file
    assert not fits and "peaked at 3.2 GB resident, kernel and llama.cpp server together (in bfloat16, bf16.json; " \
                        "float32 not measured)" in text, text
    machine_speed.FILES["float32"] = result_file(files, "f32.json", precision="float32", peak=2.5)
    fits, text = install_check.notebook_02_memory(machine(available_gb=3.0))
    assert fits and "peaked at 2.5 GB resident, kernel and llama.cpp server together (f32.json)" in text, text
    assert install_check.notebook_02_memory(machine(available_gb=3.0, cpuinfo=CPUINFO_BF16))[0] is False
    machine_speed.FILES["float32"] = result_file(files, "f32.json", precision="float32", peak=None)  # no peak read
    assert "(in bfloat16, bf16.json; float32 not measured)" in install_check.notebook_02_memory(machine())[1]


def test_no_file_at_all_is_said_not_to_be_measured(files):
    assert install_check.notebook_02_memory(machine()) == (
        True, "not measured: 8.0 of 16.0 GB available; no result file records notebook 02's peak memory")
    machine_speed.FILES["float32"] = "gone.json"  # named, but not there
    assert install_check.notebook_02_minutes(machine(), measure=no_benchmark)[1].startswith("not measured")


@pytest.mark.parametrize(("capabilities", "precision"),
                         [([(8, 0)], "bfloat16 autocast"), ([(7, 5)], "float16 autocast"),
                                                         ([(8, 6), (8, 6)], "bfloat16 autocast")])
def test_a_gpu_is_said_not_to_have_run_the_course(capabilities, precision):
    gpu = machine(capabilities=capabilities)
    rows = install_check.hardware_summary(gpu).data["value"]
    assert rows["notebook 02 precision"].startswith(precision + ": "), rows["notebook 02 precision"]
    for row in ("notebook 02 precision", "notebook 02 training time", "notebook 02 memory"):
        assert "have not been run on a GPU yet" in rows[row], rows[row]
    assert rows["notebook 02 training time"].startswith("not measured: ")


@pytest.mark.parametrize(("changes", "words"), [
    ({"system": "Darwin", "arch": "arm64", "cpuinfo": None},
     "macOS (arm64): no result file was measured on macOS or Apple Silicon"),
    ({"system": "Darwin", "arch": "x86_64", "cpuinfo": None}, "no result file was measured on macOS;"),
    ({"system": "Windows", "arch": "AMD64", "cpuinfo": None}, "Windows: no result file was measured on Windows"),
    ({"container": "WSL2"}, "Linux under WSL2 (Linux on Windows)"),
    ({"container": "container"}, "Linux in a container (Docker or similar)"),
    ({}, "Linux x86_64: the course's result files record a Linux CPU"),
])
def test_the_platform_row_says_what_is_known_and_what_is_not(changes, words):
    ok, text = install_check.platform_known(machine(**changes))
    assert ok and words in text, text
    if changes.get("system") == "Windows":
        assert "WSL2" in text
    if changes.get("container"):
        assert "not whether" in text


def test_wsl2_and_containers_are_recognised_from_their_files(tmp_path):
    (tmp_path / "proc" / "1").mkdir(parents=True)
    assert install_check._container(tmp_path) is None
    (tmp_path / "proc" / "1" / "cgroup").write_text("0::/kubepods/burstable/pod1234\n")
    assert install_check._container(tmp_path) == "container"
    (tmp_path / "proc" / "version").write_text("Linux version 5.15.153.1-microsoft-standard-WSL2 ...\n")
    assert install_check._container(tmp_path) == "WSL2"


def test_a_containers_memory_limit_counts_and_no_limit_is_none(tmp_path):
    (tmp_path / "memory.max").write_text("max\n")
    (tmp_path / "memory.current").write_text(str(3 * 2**30))
    (tmp_path / "memory.stat").write_text(f"anon {2**30}\ninactive_file {2**29}\n")
    assert install_check._cgroup_memory_left(tmp_path) is None
    (tmp_path / "memory.max").write_text(str(4 * 2**30))  # 4 GB limit, 3 GB used of which 0.5 GB reclaimable cache
    assert install_check._cgroup_memory_left(tmp_path) == int(1.5 * 2**30)
    assert install_check._cgroup_memory_left(tmp_path / "nothing") is None


def test_the_files_behind_the_verdict_measured_notebook_02s_defaults():
    """FILES is the one place naming what backs each precision: each file must exist, be of that precision and of
    notebook 02's parameters cell (else notebook 00 would quote another design's minutes)."""
    import ast
    from pathlib import Path

    notebook = Path(__file__).resolve().parent.parent / "notebooks" / "02_traced_grpo_training.ipynb"
    cell = next(c for c in json.loads(notebook.read_text())["cells"] if "parameters" in c["metadata"].get("tags", []))
    defaults = {node.targets[0].id: ast.literal_eval(node.value) for node in ast.parse("".join(cell["source"])).body
                if isinstance(node, ast.Assign)}
    assert all(machine_speed.FILES.values()), "each precision of notebook 02's defaults has a result file"
    for precision, name in machine_speed.FILES.items():
        record = json.loads((machine_speed.RESULTS_DIR / name).read_text())
        assert record["bench"] == "notebooks" and record["solved"], name
        assert record["parameters"] == {"precision": precision}, f"{name} is not notebook 02's defaults"
        figures = machine_speed.measured(precision)
        assert figures.steps == defaults["max_steps"] and figures.sec_per_step > 0 and 0.5 < figures.peak_gb < 8, name
        assert figures.matmul_gflops > 0, f"{name} has no matrix-multiply benchmark: notebook 00 could not scale it"


# ----------------------------------------------------------------------------- the matrix-multiply benchmark


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_the_benchmark_is_quick_and_leaves_torchs_threads_as_they_were(dtype):
    import torch

    threads = torch.get_num_threads()
    started = time.monotonic()
    gflops = matmul_gflops(dtype, seconds=0.2, threads=1)
    assert 0 < gflops < 100_000 and time.monotonic() - started < 10
    assert torch.get_num_threads() == threads


def test_a_slow_multiply_stops_after_its_warm_up(monkeypatch):
    """Emulated bfloat16 (no bfloat16 instructions) can take longer than `seconds` for one product: then the
    warm-up is the measurement, and no second product runs."""
    import torch

    calls = []

    def slow(a, b):
        calls.append(1)
        time.sleep(0.3)
        return a

    monkeypatch.setattr(torch, "matmul", slow)
    gflops = matmul_gflops("bfloat16", seconds=0.1)
    assert len(calls) == 1
    rows, inner, cols = machine_speed.SHAPE
    assert gflops == pytest.approx(2 * rows * inner * cols / 0.3 / 1e9, rel=0.3)


@pytest.mark.parametrize(("kwargs", "words"), [({"dtype": "float16"}, "dtype must be one of ('float32', 'bfloat16')"),
                                               ({"seconds": 0}, "seconds must be above 0"),
                                               ({"threads": 0}, "threads must be a whole number")])
def test_the_benchmark_refuses_wrong_arguments_in_words(kwargs, words):
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
        matmul_gflops(**kwargs)
