"""Looking at traces inside a notebook, without the W&B UI.

- `calls_table()`        one row per traced call (op, parent, start, latency, tokens, reward)
- `trace_tree()`         one trace as a tree of calls (`TraceNode`), each rollout with its score
- `trace_tree_widget()`  that tree as a clickable ipywidgets tree, each call read as a conversation
- `export_trace_html()`  the same tree as a static HTML file to share

They read the calls through the session's Weave trace server, so they work the same on the local
store and on W&B Weave. The HTML they show is made in helpers.tracing.viewer.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from helpers.paths import runs_dir
from helpers.tracing.session import TracingSession, init_tracing
from helpers.tracing.viewer import (
    TraceNode,
    clean,
    latency_s,
    op_short_name,
    page_html,
    reward_of,
    token_counts,
    tree_widget,
)

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
            "latency_s": latency_s(c),
            **token_counts(c.get("summary")),
            "reward": reward_of(c.get("output")),
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
    _attach_scores(list(nodes.values()))
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


def _rollout_key(prompt: Any, completion: Any) -> str:
    return json.dumps([clean(prompt), clean(completion)], sort_keys=True, default=str)


def _attach_scores(nodes: list[TraceNode]) -> None:
    """Scoring is traced next to the rollouts, not inside them: give each rollout its score
    (matched by prompt and completion), so its reward shows on the rollout itself."""
    scores = {}
    for node in nodes:
        op, inputs, output = op_short_name(node.call["op_name"]), node.call.get("inputs") or {}, node.call.get("output")
        if not isinstance(output, dict) or not isinstance(output.get("metrics"), dict):
            continue
        if op.endswith("score_rollout"):
            scores[_rollout_key(inputs.get("prompt"), inputs.get("completion"))] = output
        elif op.endswith("score_rollouts") and isinstance(inputs.get("completions"), list):
            for i, (prompt, completion) in enumerate(zip(inputs.get("prompts") or [], inputs["completions"])):
                scores[_rollout_key(prompt, completion)] = {
                    "reward": output["reward"][i], "metrics": {k: v[i] for k, v in output["metrics"].items()}}
    for node in nodes:
        output = node.call.get("output")
        if op_short_name(node.call["op_name"]).endswith(".rollout") and isinstance(output, list) and output:
            node.score = scores.get(_rollout_key((node.call.get("inputs") or {}).get("prompt"), output[0]))


# ---------------------------------------------------------------- shown in the notebook, or as a page


def trace_tree_widget(call_or_trace_id: Any, *, session: TracingSession | None = None):
    """A clickable tree of one trace: each call opens to what it did (a conversation when it carries
    messages: roles, tool calls and results, turn by turn), its reward, latency and tokens, the raw
    JSON one click away, and to its child calls."""
    return tree_widget(trace_tree(call_or_trace_id, session=session))


def export_trace_html(call_or_trace_id: Any, path: str | Path | None = None, *,
                      session: TracingSession | None = None) -> Path:
    """Write one trace as a self-contained HTML page and return its path
    (default: runs/exports/trace-<trace id>.html)."""
    root = trace_tree(call_or_trace_id, session=session)
    path = Path(path) if path else runs_dir("exports") / f"trace-{root.call['trace_id']}.html"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page_html(root), encoding="utf-8")
    return path
