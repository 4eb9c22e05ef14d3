"""Each notebook's parameters, checked by name in its first code cell, before anything slow runs:
`check_parameters(globals(), "01")`. A wrong value (max_tokens="abc", num_examples=-1, papermill's -r
turning a number into text) stops that cell with one ValueError naming every wrong parameter, its value and
what it must be, instead of a long error from the model server minutes later, or a silent "all 1,319".
So does a name papermill injected that no notebook has (`-p num_exampels 4`: papermill only warns, and the
notebook runs with its default).

One table per notebook, one rule per parameter: a new parameter adds one line here, and a test checks that
each table and its notebook's parameters cell name the same parameters.
"""

from __future__ import annotations

import ast
import difflib
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

# A rule takes a value and returns what is wrong with it (None: nothing).
Rule = Callable[[Any], "str | None"]


def _text_hint(value: Any) -> str:
    """A number that arrived as text (quotes, or papermill's -r) is named as such."""
    if isinstance(value, str):
        try:
            float(value)
            return " (this one is text: drop the quotes, or pass it with papermill's -p, not -r)"
        except ValueError:
            pass
    return ""


def whole(at_least: int, below: int | None = None, why: str = "") -> Rule:
    """A whole number (not a bool) in [at_least, below)."""
    def rule(value):
        if not isinstance(value, int) or isinstance(value, bool):
            return f"must be a whole number of at least {at_least}{_text_hint(value)}"
        if value < at_least or (below is not None and value >= below):
            bounds = f"at least {at_least}" + (f" and below {below}" if below is not None else "")
            return f"must be {bounds}{why}"
        return None
    return rule


def number(above: float | None = None, at_least: float | None = None, why: str = "") -> Rule:
    """A finite number (int or float, not a bool) above `above` or at least `at_least`."""
    bound = f"above {above}" if above is not None else f"at least {at_least}"

    def rule(value):
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
            return f"must be a number {bound}{_text_hint(value)}"
        if (above is not None and not value > above) or (at_least is not None and not value >= at_least):
            return f"must be {bound}{why}"
        return None
    return rule


def choice(*options: str) -> Rule:
    def rule(value):
        return None if value in options else f"must be one of {', '.join(map(repr, options))}"
    return rule


def text(optional: bool = False) -> Rule:
    """Some text (not empty); with `optional`, None too."""
    def rule(value):
        if value is None and optional:
            return None
        if not isinstance(value, str) or not value.strip():
            return "must be some text" + (", or None" if optional else "")
        return None
    return rule


def name(empty_ok: bool = False) -> Rule:
    """A name that is also a folder name (runs/<...>/<name>) and a W&B project or run name."""
    def rule(value):
        if empty_ok and value == "":
            return None
        if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}", value):
            return ("must be a name of letters, digits, '.', '_' or '-' (it names a folder)"
                    + (", or ''" if empty_ok else ""))
        return None
    return rule


def optional_text() -> Rule:
    """Text, possibly empty ("" means: decided from the environment)."""
    def rule(value):
        return None if isinstance(value, str) else "must be text (\"\" to decide it from the environment)"
    return rule


GRPO_PARAMETERS: dict[str, Rule] = {  # notebook 02
    "backend": choice("auto", "cpu", "gpu", "verifiers"),
    "rollouts": choice("server", "generate"),
    "precision": choice("auto", "float32", "bfloat16"),  # CPU training (helpers.grpo.backends.cpu_precision)
    "max_steps": whole(at_least=1),
    "learning_rate": number(above=0),
    "num_generations": whole(at_least=2, why=" (GRPO compares at least 2 completions per prompt)"),
    "per_device_train_batch_size": whole(at_least=1),
    "max_completion_length": whole(at_least=1),
    "temperature": number(above=0, why=" (GRPO needs varied samples)"),
    "beta": number(at_least=0),
    "seed": whole(at_least=0, below=2**32),
    "hack_steps": whole(at_least=0, why=" (0: section 12 trains no second run)"),
    "save_steps": whole(at_least=1),
    "resume": choice("auto", "never"),
    "system_prompt": text(optional=True),
    "num_train_examples": whole(at_least=1),
    "num_eval_examples": whole(at_least=1),
    "eval_samples": whole(at_least=1, why=" (samples per held-out problem at the training temperature)"),
    "eval_max_tokens": whole(at_least=1),
    "run_name": name(),
    "before_run": name(empty_ok=True),
    "project": name(),
}


