"""The trace viewer for a notebook: what Weave's web UI shows, rendered from the calls themselves,
so traces can be read where there is no W&B account (the local store) or no browser tab to spare.

`helpers.trace_tree_widget` and `helpers.export_trace_html` call `tree_widget(root)` and
`page_html(root)` with the tree of calls `helpers.tracing.views.trace_tree` builds. Each call reads as
a conversation (roles, tool calls and results, turn by turn) with its reward, latency and tokens,
Weave's bookkeeping hidden, long values folded, the raw JSON one click away, and secrets scrubbed.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from typing import Any

from helpers.scrubbing import scrub

MAX_SHOWN_CHARS = 4000  # per inputs/outputs block, so a long trace stays readable
# Levels of nesting shown; deeper is cut with a note. Tool arguments nested a thousand deep (kept in the rollouts)
# broke the widget and the HTML export with a RecursionError: clean, scrub and json.dumps all recurse.
MAX_DEPTH = 40
CUT = f"… (nested deeper than {MAX_DEPTH} levels: cut here)"


def bounded(value: Any, depth: int = MAX_DEPTH) -> Any:
    """A copy of a JSON-like value with every dict or list deeper than `depth` levels replaced by CUT (its own
    recursion stops there, so any depth is safe)."""
    if not isinstance(value, (dict, list, tuple)):
        return value
    if depth <= 0:
        return CUT
    if isinstance(value, dict):
        return {k: bounded(v, depth - 1) for k, v in value.items()}
    return [bounded(v, depth - 1) for v in value]


# ---------------------------------------------------------------- reading one call

def op_short_name(op_name: str) -> str:
    """weave:///entity/project/op/verifiers.Environment.evaluate:digest -> verifiers.Environment.evaluate"""
    return op_name.rsplit("/", 1)[-1].split(":", 1)[0]


def token_counts(summary: dict | None) -> dict[str, int | None]:
    usage = (summary or {}).get("usage") or {}
    totals: dict[str, int | None] = dict.fromkeys(("prompt_tokens", "completion_tokens", "total_tokens"))
    for per_model in usage.values():  # usage is keyed by model name
        if not isinstance(per_model, dict):
            continue
        for key, total in totals.items():
            if isinstance(per_model.get(key), (int, float)):
                totals[key] = (total or 0) + int(per_model[key])
    return totals


def reward_of(output: Any) -> float | None:
    """The reward a call returned: a RolloutScore's, or the mean of GenerateOutputs' rewards."""
    if not isinstance(output, dict) or "reward" not in output:
        return None
    reward = output["reward"]
    if isinstance(reward, (int, float)):
        return float(reward)
    if isinstance(reward, list) and reward and all(isinstance(r, (int, float)) for r in reward):
        return sum(reward) / len(reward)
    return None


def latency_s(call: dict) -> float | None:
    if call.get("ended_at") is None:
        return None
    return (call["ended_at"] - call["started_at"]).total_seconds()


# ---------------------------------------------------------------- one call, read as a conversation

INTERNALS = {"_type", "_class_name", "_bases", "_ref"}  # Weave's serialization bookkeeping
HIDDEN_INPUTS = {"self"}
PREVIEW_CHARS = 60  # the reply or result shown in a call's title
FOLD_CHARS = 600  # longer texts show their start, the rest one click away
STYLE = """<style>
.tvc{font-family:system-ui,sans-serif;font-size:13px;line-height:1.4}
.tvc .badges span{display:inline-block;background:#eef1f5;border-radius:9px;padding:1px 8px;margin:0 4px 4px 0}
.tvc .badges .reward{background:#e3f4e1} .tvc .badges .error{background:#fbe3e3}
.tvc .msg{border-left:4px solid #bbb;background:#fafafa;margin:4px 0;padding:3px 8px}
.tvc .msg.system{border-color:#9e9e9e} .tvc .msg.user{border-color:#3b7dd8}
.tvc .msg.assistant{border-color:#2e9d4f;background:#f3fbf4}
.tvc .msg.environment{border-color:#8a5cd1;background:#f7f3fd}
.tvc .msg.tool{border-color:#d9822b;background:#fdf6ee}
.tvc .role{font-size:11px;font-weight:600;color:#555;text-transform:uppercase;letter-spacing:.03em}
.tvc .text{white-space:pre-wrap;word-break:break-word;margin:0}
.tvc .call{font-family:monospace;background:#fff3e0;border-radius:4px;padding:2px 6px;margin-top:3px}
.tvc .kv{font-family:monospace;white-space:pre-wrap;word-break:break-word}
.tvc details>summary{cursor:pointer;color:#555}
.tvc pre.raw{background:#f6f6f6;padding:.5em;max-height:24em;overflow:auto}
.tvc table{border-collapse:collapse} .tvc td{padding:1px 10px 1px 0;vertical-align:top}
</style>"""


