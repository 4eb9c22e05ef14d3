"""The course's GPU paths, checked in one command on a machine with a CUDA GPU (under 10 minutes), with
a result file: benchmarks/results/gpu-smoke-<date>.json (GPU name, memory, date, commit, each step's
outcome and figures). Until such a file exists, the notebooks say "not yet run on a GPU".

    python scripts/gpu_smoke.py                  # on a CUDA machine, GPU stack installed (requirements-gpu.txt)
    python scripts/gpu_smoke.py --dry-run        # on a CPU: every step it can, on the local SmolLM2-135M
    python scripts/gpu_smoke.py --steps 1,2      # only some steps

The steps, in order (a step that fails is recorded and the next one still runs; the exit code is 1
when any failed):

1. stop tokens and dtypes: Qwen3-0.6B-Base's tokenizer (its eos, the token its chat template ends a
   turn with, helpers.serving.hf_child.stop_token_ids), and 4 greedy generations in float16 and in
   float32: where each stopped, any NaN logits or "!!!" in the text;
2. the `gpu` backend: one GRPO step with notebook 02's one-GPU settings (helpers.grpo.gpu_plan.one_gpu_plan,
   LoRA, TRL's GRPOTrainer), `torch.cuda.max_memory_reserved()` beside the plan's estimate, the
   memory left after helpers.grpo.backends.release_trainer, and one request to the evaluation server;
3. with vLLM installed (and a GPU of compute capability 8.0+): two colocate steps, each weight sync
   (TRL's _move_model_to_vllm) timed;
4. with 2+ GPUs of 8.0+: the verifiers recipe (helpers.grpo.launcher: vf-vllm health, then one trainer
   step), then notebook 02's views (helpers.grpo.training_log) on its log.

--dry-run forces the device to the CPU and shrinks every setting: step 1 uses SmolLM2's tokenizer set
up as Qwen3-Base's is (eos <|endoftext|>, turns ending with <|im_end|>), step 2 trains one tiny step,
step 3 is skipped without vLLM, step 4 builds the plan and its checks and runs the views on step 2's
log. It writes its result to --out (never under benchmarks/results/). tests/test_gpu_smoke.py runs it.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from helpers.results import machine_info, write_result

PROMPTS = [  # two that end in a few tokens (where does the turn stop?), two GSM8K-like ones (long answers)
    "Answer with a single number: what is 2 + 2?",
    "Answer with a single number: how many days are there in a week?",
    "Tom has 3 boxes with 12 apples each. He gives away 10 apples. How many apples does he have left?",
    "Sara buys 4 pens at $1.25 each and a notebook for $3. How much does she spend?",
]
GIB = 2**30


def gpu_info() -> list[dict]:
    import torch

    if not torch.cuda.is_available():
        return []
    return [{"name": p.name, "memory_gib": round(p.total_memory / GIB, 2), "capability": f"{p.major}.{p.minor}"}
            for p in (torch.cuda.get_device_properties(i) for i in range(torch.cuda.device_count()))]


def versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name in ("torch", "transformers", "trl", "peft", "accelerate", "verifiers", "vllm", "deepspeed", "flash-attn"):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = None
    return found


class Smoke:
    def __init__(self, dry_run: bool, model: str | None, workdir: Path):
        import torch

        self.dry_run = dry_run
        self.device = "cpu" if dry_run else "cuda"
        if dry_run:  # on a shared CPU, threads fighting other programs for cores run several times slower
            from helpers.grpo.backends import default_threads

            torch.set_num_threads(default_threads())
        if not dry_run and not torch.cuda.is_available():
            raise SystemExit("gpu_smoke: no CUDA GPU here. On a CPU, run it with --dry-run.")
        self.workdir = workdir
        self.model_arg = model
        self.steps: dict[str, dict] = {}
        self.log_history: list[dict] = []

    # ------------------------------------------------------------------ models
    def model_dir(self) -> Path:
        """The one-GPU backend's model folder (Qwen3-0.6B-Base), or the local SmolLM2 on a dry run."""
        if self.model_arg:
            return Path(self.model_arg) if Path(self.model_arg).is_dir() else self._hub(self.model_arg)
        from helpers.grpo.backends import start_model

        return start_model("cpu" if self.dry_run else "gpu")

    def _hub(self, hub_id: str) -> Path:
        from huggingface_hub import snapshot_download

        from helpers.grpo.backends import MODEL_FILES

        return Path(snapshot_download(hub_id, allow_patterns=MODEL_FILES))

    def tokenizer(self, model_dir: Path):
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        # SmolLM2's tokenizer, set up as Qwen3-0.6B-Base's is: eos <|endoftext|>, turns end with <|im_end|>
        if self.dry_run:
            tokenizer.eos_token = "<|endoftext|>"
            folder = self.workdir / "qwen-like-tokenizer"
            tokenizer.save_pretrained(folder)
            tokenizer = AutoTokenizer.from_pretrained(folder)
        return tokenizer

    def capability(self) -> tuple[int, int]:
        import torch

        return (7, 5) if self.dry_run else tuple(torch.cuda.get_device_capability(0))

    def plan(self, vllm_installed: bool | None = None):
        from helpers.grpo.gpu_plan import one_gpu_plan

        if self.dry_run:  # what a 16 GB T4 would get
            return one_gpu_plan(memory_gib=14.57, capability=(7, 5), vllm_installed=False, gpu="dry run (as a T4)")
        return one_gpu_plan(vllm_installed=vllm_installed)

    # ------------------------------------------------------------------ steps
    def run(self, name: str, func) -> None:
        started = time.monotonic()
        print(f"\n== {name}", flush=True)
        try:
            result = func()
            status = "skipped" if isinstance(result, str) else "ok"
            record = {"status": status, **({"why": result} if status == "skipped" else result)}
        except Exception as e:  # noqa: BLE001 - a failing step is recorded; the next one still runs
            traceback.print_exc()
            record = {"status": "failed", "error": f"{type(e).__name__}: {e}"[:2000]}
        record["seconds"] = round(time.monotonic() - started, 1)
        self.steps[name] = record
        print(json.dumps(record, indent=1, default=str)[:3000], flush=True)

    def stop_tokens_and_dtypes(self) -> dict:
        import torch
        from transformers import AutoModelForCausalLM

        from helpers.serving.hf_child import stop_token_ids

        model_dir = self.model_dir()
        tokenizer = self.tokenizer(model_dir)
        tokenizer.padding_side = "left"
        stops = stop_token_ids(tokenizer)
        texts = [tokenizer.apply_chat_template([{"role": "user", "content": p}], tokenize=False,
                                               add_generation_prompt=True)
                 for p in PROMPTS]
        enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(self.device)
        result = {"model": str(model_dir.name), "eos_token": tokenizer.eos_token,
                  "stop_tokens": tokenizer.convert_ids_to_tokens(stops), "dtypes": {}}
        for dtype in ("float16", "float32"):
            model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=getattr(torch, dtype)).to(self.device).eval()
            with torch.no_grad():
                out = model.generate(**enc, max_new_tokens=24 if self.dry_run else 256, do_sample=False,
                                     eos_token_id=stops, pad_token_id=tokenizer.pad_token_id,
                                     output_scores=True, return_dict_in_generate=True)
            new = out.sequences[:, enc["input_ids"].shape[1]:].tolist()
            rows = []
            for ids in new:
                end = next((i for i, t in enumerate(ids) if t in stops), None)
                text = tokenizer.decode(ids[:end] if end is not None else ids, skip_special_tokens=True)
                stopped_at = tokenizer.convert_ids_to_tokens(ids[end]) if end is not None else "max_new_tokens"
                rows.append({"stopped_at": stopped_at,
                             "tokens": end if end is not None else len(ids), "has_!!!": "!!!" in text,
                             "text": text[:160]})
            result["dtypes"][dtype] = {"nan_logits": any(bool(torch.isnan(s).any()) for s in out.scores),
                                       "completions": rows}
            del model, out
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        return result

    def gpu_backend_step(self) -> dict:
        return self._train_steps(use_vllm=False)

    def vllm_colocate_steps(self) -> dict | str:
        import importlib.util

        if importlib.util.find_spec("vllm") is None:
            return "vllm is not installed (pip install -r requirements-gpu.txt)"
        if self.capability() < (8, 0):
            return "compute capability below 8.0: the plan keeps vLLM off (it would run Qwen in float16)"
        return self._train_steps(use_vllm=True)

    def _train_steps(self, use_vllm: bool) -> dict:
        import torch
        import verifiers as vf
        from transformers import AutoModelForCausalLM
        from trl import GRPOConfig, GRPOTrainer

        from helpers.grpo.backends import device_settings, lora_config, release_trainer
        from helpers.grpo.gpu_plan import eval_server_dtype
        from helpers.grpo.policy_server import CheckpointServer
        from helpers.grpo.rewards import RubricRewards
        from helpers.grpo.step_timer import StepTimer

        model_dir = self.model_dir()
        tokenizer = self.tokenizer(model_dir)
        plan = self.plan(vllm_installed=use_vllm)
        device = device_settings("gpu", tokenizer, capability=plan.capability, vllm_installed=use_vllm,
                                      memory_gib=plan.memory_gib)
        batch = {"per_device_train_batch_size": plan.per_device_train_batch_size, "max_completion_length": 512,
                 "num_generations": 4}
        if self.dry_run:  # the device forced to the CPU, tiny settings: the only changes from a GPU run
            device.update(use_cpu=True, bf16=False, fp16=False, gradient_accumulation_steps=1)
            batch = {"per_device_train_batch_size": 4, "max_completion_length": 8, "num_generations": 4}
        steps = 2 if use_vllm else 1
        env = vf.load_environment("gsm8k-course", variant="hash", num_examples=64, num_eval_examples=2)
        rewards = RubricRewards(env.rubric)
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
        config = GRPOConfig(output_dir=str(self.workdir / f"run-vllm-{use_vllm}"), max_steps=steps, learning_rate=5e-5,
                            temperature=0.9, beta=0.0, max_prompt_length=256, logging_steps=1, save_strategy="no",
                            report_to="none", reward_weights=rewards.weights, **batch, **device)
        trainer = GRPOTrainer(model=model, processing_class=tokenizer, args=config, reward_funcs=rewards.reward_funcs,
                              train_dataset=env.dataset.select_columns(["prompt", "answer"]),
                              peft_config=lora_config("gpu"))
        trainer.add_callback(StepTimer(trainer, rewards))
        syncs = []
        if use_vllm:
            move = trainer._move_model_to_vllm

            def timed_move():
                started = time.monotonic()
                move()
                syncs.append(round(time.monotonic() - started, 2))

            trainer._move_model_to_vllm = timed_move
        cuda = torch.cuda.is_available() and not self.dry_run
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        started = time.monotonic()
        trainer.train()
        train_s = time.monotonic() - started
        result = {"plan": str(plan), "plan_estimate_gib": {k: round(v, 2) for k, v in plan.estimate_gib.items()},
                  "settings": {**{k: v for k, v in device.items()}, **batch}, "steps": trainer.state.global_step,
                  "train_s": round(train_s, 1), "generation_eos_token_id": getattr(trainer, "generation_config", None)
                  and trainer.generation_config.eos_token_id,
                  "log": [{k: v for k, v in entry.items() if not isinstance(v, (list, dict))}
                          for entry in trainer.state.log_history]}
        if use_vllm:
            result["weight_syncs_s"] = syncs
        if cuda:
            result["max_memory_reserved_gib"] = round(torch.cuda.max_memory_reserved() / GIB, 2)
            result["max_memory_allocated_gib"] = round(torch.cuda.max_memory_allocated() / GIB, 2)
        self.log_history = trainer.state.log_history
        trained = release_trainer(trainer)
        result["optimizer_released"] = trainer.optimizer is None
        if cuda:
            result["memory_reserved_after_release_gib"] = round(torch.cuda.memory_reserved() / GIB, 2)
        if use_vllm:
            return result
        # the evaluation server on the trained weights, in the dtype the notebook gives it
        server_dtype = "float32" if self.dry_run else eval_server_dtype()
        with CheckpointServer(folder=self.workdir / "served", tokenizer=tokenizer, name="smoke", device=self.device,
                              dtype=server_dtype, max_batch=4) as server:
            server.sync(trained, step=trainer.state.global_step)
            endpoint = server.endpoint()
            reply = endpoint.client.chat.completions.create(
                model=endpoint.model, max_tokens=16 if self.dry_run else 256, temperature=0.0,
                messages=[{"role": "user", "content": PROMPTS[0]}])
        result["eval_server"] = {"dtype": server_dtype, "serves_step": server.step,
                                 "finish_reason": reply.choices[0].finish_reason,
                                 "completion_tokens": reply.usage.completion_tokens,
                                 "text": (reply.choices[0].message.content or "")[:160]}
        return result

    def verifiers_backend(self) -> dict | str:
        from helpers.grpo import launcher
        from helpers.grpo.training_log import learning_summary, metrics_table

        plan = launcher.build_plan(run_name="gpu-smoke", max_steps=1, num_generations=4, per_device_batch_size=4,
                                   max_tokens=256, num_train_examples=64, num_eval_examples=8,
                                   extra_args=["--gradient-accumulation-steps", "1", "--eval-steps", "1000"])
        checks = plan.checks() if not self.dry_run else plan.checks(gpus=0)
        result = {"plan": plan.shell(), "checks_failed": checks[~checks["ok"]]["found"].to_dict()}
        if self.dry_run:
            history = self.log_history
            result["views_on"] = "step 2's log (a dry run has no verifiers run)"
        else:
            if len(result["checks_failed"]):
                return f"the verifiers recipe cannot run here: {result['checks_failed']}"
            final_dir, history = launcher.train_with_verifiers(plan)
            result["final_dir"] = str(final_dir)
            result["views_on"] = "the verifiers trainer's log (trainer_state.json)"
        names = [k.split("/")[1] for entry in history for k in entry
                 if k.startswith("rewards/") and k != "rewards/errors"]
        metrics = metrics_table(history)
        result["metrics_columns"] = list(metrics.columns)
        result["learning"] = [learning_summary(metrics, column=c) for c in ["reward", *dict.fromkeys(names)]]
        if not history:
            raise RuntimeError("the run left no log history")
        return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="on the CPU, tiny settings, the local SmolLM2")
    parser.add_argument("--steps", default="1,2,3,4", help="which steps to run, e.g. 1,2")
    parser.add_argument("--model", help="a model folder or hub id instead of Qwen3-0.6B-Base (steps 1-3)")
    parser.add_argument("--out", help="where the result goes (a dry run's default: a temporary folder)")
    args = parser.parse_args(argv)
    info = machine_info()
    with tempfile.TemporaryDirectory(prefix="gpu-smoke-") as tmp:
        smoke = Smoke(args.dry_run, args.model, Path(tmp))
        wanted = {int(s) for s in args.steps.split(",")}
        for number, name, func in [(1, "1 stop tokens and dtypes", smoke.stop_tokens_and_dtypes),
                                   (2, "2 gpu backend: one GRPO step", smoke.gpu_backend_step),
                                   (3, "3 vLLM colocate: two steps with weight sync", smoke.vllm_colocate_steps),
                                   (4, "4 verifiers backend and notebook 02's views", smoke.verifiers_backend)]:
            if number in wanted:
                smoke.run(name, func)
    result = {"dry_run": args.dry_run, "gpus": gpu_info(), "versions": versions(), "steps": smoke.steps}
    if args.out or args.dry_run:
        out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="gpu-smoke-")) / "gpu-smoke.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"bench": "gpu-smoke", **info, **result}, indent=2, default=str) + "\n")
        print(f"\nresult written to {out}")
    else:
        write_result("gpu-smoke", info, result)
    failed = [name for name, step in smoke.steps.items() if step["status"] == "failed"]
    print(f"\n{len(smoke.steps) - len(failed)} of {len(smoke.steps)} steps passed or were skipped"
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
