"""Does the local SmolLM2-135M call tools? Tool-call rate, valid-argument rate and accuracy on
GSM8K with and without the calculator tool, through verifiers' ToolEnv (`gsm8k-calculator`).

    .venv/bin/python scripts/bench_tool_calls.py [--num-examples 40] [--max-tokens 256]

The same GSM8K test questions (shuffle seed 0), temperature 0, one rollout each, up to 4 model
turns, in five set-ups:

  no tool                 `use_tool=False`: the baseline accuracy
  model's template        the tool offered (OpenAI `tools`), llama.cpp with SmolLM2's own chat
                          template, as notebook 03 runs it (llama.cpp: supports_tool_calls false)
  tool template           the server started with a tool-aware chat template (`<tool_call>` JSON,
                          as Qwen2.5/Hermes write it): llama.cpp then describes the tool in the
                          prompt and parses `<tool_call>` blocks into OpenAI tool_calls
  + worked example        the same, with one worked tool-call exchange before the question
  + tool_choice=required  the same, and llama.cpp's grammar does not let a turn end without a call

tool-call rate: rollouts with at least one tool call; valid-argument rate: calls the calculator
accepted (JSON arguments with an arithmetic `expression`); accuracy: the right number after '####'.
Each set-up's server is the course's own LocalModelServer (a child process, per-start key), with the
chat template of the set-up.
Writes benchmarks/results/tool_calls-<date>.json.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import verifiers as vf
import xllamacpp as xlc
from bench_results import machine_info, write_result
from gsm8k_calculator import SYSTEM_PROMPT

from helpers import quiet_library_logs
from helpers.evaluation import wilson_interval
from helpers.local.child_process import NO_PROXY_OPENER
from helpers.local.llama_server import LOCAL_MODEL_NAME, LocalModelServer
from helpers.local.paths import display_path, runs_dir

# A ChatML template with tool support, written after Qwen2.5's: tools listed in the system
# message, calls as <tool_call>{"name": ..., "arguments": {...}}</tool_call>, results as
# <tool_response> blocks. SmolLM2 was not trained on it: this asks whether the format alone helps.
TOOL_TEMPLATE = r"""
{%- if messages[0]['role'] == 'system' %}{%- set system = messages[0]['content'] %}{%- else %}{%- set system = 'You are a helpful AI assistant named SmolLM, trained by Hugging Face' %}{%- endif %}
{{- '<|im_start|>system\n' + system }}
{%- if tools %}
{{- "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
{%- for tool in tools %}{{- "\n" + (tool | tojson) }}{%- endfor %}
{{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>" }}
{%- endif %}
{{- '<|im_end|>\n' }}
{%- for message in messages %}
{%- if message.role == 'system' %}
{%- elif message.role == 'assistant' and message.tool_calls %}
{{- '<|im_start|>assistant' }}{%- if message.content %}{{- '\n' + message.content }}{%- endif %}
{%- for call in message.tool_calls %}{%- if call.function is defined %}{%- set call = call.function %}{%- endif %}
{{- '\n<tool_call>\n{"name": "' + call.name + '", "arguments": ' }}{%- if call.arguments is string %}{{- call.arguments }}{%- else %}{{- call.arguments | tojson }}{%- endif %}{{- '}\n</tool_call>' }}
{%- endfor %}
{{- '<|im_end|>\n' }}
{%- elif message.role == 'tool' %}
{%- if loop.index0 == 0 or messages[loop.index0 - 1].role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}
{{- '\n<tool_response>\n' + message.content + '\n</tool_response>' }}
{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\n' }}{%- endif %}
{%- else %}
{{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' }}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}
""".strip()

WORKED_EXAMPLE = [
    {"role": "user", "content": "Tom has 3 boxes with 12 apples each. He eats 5 apples. How many apples are left?"},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "call_0", "type": "function", "function": {
        "name": "calculate", "arguments": json.dumps({"expression": "3 * 12 - 5"})}}]},
    {"role": "tool", "tool_call_id": "call_0", "content": "31"},
    {"role": "assistant", "content": "3 boxes of 12 is 36 apples; 36 - 5 = 31.\n#### 31"},
]
SETUPS = {  # name: (use_tool, chat template, worked example, extra sampling args)
    "no tool": (False, None, False, {}),
    "model's template": (True, None, False, {}),
    "tool template": (True, TOOL_TEMPLATE, False, {}),
    "+ worked example": (True, TOOL_TEMPLATE, True, {}),
    "+ tool_choice=required": (True, TOOL_TEMPLATE, False, {"tool_choice": "required"}),
}


@contextlib.contextmanager
def stderr_to(path: Path) -> Iterator[None]:
    """verifiers' progress bars go to stderr: send them to a file, so the table stays readable."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(path, "ab") as log:
        os.dup2(log.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)


def template_caps(server: LocalModelServer) -> dict:
    import urllib.request

    request = urllib.request.Request(server.base_url.removesuffix("/v1") + "/props",
                                     headers={"Authorization": f"Bearer {server.api_key}"})
    with NO_PROXY_OPENER.open(request, timeout=10) as response:
        caps = json.load(response)["chat_template_caps"]
    return {k: caps[k] for k in ("supports_tools", "supports_tool_calls")}


def rollout_inputs(env: vf.ToolEnv, num_examples: int, worked_example: bool) -> dict:
    """The eval questions as plain lists (a datasets column would add null keys to the example's messages)."""
    rows = env.get_eval_dataset(n=num_examples)
    prompts = [list(p) for p in rows["prompt"]]
    if worked_example:  # the worked exchange goes between the system prompt and each question
        prompts = [[p[0], *WORKED_EXAMPLE, p[-1]] for p in prompts]
    return {"prompt": prompts, "answer": list(rows["answer"])}


def measure(name: str, env: vf.ToolEnv, inputs: dict, server: LocalModelServer, sampling: dict) -> dict:
    client = server.endpoint().client
    started = time.monotonic()
    out = env.generate(inputs, client, LOCAL_MODEL_NAME, sampling_args=sampling, max_concurrent=4)
    wall_s = time.monotonic() - started
    calls, valid = out.metrics["tool_calls"], out.metrics["valid_tool_calls"]
    correct = out.metrics["correct_answer"]
    low, high = wilson_interval(sum(correct), len(correct))
    calling = sum(c > 0 for c in calls)
    call_low, call_high = wilson_interval(calling, len(calls))
    example = next((c for c in out.completion if any(m.get("tool_calls") for m in c)), None)
    return {
        "setup": name, "rollouts": len(correct),
        "tool-call rate": calling / len(calls), "tool-call rate 95% CI": [round(call_low, 3), round(call_high, 3)],
        "tool calls": int(sum(calls)),
        "valid-argument rate": sum(valid) / sum(calls) if sum(calls) else None,
        "accuracy": sum(correct) / len(correct), "accuracy 95% CI": [round(low, 3), round(high, 3)],
        "'####' format": sum(out.metrics["hash_format"]) / len(correct),
        "turns per rollout": sum(s["turn"] for s in out.state) / len(out.state),
        "wall s": round(wall_s, 1),
        "first tool-calling completion": _printable(example),
    }


def _printable(completion) -> list | None:
    if completion is None:
        return None
    return [{**m, "tool_calls": [c.model_dump() if hasattr(c, "model_dump") else c for c in m["tool_calls"]]}
            if m.get("tool_calls") else m for m in completion]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num-examples", type=int, default=40, help="GSM8K test questions (1 rollout each)")
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--setups", nargs="*", default=list(SETUPS), choices=list(SETUPS))
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                        help="llama.cpp threads (fewer than the cores when other programs share them)")
    args = parser.parse_args()
    quiet_library_logs()
    info = machine_info()
    rows, caps = [], {}
    log = runs_dir("logs") / "bench_tool_calls.log"
    print(f"the progress bars: {display_path(log)}")
    for template in dict.fromkeys(SETUPS[name][1] for name in args.setups):  # one server per template
        with LocalModelServer(chat_template=template, threads=args.threads, parallel=4) as server:
            caps["tool template" if template else "model's template"] = template_caps(server)
            for name in args.setups:
                use_tool, setup_template, worked, extra = SETUPS[name]
                if setup_template != template:
                    continue
                sampling = {"max_tokens": args.max_tokens, "temperature": 0.0, **extra}
                env = vf.load_environment("gsm8k-calculator", use_tool=use_tool, num_examples=1,
                                          num_eval_examples=args.num_examples)
                inputs = rollout_inputs(env, args.num_examples, worked)
                with stderr_to(log):
                    rows.append(measure(name, env, inputs, server, sampling))
                print(f"{name}: done in {rows[-1]['wall s']} s", flush=True)
    print(f"\nSmolLM2-135M-Instruct (llama.cpp, xllamacpp {xlc.__version__}) on {args.num_examples} GSM8K test "
          f"questions, temperature 0, max_tokens {args.max_tokens}, up to 4 turns; {os.cpu_count()} cores\n")
    print(f"chat template capabilities (llama.cpp /props): {caps}\n")
    header = ["setup", "tool-call rate", "valid-argument rate", "accuracy", "turns per rollout", "wall s"]
    print(f"{header[0]:<24}" + "".join(f"{h:>20}" for h in header[1:]))
    for row in rows:
        cells = [_cell(h, row[h]) for h in header[1:]]
        print(f"{row['setup']:<24}" + "".join(f"{c:>20}" for c in cells))
    write_result("tool_calls", info, {
        "model": LOCAL_MODEL_NAME, "xllamacpp": xlc.__version__, "num_examples": args.num_examples,
        "sampling": {"max_tokens": args.max_tokens, "temperature": 0.0}, "max_turns": 4, "threads": args.threads,
        "system_prompt": SYSTEM_PROMPT, "chat_template_caps": caps, "setups": rows,
    })


def _cell(column: str, value) -> str:
    if value is None:
        return "n/a (no calls)"
    return f"{value:.1%}" if column.endswith(("rate", "accuracy")) else f"{value:.2f}".rstrip("0").rstrip(".")


if __name__ == "__main__":
    main()