def clean(value: Any) -> Any:
    """The value without Weave's bookkeeping (_type, _bases, ...) and without empty (null) fields."""
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items() if k not in INTERNALS and v is not None}
    if isinstance(value, list):
        return [clean(v) for v in value]
    return value


def _is_message(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("role"), str)


def _messages(value: Any) -> list[dict] | None:
    if isinstance(value, list) and all(_is_message(m) for m in value):
        return value
    return None


def conversation(call: dict) -> tuple[list[dict], list[dict]] | None:
    """The messages a call carries, cleaned: (context it was given, messages it added), or None.

    A model call adds its reply to the messages sent; a rollout adds its completion to the prompt;
    an environment response adds its replies to the conversation so far; a tool call adds the
    tool's message; scoring reads a prompt and a completion.
    """
    inputs, output = clean(call.get("inputs") or {}), clean(call.get("output"))
    sent = _messages(inputs.get("messages")) or _messages(inputs.get("prompt")) or []
    if isinstance(output, dict) and output.get("choices"):  # a chat completion
        reply = output["choices"][0].get("message")
        return (sent, [reply]) if _is_message(reply) else None
    if isinstance(output, list) and output and _messages(output[0]) is not None:  # (messages, state)
        return sent, output[0]
    if _is_message(output):  # a tool's answer
        return [], [output]
    completion = _messages(inputs.get("completion"))
    if completion is not None:  # scoring
        return sent, completion
    return None


def _text(content: Any) -> str:
    if isinstance(content, list):  # content parts
        return "\n".join(str(part.get("text", part)) if isinstance(part, dict) else str(part) for part in content)
    return "" if content is None else str(content)


def _folded(text: str, limit: int = FOLD_CHARS) -> str:
    if len(text) <= limit:
        return f"<div class='text'>{html.escape(text)}</div>"
    return (f"<div class='text'>{html.escape(text[:limit])}</div><details><summary>… "
            f"{len(text) - limit} more characters</summary><div "
            f"class='text'>{html.escape(text[limit:])}</div></details>")


def _tool_call_text(call: Any) -> str:
    function = call.get("function", call) if isinstance(call, dict) else {}
    arguments = function.get("arguments", "")
    if isinstance(arguments, str):
        try:
            arguments = bounded(json.loads(arguments))
        except ValueError:
            return f"{function.get('name', '?')}({arguments})  [arguments are not JSON]"
        except RecursionError:  # json.loads recurses once per level
            return f"{function.get('name', '?')}({arguments[:PREVIEW_CHARS]}…)  [{CUT.removeprefix('… ')}]"
    if isinstance(arguments, dict):
        arguments = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in arguments.items())
    return f"{function.get('name', '?')}({arguments})"


def _message_html(message: dict, label: str) -> str:
    role = label.split(" ")[0]
    parts = [f"<div class='msg {role}'><div class='role'>{html.escape(label)}</div>"]
    text = _text(message.get("content"))
    if text or not message.get("tool_calls"):
        parts.append(_folded(text) if text else "<div class='text'><i>(empty)</i></div>")
    for tool_call in message.get("tool_calls") or []:
        parts.append(f"<div class='call'>tool call: {html.escape(_tool_call_text(tool_call))}</div>")
    return "".join(parts) + "</div>"


def _labels(messages: list[dict]) -> list[str]:
    """Role labels, turn by turn: a user message after the model's first turn is the environment."""
    labels, turn = [], 0
    for message in messages:
        role = message["role"]
        if role == "assistant":
            turn += 1
            labels.append(f"assistant · turn {turn}")
        elif role == "user" and turn:
            labels.append("environment (user message)")
        elif role == "tool":
            labels.append(f"tool result{' · ' + message['tool_call_id'] if message.get('tool_call_id') else ''}")
        else:
            labels.append(role)
    return labels


