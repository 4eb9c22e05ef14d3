"""Looking at traces and runs inside a notebook, without the W&B UI.

- `calls_table()`        one row per traced call (op, parent, start, latency, tokens, reward)
- `trace_tree_widget()`  one trace as a clickable ipywidgets tree (inputs, outputs, latency, tokens)
- `export_trace_html()`  the same tree as a static HTML file to share
- `wandb_history()`      an offline wandb run's logged metrics as a DataFrame

They read the calls through the session's trace server, so they work the same on the local store
and on W&B Weave. Values are scrubbed again before they are shown (no logprobs, no keys).
"""

from __future__ import annotations

import html
import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from helpers.local.trace_store import scrub
from helpers.paths import runs_dir
from helpers.tracing import TracingSession, init_tracing

MAX_SHOWN_CHARS = 4000  # per inputs/outputs block, so a long trace stays readable


# ---------------------------------------------------------------- reading calls


def _session(session: TracingSession | None) -> TracingSession:
    return session or init_tracing(quiet=True)


def raw_calls(session: TracingSession | None = None, *, trace_id: str | None = None,
              call_ids: list[str] | None = None) -> list[dict]:
    """Calls as plain dicts (refs left as strings), oldest first."""
    session = _session(session)
    session.flush()
    flt: dict[str, Any] = {}
    if trace_id:
        flt["trace_ids"] = [trace_id]
    if call_ids:
        flt["call_ids"] = list(call_ids)
    stream = session.client.server.calls_query_stream({
        "project_id": session.client.project_id, "filter": flt,
        "sort_by": [{"field": "started_at", "direction": "asc"}],
    })
    return [call.model_dump() for call in stream]


def op_short_name(op_name: str) -> str:
    """weave:///entity/project/op/verifiers.Environment.evaluate:digest -> verifiers.Environment.evaluate"""
    return op_name.rsplit("/", 1)[-1].split(":", 1)[0]


def _tokens(summary: dict | None) -> dict[str, int | None]:
    usage = (summary or {}).get("usage") or {}
    totals: dict[str, int | None] = dict.fromkeys(("prompt_tokens", "completion_tokens", "total_tokens"))
    for per_model in usage.values():  # usage is keyed by model name
        if not isinstance(per_model, dict):
            continue
        for key, total in totals.items():
            if isinstance(per_model.get(key), (int, float)):
                totals[key] = (total or 0) + int(per_model[key])
    return totals


def _reward(output: Any) -> float | None:
    """The reward a call returned: a RolloutScore's, or the mean of GenerateOutputs' rewards."""
    if not isinstance(output, dict) or "reward" not in output:
        return None
    reward = output["reward"]
    if isinstance(reward, (int, float)):
        return float(reward)
    if isinstance(reward, list) and reward and all(isinstance(r, (int, float)) for r in reward):
        return sum(reward) / len(reward)
    return None


def _latency_s(call: dict) -> float | None:
    if call.get("ended_at") is None:
        return None
    return (call["ended_at"] - call["started_at"]).total_seconds()


def calls_table(trace_id: str | None = None, *, session: TracingSession | None = None,
                op: str | None = None) -> pd.DataFrame:
    """One row per traced call, oldest first: op, parent op, start, latency, tokens, reward, status.

    `trace_id` keeps one trace; `op` keeps calls whose op name contains it (e.g. "score_rollout").
    """
    calls = raw_calls(session, trace_id=trace_id)
    ops = {c["id"]: op_short_name(c["op_name"]) for c in calls}
    rows = []
    for c in calls:
        status = "running" if c.get("ended_at") is None else ("error" if c.get("exception") else "success")
        rows.append({
            "op": ops[c["id"]],
            "parent": ops.get(c.get("parent_id"), c.get("parent_id")),
            "start": pd.Timestamp(c["started_at"]),
            "latency_s": _latency_s(c),
            **_tokens(c.get("summary")),
            "reward": _reward(c.get("output")),
            "status": status,
            "call_id": c["id"],
            "parent_id": c.get("parent_id"),
            "trace_id": c["trace_id"],
        })
    table = pd.DataFrame(rows, columns=[
        "op", "parent", "start", "latency_s", "prompt_tokens", "completion_tokens", "total_tokens",
        "reward", "status", "call_id", "parent_id", "trace_id"])
    for col in ("prompt_tokens", "completion_tokens", "total_tokens"):
        table[col] = table[col].astype("Int64")  # integers, with <NA> where a call used no model
    if op:
        table = table[table["op"].str.contains(op, regex=False)]
    return table.reset_index(drop=True)


# ---------------------------------------------------------------- one trace as a tree


@dataclass
class TraceNode:
    call: dict
    children: list[TraceNode] = field(default_factory=list)

    @property
    def title(self) -> str:
        latency = _latency_s(self.call)
        parts = [op_short_name(self.call["op_name"]),
                 "running" if latency is None else f"{latency:.2f} s"]
        tokens = _tokens(self.call.get("summary"))["total_tokens"]
        if tokens is not None:
            parts.append(f"{tokens} tokens")
        reward = _reward(self.call.get("output"))
        if reward is not None:
            parts.append(f"reward {reward:.2f}")
        if self.call.get("exception"):
            parts.append("ERROR")
        return " · ".join(parts)

    def count(self) -> int:
        return 1 + sum(child.count() for child in self.children)