SAMPLING = {  # what notebooks 01 and 03 send to the model endpoint
    "model": optional_text(),
    "base_url": optional_text(),
    "split": choice("train", "test"),
    "num_examples": whole(at_least=1, why=" (GSM8K problems to evaluate)"),
    "rollouts_per_example": whole(at_least=1),
    "max_concurrent": whole(at_least=1),
    "temperature": number(at_least=0),
    "max_tokens": whole(at_least=1, why=" (tokens the model may write per answer)"),
    "seed": whole(at_least=0, below=2**32),
    "run_name": name(),
}
NOTEBOOK_PARAMETERS: dict[str, dict[str, Rule]] = {
    "00": {"prompt": text(), "max_tokens": whole(at_least=1, why=" (tokens the model may write)"),
           "project": name()},
    "01": {**SAMPLING, "project": name()},
    "02": GRPO_PARAMETERS,
    "03": {**SAMPLING, "max_turns": whole(at_least=1), "discount": number(above=0),
           "tool_max_turns": whole(at_least=1), "vf_eval_examples": whole(at_least=1)},
    "04": {**SAMPLING},  # notebook 01's sampling, run by verifiers 0.4's own eval runner
    "05": {"results_folder": optional_text()},  # notebook 02's appendix: where its result files are ("": the course's)
}

GSM8K_ROWS = {"train": 7473, "test": 1319}  # problems in each split of openai/gsm8k (main)


def _batch_of_groups(values: Mapping[str, Any]) -> str | None:
    batch, group = values["per_device_train_batch_size"], values["num_generations"]
    if batch % group:
        return (f"per_device_train_batch_size={batch}: must be a multiple of num_generations={group} "
                "(prompts per step x completions per prompt)")
    return None


def _within_split(values: Mapping[str, Any]) -> str | None:
    # The loader's own message for too many rows suggests -1 ("all"), which the rule above refuses.
    split, n = values["split"], values["num_examples"]
    if n > GSM8K_ROWS[split]:
        return f"num_examples={n}: GSM8K's {split} split has {GSM8K_ROWS[split]:,} problems; ask for at most that"
    return None


# Rules on several parameters together: the parameters each reads, and the rule; it runs when each of those
# parameters is there and passed its own rule.
JOINT_RULES: list[tuple[tuple[str, ...], Callable[[Mapping[str, Any]], str | None]]] = [
    (("per_device_train_batch_size", "num_generations"), _batch_of_groups),
    (("split", "num_examples"), _within_split),
]


def problems(values: Mapping[str, Any], rules: Mapping[str, Rule] = GRPO_PARAMETERS) -> list[str]:
    """What is wrong with `values`, by `rules` and JOINT_RULES, one line per problem."""
    wrong = {key: problem for key, rule in rules.items()
             if key in values and (problem := rule(values[key]))}
    found = [f"{key}={values[key]!r}: {problem}" for key, problem in wrong.items()]
    for keys, rule in JOINT_RULES:
        if all(key in values and key not in wrong for key in keys) and (problem := rule(values)):
            found.append(problem)
    return found


def injected_names(namespace: Mapping[str, Any]) -> list[str]:
    """The names papermill injected into this kernel: its cell starts with "# Parameters" (papermill's
    translators), and IPython keeps the source of every cell run in `_ih`. Empty outside papermill."""
    for source in reversed(namespace.get("_ih") or []):
        if isinstance(source, str) and source.startswith("# Parameters\n"):
            try:
                body = ast.parse(source).body
            except SyntaxError:
                return []
            return [target.id for node in body if isinstance(node, ast.Assign)
                    for target in node.targets if isinstance(target, ast.Name)]
    return []


def _unknown(names: list[str], notebook: str) -> list[str]:
    """Names no notebook has. Another notebook's parameter is let through: scripts/run_notebooks.sh gives its
    `-p` to every notebook."""
    everyone = {key for rules in NOTEBOOK_PARAMETERS.values() for key in rules}
    known = NOTEBOOK_PARAMETERS[notebook]
    found = []
    for key in names:
        if key not in everyone:
            close = difflib.get_close_matches(key, known, n=1)
            found.append(f"{key}: no notebook has this parameter" + (f" (did you mean {close[0]}?)" if close else ""))
    return found


def check_parameters(namespace: Mapping[str, Any], notebook: str) -> None:
    """Check notebook `notebook`'s ("00" ... "05") parameters, each by name: call it with the notebook's
    `globals()`. Raises one ValueError that names every wrong parameter, its value and what it must be."""
    rules = NOTEBOOK_PARAMETERS[notebook]
    unknown = _unknown(injected_names(namespace), notebook)
    if unknown:
        raise ValueError(f"Notebook {notebook} was given a parameter it does not have (papermill only warns, and "
                         "runs with the default): fix its name in papermill's -p NAME VALUE and run again:\n- "
                         + "\n- ".join(unknown) + f"\nNotebook {notebook}'s parameters: {', '.join(rules)}")
    missing = [key for key in rules if key not in namespace]
    if missing:
        raise ValueError(f"Notebook {notebook}'s parameters cell has no {', '.join(missing)}: run that cell first "
                         "(or, if a parameter was renamed, rename it in helpers/parameters.py)")
    found = problems({key: namespace[key] for key in rules}, rules)
    if found:
        raise ValueError(f"Notebook {notebook} cannot run with these parameters; fix them in the parameters cell "
                         "(or papermill's -p NAME VALUE) and run again:\n- " + "\n- ".join(found))