def conversation_html(context: list[dict], added: list[dict]) -> str:
    """The added messages in full; of the context, the last message (what they answer) and the
    earlier ones folded."""
    labels = _labels([*context, *added])
    shown = [_message_html(m, label) for m, label in zip([*context, *added], labels, strict=True)]
    split = max(len(context) - 1, 0)
    earlier = "".join(shown[:split])
    folded = (f"<details><summary>{split} earlier message{'s' if split > 1 else ''}</summary>{earlier}</details>"
              if split else "")
    return folded + "".join(shown[split:])


def _value_html(value: Any, limit: int = 160) -> str:
    """A value in one line; a long one folded (its start shown), a list of messages as a conversation."""
    if isinstance(value, str) and not value:
        return "<i>(empty)</i>"
    messages = _messages(value)
    if messages:
        return (f"<details><summary>{len(messages)} message{'s' if len(messages) > 1 else ''}</summary>"
                f"{conversation_html([], messages)}</details>")
    text = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    if len(text) <= limit:
        return html.escape(text)
    full = value if isinstance(value, str) else _raw_json(value)
    return (f"<details><summary>{html.escape(text[:limit])} …</summary>"
            f"<pre class='raw'>{html.escape(full[:MAX_SHOWN_CHARS])}</pre></details>")


def _values_html(values: dict) -> str:
    rows = "".join(f"<tr><td><b>{html.escape(str(k))}</b></td><td class='kv'>{_value_html(v)}</td></tr>"
                   for k, v in values.items())
    return f"<table>{rows}</table>"


def _summary_html(call: dict) -> str:
    """What a call did, for the reader: a conversation, scores, or its inputs and output, short."""
    output = clean(call.get("output"))
    chat = conversation(call)
    parts = []
    if chat:
        parts.append(conversation_html(*chat))
    if isinstance(output, dict) and isinstance(output.get("metrics"), dict):  # a score, or many
        scores = {"reward": output.get("reward"), **output["metrics"]}
        if all(isinstance(v, list) for v in scores.values() if v is not None):  # GenerateOutputs
            n = len(output.get("reward") or [])
            scores = {f"mean {k}": round(sum(v) / len(v), 3) for k, v in scores.items() if v}
            scores = {"rollouts": n, **scores}
        parts.append(_values_html(scores))
    elif not chat:
        inputs = {k: v for k, v in clean(call.get("inputs") or {}).items()
                  if k not in HIDDEN_INPUTS and v not in ({}, None)}
        if inputs:
            parts.append(f"<div class='role'>inputs</div>{_values_html(inputs)}")
        parts.append(f"<div class='role'>output</div><div class='kv'>{_value_html(output, 600)}</div>")
    return "".join(parts)


@dataclass
class TraceNode:
    call: dict
    children: list[TraceNode] = field(default_factory=list)
    score: dict | None = None  # a rollout's reward and metrics, from the rubric call that scored it

    def __post_init__(self) -> None:  # every view of the call reads it bounded (see MAX_DEPTH)
        self.call = {**self.call, **{k: bounded(self.call.get(k)) for k in ("inputs", "output", "summary")}}

    @property
    def title(self) -> str:
        latency = latency_s(self.call)
        parts = [op_short_name(self.call["op_name"]),
                 "running" if latency is None else f"{latency:.2f} s"]
        tokens = token_counts(self.call.get("summary"))["total_tokens"]
        if tokens is not None:
            parts.append(f"{tokens} tokens")
        reward = self.reward
        if reward is not None:
            parts.append(f"reward {reward:.2f}")
        if self.call.get("exception"):
            parts.append("ERROR")
        shown = preview(self.call)
        if shown is not None:
            parts.append(f"“{shown}”" if shown else "“”")
        return " · ".join(parts)

    @property
    def reward(self) -> float | None:
        return reward_of(self.score) if self.score else reward_of(self.call.get("output"))

    def count(self) -> int:
        return 1 + sum(child.count() for child in self.children)