def trace_tree(call_or_trace_id: Any, *, session: TracingSession | None = None) -> TraceNode:
    """The tree of calls under a call (a weave Call, or a call id), or of a whole trace (a trace id)."""
    key = getattr(call_or_trace_id, "id", call_or_trace_id)
    session = _session(session)
    calls = raw_calls(session, trace_id=key)
    root_id = None
    if not calls:  # not a trace id: a call id
        found = raw_calls(session, call_ids=[key])
        if not found:
            raise ValueError(f"no traced call or trace with id {key!r}")
        root_id = key
        calls = raw_calls(session, trace_id=found[0]["trace_id"])
    nodes = {c["id"]: TraceNode(c) for c in calls}
    roots = []
    for node in nodes.values():
        parent = nodes.get(node.call.get("parent_id"))
        (parent.children if parent else roots).append(node)
    if root_id:
        return nodes[root_id]
    if len(roots) == 1:
        return roots[0]
    # several roots in one trace: hang them under a synthetic node
    first = roots[0].call
    return TraceNode({**first, "op_name": "trace", "output": None, "summary": None, "exception": None,
                      "ended_at": max((r.call.get("ended_at") for r in roots if r.call.get("ended_at")), default=None)},
                     roots)


def _pretty(value: Any) -> str:
    text = json.dumps(scrub(value), indent=1, default=str, ensure_ascii=False)
    return text if len(text) <= MAX_SHOWN_CHARS else text[:MAX_SHOWN_CHARS] + f"\n... ({len(text)} chars, cut)"


def _details_html(node: TraceNode) -> str:
    call = node.call
    body = [f"<div class='meta'>call {html.escape(call['id'])} · started {html.escape(str(call['started_at']))}</div>",
            f"<b>inputs</b><pre>{html.escape(_pretty(call.get('inputs')))}</pre>",
            f"<b>output</b><pre>{html.escape(_pretty(call.get('output')))}</pre>"]
    if call.get("exception"):
        body.append(f"<b>exception</b><pre>{html.escape(call['exception'])}</pre>")
    usage = (call.get("summary") or {}).get("usage")
    if usage:
        body.append(f"<b>token usage</b><pre>{html.escape(_pretty(usage))}</pre>")
    return "".join(body)


def trace_tree_widget(call_or_trace_id: Any, *, session: TracingSession | None = None):
    """A clickable tree of one trace: each call opens to its inputs, output, latency and tokens,
    and to its child calls."""
    import ipywidgets as widgets

    def build(node: TraceNode):
        parts = [widgets.HTML(_details_html(node))]
        if node.children:
            kids = widgets.Accordion(children=[build(child) for child in node.children])
            for i, child in enumerate(node.children):
                kids.set_title(i, child.title)
            parts.append(kids)
        return widgets.VBox(parts)

    root = trace_tree(call_or_trace_id, session=session)
    tree = widgets.Accordion(children=[build(root)])
    tree.set_title(0, root.title)
    tree.selected_index = 0
    return tree


_PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>{title}</title><style>
body{{font-family:system-ui,sans-serif;margin:1.5em}} details{{margin-left:1.2em;border-left:1px solid #ccc;padding-left:.6em}}
summary{{cursor:pointer;padding:2px 0}} pre{{background:#f6f6f6;padding:.5em;overflow-x:auto;max-height:24em}}
.meta{{color:#666;font-size:90%}}</style></head><body><h2>{title}</h2>
<p class="meta">{count} calls, recorded with W&amp;B Weave; click a call to open it.</p>{tree}</body></html>"""


def export_trace_html(call_or_trace_id: Any, path: str | Path | None = None, *,
                      session: TracingSession | None = None) -> Path:
    """Write one trace as a self-contained HTML page (no scripts: <details> elements) and return its path.
    The default path is runs/exports/trace-<trace id>.html."""
    root = trace_tree(call_or_trace_id, session=session)

    def render(node: TraceNode, open_: bool = False) -> str:
        kids = "".join(render(child) for child in node.children)
        return (f"<details{' open' if open_ else ''}><summary>{html.escape(node.title)}</summary>"
                f"{_details_html(node)}{kids}</details>")

    path = Path(path) if path else runs_dir("exports") / f"trace-{root.call['trace_id']}.html"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(_PAGE.format(title=html.escape(root.title), count=root.count(), tree=render(root, True)),
                    encoding="utf-8")
    return path


# ---------------------------------------------------------------- wandb offline runs


def latest_wandb_run(base: str | Path | None = None) -> Path:
    """The newest offline run folder (offline-run-*) under WANDB_DIR (runs/wandb by default)."""
    base = Path(base) if base else runs_dir("wandb")
    runs = sorted(base.glob("**/offline-run-*"), key=lambda p: p.name)  # names start with the date
    if not runs:
        raise FileNotFoundError(f"no offline wandb run under {base}")
    return runs[-1]


def wandb_history(run_dir_or_latest: str | Path | None = None) -> pd.DataFrame:
    """The metrics an offline wandb run logged (one row per step), read from its run-*.wandb file
    with `wandb leet inspect --json` (wandb's own reader; no network, no W&B UI)."""
    path = Path(run_dir_or_latest) if run_dir_or_latest else latest_wandb_run()
    if path.is_dir() and not list(path.glob("run-*.wandb")):
        path = latest_wandb_run(path)
    files = [path] if path.is_file() else sorted(path.glob("run-*.wandb"))
    if not files:
        raise FileNotFoundError(f"no run-*.wandb file in {path}")
    out = subprocess.run([sys.executable, "-m", "wandb", "leet", "inspect", "--json", str(files[0])],
                         check=False, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    if out.returncode != 0:
        raise RuntimeError(f"wandb leet inspect failed on {files[0]}: {out.stderr.strip()[-500:]}")
    rows = []
    for line in out.stdout.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if record.get("type") == "history":
            rows.append(record["history"]["item"])
    history = pd.DataFrame(rows)
    if "_step" in history:
        history = history.sort_values("_step").set_index("_step")
    return history
