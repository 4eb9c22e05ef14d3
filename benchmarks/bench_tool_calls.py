"""Does the local SmolLM2-135M call tools? Tool-call rate, valid-argument rate, accuracy and turns
on GSM8K with and without the calculator tool, through `gsm8k-calculator`'s ToolEnv.

    .venv/bin/python benchmarks/bench_tool_calls.py [--num-examples 40] [--max-tokens 256] [--setups ...]

The same GSM8K test questions (shuffle seed 0), temperature 0, one rollout each, up to 4 model
turns, in the set-ups of SETUPS below: five through OpenAI tool calling (the server's chat template
turns `tools` into prompt text and the model's `<tool_call>` text into tool_calls) and four through
`tool_protocol="json"` (llama.cpp's grammar makes every reply one JSON object, a call or an answer;
the model chooses which and writes the expression; one of them without the grammar). Each set-up's description, in the
result file too, says what its grammar constrains.

tool-call rate: rollouts with at least one tool call; valid-argument rate: calls the calculator
accepted (an arithmetic expression it could compute); accuracy: the right number after '####'.
Each server is the course's own LocalModelServer (a child process, per-start key), with the chat
template of the set-up. The timings are not the result here: run it under `flock -s /tmp/course-cpu.lock`.
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

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]  # helpers; the scripts' shared arguments

import verifiers as vf
import xllamacpp as xlc
from arguments import whole_number
from gsm8k_calculator import SYSTEM_PROMPT

from helpers.evaluation import wilson_interval
from helpers.parameters import GSM8K_ROWS
from helpers.paths import display_path, runs_dir
from helpers.quiet import quiet_library_logs
from helpers.results import machine_info, write_result
from helpers.serving.child_process import NO_PROXY_OPENER
from helpers.serving.llama_server import LOCAL_MODEL_NAME, LocalModelServer

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
SETUPS = {  # name: (load_environment arguments, chat template, worked example, extra sampling args, what it is)
    "no tool": ({"use_tool": False}, None, False, {}, "the baseline accuracy: no tool offered"),
    "model's template": ({}, None, False, {}, (
        "the tool offered (OpenAI `tools`), llama.cpp with SmolLM2's own chat template, as notebook 03 "
        "runs it: supports_tool_calls false, so the tool is not described and nothing is parsed; no grammar")),
    "tool template": ({}, TOOL_TEMPLATE, False, {}, (
        "the server started with a tool-aware ChatML template (Qwen2.5/Hermes `<tool_call>` JSON): llama.cpp "
        "describes the tool in the prompt, parses `<tool_call>` blocks into tool_calls, and its lazy grammar "
        "constrains only what follows a `<tool_call>` the model writes itself")),
    "+ worked example": ({}, TOOL_TEMPLATE, True, {}, (
        "the same, with one worked tool-call exchange (rendered as `<tool_call>` by the template) before the "
        "question")),
    "+ tool_choice=required": ({}, TOOL_TEMPLATE, False, {"tool_choice": "required"}, (
        "the same as 'tool template', and llama.cpp's grammar does not let a turn end without a call "
        "(free text may come first)")),
    # the worked example of these three is the environment's own (gsm8k_calculator.JSON_WORKED_EXAMPLE)
    "JSON reply": ({"tool_protocol": "json", "worked_example": False}, None, False, {}, (
        "SmolLM2's own template, the protocol in the system prompt; `response_format` (a JSON schema) makes each "
        'reply {"tool_call": {"name": "calculate", "arguments": {"expression": <text <= 200 chars>}}} or '
        '{"response": <text <= 400 chars>}: the grammar fixes that form, the model chooses call or answer and '
        "writes the expression and the answer; gsm8k_calculator turns a call into an OpenAI tool call")),
    "JSON reply + worked example": ({"tool_protocol": "json"}, None, False, {}, (
        "the same, with one worked call-result-answer exchange in the same JSON form before the question")),
    "JSON reply + worked example, no grammar": ({"tool_protocol": "json", "grammar": False}, None, False, {}, (
        "the same prompt and worked example with no `response_format`: whether the model writes the JSON "
        "form by itself, i.e. how much of the tool use the grammar makes")),
    "JSON reply, strict form": ({"tool_protocol": "json-strict"}, None, False, {}, (
        "the same as the last, and the expression may use only the calculator's characters (digits, "
        "+ - * / % . ( ) and spaces), the response must be one line ending in '#### <number>' (its '####' "
        "format is the grammar's, not the model's)")),
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
    n = len(correct)
    calling = sum(c > 0 for c in calls)
    valid_rollouts = sum(v > 0 for v in valid)
    # a rollout answered when its last message is the model's reply without a call (not cut at max_turns)
    answered = sum(1 for c in out.completion if c and c[-1]["role"] == "assistant" and not c[-1].get("tool_calls"))
    example = next((c for c in out.completion if any(m.get("role") == "tool" for m in c)), None)
    return {
        "setup": name, "environment": type(env).__name__, "rollouts": n,
        "tool-call rate": calling / n, "tool-call rate 95% CI": _interval(calling, n),
        "tool calls": int(sum(calls)),
        "valid-argument rate": sum(valid) / sum(calls) if sum(calls) else None,
        "valid-argument rate 95% CI": _interval(sum(valid), int(sum(calls))) if sum(calls) else None,
        "rollouts with a valid call": valid_rollouts, "rollouts with a valid call 95% CI": _interval(valid_rollouts, n),
        "accuracy": sum(correct) / n, "accuracy 95% CI": _interval(sum(correct), n),
        "'####' format": sum(out.metrics["hash_format"]) / n,
        "answered within max_turns": answered / n,
        "turns per rollout": sum(s["turn"] for s in out.state) / len(out.state),
        "wall s": round(wall_s, 1),
        "first completion with a tool result": _printable(example),
    }


def _interval(successes: float, n: int) -> list[float]:
    low, high = wilson_interval(successes, n)
    return [round(low, 3), round(high, 3)]


def _printable(completion) -> list | None:
    if completion is None:
        return None
    return [{**m, "tool_calls": [c.model_dump() if hasattr(c, "model_dump") else c for c in m["tool_calls"]]}
            if m.get("tool_calls") else m for m in completion]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num-examples", type=whole_number(1, GSM8K_ROWS["test"], "GSM8K test problems"),
                        default=40, help="GSM8K test questions (1 rollout each)")
    parser.add_argument("--max-tokens", type=whole_number(1), default=256)
    parser.add_argument("--setups", nargs="*", default=list(SETUPS), choices=list(SETUPS))
    parser.add_argument("--threads", type=whole_number(1), default=os.cpu_count() or 1,
                        help="llama.cpp threads (fewer than the cores when other programs share them)")
    parser.add_argument("--earlier", metavar="RESULT_FILE",
                        help="an earlier result of this bench (same questions and settings) whose set-ups this run "
                             "does not repeat: its rows are listed, marked with that file, beside this run's")
    args = parser.parse_args()
    quiet_library_logs()
    info = machine_info()
    rows, caps = [], {}
    earlier = _earlier_rows(Path(args.earlier), args.setups) if args.earlier else []

    def save() -> None:  # after every set-up: a stopped run keeps what it measured
        write_result("tool_calls", info, {
            "model": LOCAL_MODEL_NAME, "xllamacpp": xlc.__version__, "num_examples": args.num_examples,
            "sampling": {"max_tokens": args.max_tokens, "temperature": 0.0}, "max_turns": 4,
            "threads": args.threads, "system_prompt": SYSTEM_PROMPT, "chat_template_caps": caps,
            "setup descriptions": {name: SETUPS[name][4] for name in [*(r["setup"] for r in earlier), *args.setups]},
            "complete": len(rows) == len(args.setups),
            "setups": rows, "earlier setups": earlier,
        })

    log = runs_dir("logs") / "bench_tool_calls.log"
    print(f"the progress bars: {display_path(log)}")
    for template in dict.fromkeys(SETUPS[name][1] for name in args.setups):  # one server per template
        with LocalModelServer(chat_template=template, threads=args.threads, parallel=4) as server:
            caps["tool template" if template else "model's template"] = template_caps(server)
            for name in args.setups:
                env_args, setup_template, worked, extra, _ = SETUPS[name]
                if setup_template != template:
                    continue
                sampling = {"max_tokens": args.max_tokens, "temperature": 0.0, **extra}
                env = vf.load_environment("gsm8k-calculator", **env_args, num_examples=1,
                                          num_eval_examples=args.num_examples)
                inputs = rollout_inputs(env, args.num_examples, worked)
                with stderr_to(log):
                    rows.append(measure(name, env, inputs, server, sampling))
                rows[-1].update({"load_environment arguments": env_args, "system prompt": env.system_prompt,
                                 "reply schema": getattr(env, "reply_schema", None)})
                print(f"{name}: done in {rows[-1]['wall s']} s", flush=True)
                save()
    print(f"\nSmolLM2-135M-Instruct (llama.cpp, xllamacpp {xlc.__version__}) on {args.num_examples} GSM8K test "
          f"questions, temperature 0, max_tokens {args.max_tokens}, up to 4 turns; {os.cpu_count()} cores\n")
    print(f"chat template capabilities (llama.cpp /props): {caps}\n")
    header = ["setup", "tool-call rate", "valid-argument rate", "accuracy", "'####' format", "turns per rollout",
              "wall s"]
    print(f"{header[0]:<40}" + "".join(f"{h:>20}" for h in header[1:]))
    for row in [*earlier, *rows]:
        cells = [_cell(h, row.get(h)) for h in header[1:]]
        label = row["setup"] + (f" ({row['measured in']})" if "measured in" in row else "")
        print(f"{label:<40}" + "".join(f"{c:>20}" for c in cells))


def _earlier_rows(path: Path, setups: list[str]) -> list[dict]:
    """The set-ups of an earlier result file that this run does not measure again, marked with it."""
    earlier = json.loads(path.read_text())
    rows = [{**row, "measured in": path.name, "commit": earlier["commit"]} for row in earlier["setups"]]
    rows += earlier.get("earlier setups", [])  # already marked with their own file and commit
    return [row for row in rows if row["setup"] not in setups and row["setup"] in SETUPS]


def _cell(column: str, value) -> str:
    if value is None:
        return "n/a (no calls)" if column.endswith("rate") else "-"
    if column.endswith(("rate", "accuracy", "format")):
        return f"{value:.1%}"
    return f"{value:.2f}".rstrip("0").rstrip(".")


if __name__ == "__main__":
    main()