def _badges_html(node: TraceNode) -> str:
    call = node.call
    latency, tokens = latency_s(call), token_counts(call.get("summary"))
    badges = ["running" if latency is None else f"{latency:.2f} s"]
    if tokens["total_tokens"] is not None:
        badges.append(f"{tokens['prompt_tokens']} prompt + {tokens['completion_tokens']} completion tokens")
    scores = {"reward": node.reward} if node.reward is not None else {}
    scores.update((node.score or {}).get("metrics") or {})
    spans = [f"<span class='reward'>{html.escape(name)} {value:.3g}</span>" for name, value in scores.items()
             if isinstance(value, (int, float))]
    spans += [f"<span>{html.escape(b)}</span>" for b in badges]
    if call.get("exception"):
        spans.append("<span class='error'>error</span>")
    return f"<div class='badges'>{''.join(spans)}</div>"


def _raw_json(value: Any) -> str:
    text = json.dumps(value, indent=1, default=str, ensure_ascii=False)
    return text if len(text) <= MAX_SHOWN_CHARS else text[:MAX_SHOWN_CHARS] + f"\n... ({len(text)} chars, cut)"


def details_html(node: TraceNode) -> str:
    """One call: reward, latency and tokens at the top, then what it did (a conversation when it
    carries messages), its error if any, and the raw JSON (scrubbed) one click away."""
    call = {**node.call, "inputs": scrub(node.call.get("inputs")), "output": scrub(node.call.get("output"))}
    body = ["<div class='tvc'>", _badges_html(node), _summary_html(call)]
    if call.get("exception"):
        body.append(f"<div class='role'>error</div><pre class='raw'>{html.escape(scrub(call['exception']))}</pre>")
    raw = {"inputs": {k: v for k, v in (call["inputs"] or {}).items() if k not in HIDDEN_INPUTS},
           "output": call["output"], "usage": (call.get("summary") or {}).get("usage")}
    body.append(f"<details><summary>raw JSON · call {html.escape(call['id'])} · started "
                f"{html.escape(str(call['started_at']))}</summary><pre class='raw'>{html.escape(_raw_json(raw))}"
                "</pre></details></div>")
    return "".join(body)


def preview(call: dict) -> str | None:
    """A few words of what a call produced, for its title: the reply, the tool call, or the result."""
    chat = conversation(call)
    if chat and chat[1]:
        last = chat[1][-1]
        if last.get("tool_calls"):
            text = "; ".join(_tool_call_text(c) for c in last["tool_calls"])
        else:
            text = _text(last.get("content"))
    else:
        output = clean(call.get("output"))
        if not isinstance(output, (str, int, float, bool)):
            return None
        text = str(output)
    text = " ".join(scrub(text).split())
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"


# ---------------------------------------------------------------- the tree: widget and HTML page


def tree_widget(root: TraceNode):
    """A clickable ipywidgets tree: each call opens to what it did, its reward, latency and tokens,
    the raw JSON one click away, and to its child calls."""
    import ipywidgets as widgets

    def build(node: TraceNode, style: str = ""):
        parts = [widgets.HTML(style + details_html(node))]
        if node.children:
            kids = widgets.Accordion(children=[build(child) for child in node.children])
            for i, child in enumerate(node.children):
                kids.set_title(i, child.title)
            parts.append(kids)
        return widgets.VBox(parts)

    tree = widgets.Accordion(children=[build(root, STYLE)])  # the root is open: its style serves the page
    tree.set_title(0, root.title)
    tree.selected_index = 0
    return tree


_PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>{title}</title><style>
body{{font-family:system-ui,sans-serif;margin:1.5em}}
details.node{{margin-left:1.2em;border-left:1px solid #ccc;padding-left:.6em}}
details.node>summary{{cursor:pointer;padding:2px 0}} .meta{{color:#666;font-size:90%}}</style>{style}</head>
<body><h2>{title}</h2>
<p class="meta">{count} calls, recorded with W&amp;B Weave; click a call to open it.</p>{tree}</body></html>"""


def page_html(root: TraceNode) -> str:
    """The same tree as a self-contained HTML page (no scripts: <details> elements)."""

    def render(node: TraceNode, open_: bool = False) -> str:
        kids = "".join(render(child) for child in node.children)
        return (f"<details class='node'{' open' if open_ else ''}><summary>{html.escape(node.title)}</summary>"
                f"{details_html(node)}{kids}</details>")

    return _PAGE.format(title=html.escape(root.title), count=root.count(), style=STYLE, tree=render(root, True))
