"""Checks of notebook 03's feedback exercises: the feedback message's hints, and the environment's is_completed and
env_response. Each runs the learner's function next to the reference on real rollouts: the feedback environment's
loop replayed with scripted model turns over GSM8K's gold answers of both splits (commas and negative ones among
them; notebook_03_replays). None means right, else the first input where the two part, and the mistake it points
at. The other exercises' checks: notebook_03_discount, notebook_03_tools, notebook_03_module."""

from __future__ import annotations

import re
from collections.abc import Callable

from helpers.checks.notebook_03_replays import (
    MAX_TURNS,
    ROLLOUT_STATE,
    NotAReply,
    NotAwaitable,
    _judged,
    _method_references,
    _notebook_env,
    _reference_replays,
    _replay,
    _rows,
    _scripts,
    _transcript,
)
from helpers.checks.own_code import not_your_own
from helpers.checks.real_inputs import (
    gold_hint,
    gsm8k_golds,
    near_misses,
    write_number,
)
from helpers.checks.registry import checks_exercise
from helpers.worker_thread import run_sync

# ---------------------------------------------------------------------- the exercises' answers as the course wrote them
# A learner's code that calls one of these (or runs a copy of its code) is not the learner's own work.


def _course_feedback_message():
    from gsm8k_feedback import feedback_message

    return feedback_message


# ----------------------------------------------------------------------------- feedback that helps

HINT_CASES = [  # (parsed, gold, the word the feedback must contain, what a wrong word here means)
    ("90", "72", "too high", "90 for a gold answer of 72 is too high (compare the numbers with float())"),
    ("50", "72", "too low", "50 for a gold answer of 72 is too low"),
    ("100", "72", "too high", "'100' < '72' as text, but 100 > 72 as numbers: compare float(...) of both"),
    ("9", "72", "too low", "'9' > '72' as text, but 9 < 72 as numbers: compare float(...) of both"),
    ("1,000", "2000", "too low", "'1,000' is a number too: float(canonical_number(parsed))"),
]


def _hint_cases() -> list[tuple[str, str, str, str]]:
    """(parsed, gold, the word, why) over GSM8K's gold answers: `parsed` as FinalAnswerParser gives it (the
    number after the model's '####', canonical) for answers above and below the gold, its tenfold, its tenth
    and the shared near misses (its negative, the same whole part with other decimals, ...)."""
    from gsm8k_course import canonical_number, extract_hash_answer

    cases = []
    for gold in gsm8k_golds():
        value = float(canonical_number(gold))
        misses = [float(number.rstrip(".")) for number, _ in near_misses(gold)]
        for other in dict.fromkeys([value + 1, value - 1, value * 10, value / 10, *misses]):
            if other != value:
                parsed = extract_hash_answer(f"#### {write_number(other)}")
                word = "too high" if other > value else "too low"
                cases.append((parsed, gold, word, _compare_hint(parsed, gold)))
    return cases


def _compare_hint(parsed: str, gold: str) -> str:
    why = gold_hint(gold)
    if not why and "." in parsed:
        why = "the model's answer is a decimal here: int() fails on it"
    elif not why and parsed.startswith("-"):
        why = "the model's answer is negative here: the minus sign is part of the number"
    return "; ".join(filter(None, [why, "compare float(canonical_number(...)) of both"]))


# How a reply says which way the answer is off, in any wording: about the model's answer ("too high", "higher
# than the answer", "overshot") or about where to go ("go lower", "the answer is lower"). None when it does not
# say, or says both.
_BIG, _SMALL = r"(?:high|big|large|much|many|great)", r"(?:low|small|little|few)"
_GOAL = r"(?:answer|gold|correct|right|target|solution|true|real|actual)"
_SOME = r"(?:a bit |much |a little )?"
DIRECTION_WORDS = {
    "high": [rf"\btoo {_BIG}", rf"\b(?:higher|bigger|larger|greater|more|above|over) than (?:the |a |my |our )?{_GOAL}",
             r"\bover(?:shot|estimat|shoot)", rf"\b(?:go|try|aim|guess|think|be) {_SOME}(?:lower|smaller|less|down)\b",
             rf"\b{_GOAL}\w* (?:answer |number |value )?is {_SOME}(?:lower|smaller|less|below)\b"],
    "low": [rf"\btoo {_SMALL}", rf"\b(?:lower|smaller|less|below|under) than (?:the |a |my |our )?{_GOAL}",
            r"\bunder(?:shot|estimat|shoot)",
            rf"\b(?:go|try|aim|guess|think|be) {_SOME}(?:higher|bigger|larger|greater|more|up)\b",
            rf"\b{_GOAL}\w* (?:answer |number |value )?is {_SOME}(?:higher|bigger|larger|greater|more|above)\b"],
}


def direction(reply: str) -> str | None:
    """'high' or 'low': which way `reply` says the model's answer is off; None when it does not say."""
    text = " ".join(reply.lower().split())
    said = {way for way, patterns in DIRECTION_WORDS.items() if any(re.search(p, text) for p in patterns)}
    return said.pop() if len(said) == 1 else None


def _numbers_masked(reply: str) -> str:
    """The reply with its numbers taken out: what stays the same whichever number it is about."""
    return re.sub(r"-?\$?\d[\d,]*(?:\.\d+)?", "N", reply.strip())


@checks_exercise("03-feedback-hints")
def feedback_hints(feedback_message: Callable[[str, str], str]) -> str | None:
    """feedback_message(parsed, answer): "Correct." when right; otherwise words that say which way the answer is off
    ("too high", "higher than the answer", "go lower", ...: any wording that gives the direction)."""
    from gsm8k_course import canonical_number

    if not callable(feedback_message):
        return "feedback_message should be a function: def feedback_message(parsed, answer) -> str"
    own = not_your_own(feedback_message, references=(_course_feedback_message(),))
    if own:
        return own
    for parsed, gold in [("72", "72"), *((canonical_number(g), g) for g in gsm8k_golds())]:
        if feedback_message(parsed, gold).strip() != "Correct.":
            return (f"feedback_message({parsed!r}, {gold!r}) should say exactly 'Correct.' (the same number; the "
                    "environment ends the rollout on it)")
    if "####" not in feedback_message("", "72"):
        return "with no final answer, remind the model of the '#### <number>' format"
    said = []  # (parsed, gold, the way it is off, the reply, why)
    for parsed, gold, word, hint in HINT_CASES + _hint_cases():
        way = "high" if word == "too high" else "low"
        try:
            reply = str(feedback_message(parsed, gold))
        except Exception as e:  # noqa: BLE001 - the hint names what went wrong
            return f"feedback_message({parsed!r}, {gold!r}) raised {type(e).__name__}: {e}. {hint}"
        if reply.strip() == "Correct.":
            return f"feedback_message({parsed!r}, {gold!r}) said 'Correct.' to a wrong answer: {hint}"
        if direction(reply) not in (None, way):
            return (f"feedback_message({parsed!r}, {gold!r}) said {reply!r}, which tells the model its answer is too "
                    f"{direction(reply)}; {parsed} is too {way} for a gold answer of {gold!r}: {hint}")
        said.append((parsed, gold, way, reply, hint))
    # Whatever the wording, the words must differ with the direction: the same reply (numbers aside) to an answer
    # above the gold and to one below it says nothing about the way.
    ways: dict[str, dict[str, int]] = {}
    for _, _, way, reply, _ in said:
        ways.setdefault(_numbers_masked(reply), {"high": 0, "low": 0})[way] += 1
    for parsed, gold, way, reply, hint in said:
        counts = ways[_numbers_masked(reply)]
        other = "low" if way == "high" else "high"
        if counts[other] and counts[way] <= counts[other]:  # the wording the other way uses more often
            if len(ways) == 1:
                return (f"feedback_message({parsed!r}, {gold!r}) said {reply!r}, the same words it says to an answer "
                        "too high and to one too low: say whether the answer is too high or too low")
            return (f"feedback_message({parsed!r}, {gold!r}) said {reply!r}, the words it uses for answers too "
                    f"{other}; {parsed} is too {way} for a gold answer of {gold!r}: {hint}")
    return None


def _first_difference(method: str, yours: Callable) -> str | None:
    """Every scripted conversation with the learner's `method` and with the solution's; the first difference."""
    if not callable(yours):
        return f"{method} should be a function: async def {method}(self, messages, state, **kwargs)"
    own = not_your_own(yours, references=_method_references(method))
    if own:
        return own
    expected = _reference_replays()

    async def compare() -> str | None:  # one event loop for them all
        for max_turns in MAX_TURNS:
            env = _notebook_env(max_turns, _rows(), **{method: yours})
            for (_, gold), prompt in zip(_rows(), env.eval_dataset["prompt"]):
                for what, turns in _scripts(gold):
                    case = f"max_turns={max_turns}, gold answer {gold!r}, the model {what}"
                    want = expected[max_turns, gold, what].said
                    try:
                        got = await _replay(env, prompt, gold, turns)
                    except Exception as e:  # noqa: BLE001 - the hint names what went wrong
                        return f"with {case}, {_raised(method, e)}"
                    if got.said != want:
                        return (f"with {case}:\n  expected {_transcript(want)}\n  yours    {_transcript(got.said)}\n"
                                + _why(method, want, got.said, max_turns))
                    reply = _reply_difference(prompt + got.completion, gold) if method == "env_response" else None
                    if reply:
                        return f"with {case}: {_transcript(got.said)}\n{reply}"
                    if got.state is not None and (set(ROLLOUT_STATE) - set(got.state) or got.state["answer"] != gold):
                        return (f"with {case}, the state lost what it held before "
                                f"({sorted(set(ROLLOUT_STATE) - set(got.state))} "
                                "or its 'answer'): update the state dict you were given and return that one")
        env, reference = _notebook_env(3, _rows(), **{method: yours}), _notebook_env(3, _rows())
        for question, gold in _rows():
            try:
                got = await _by_hand(env, question, gold)
            except Exception as e:  # noqa: BLE001 - the hint names what went wrong
                why = f"it raised KeyError: {e}" if isinstance(e, KeyError) else _raised(method, e)
                return (f"section 2's next cell drives the environment by hand (gold answer {gold!r}), from a state "
                        "that "
                        f"holds only 'answer' and 'turn', and {why}; read only those and your own keys")
            want = await _by_hand(reference, question, gold)
            if got != want:
                return (f"section 2's next cell drives the environment by hand (gold answer {gold!r}, a wrong answer, "
                        f"then the right one): (reply, is_completed) after each were {got}, expected {want}")
        return None

    return run_sync(compare())


def _numbers(text: str) -> list[str]:
    from gsm8k_course import NUMBER, canonical_number

    return [canonical_number(n) for n in NUMBER.findall(text)]


def _reply_difference(conversation: list[dict], gold: str) -> str | None:
    """What is wrong in the environment's replies of `conversation` (prompt and completion), each read as a whole:
    a number it names must be the one the model's last turn ends with, not one from another message (the prompt's
    worked example, an earlier turn), and words that say which way the answer is off must say the right way."""
    from gsm8k_course import canonical_number, extract_hash_answer

    for i, message in enumerate(conversation):
        if message.get("role") != "user" or i == 0 or conversation[i - 1].get("role") != "assistant":
            continue  # only the environment's replies to a model turn
        reply, before, last = str(message.get("content")), conversation[:i], str(conversation[i - 1].get("content"))
        parsed = extract_hash_answer(last)
        named = _numbers(reply)
        if not (parsed and parsed in named):
            # answers written in the other messages: each '####' number, each last number
            elsewhere = {extract_hash_answer(str(m.get("content"))) for m in before[:-1]}
            elsewhere |= {_numbers(str(m.get("content")))[-1] for m in before[:-1] if _numbers(str(m.get("content")))}
            taken = [n for n in named if n in elsewhere - {""}]
            if taken:
                said = f"ends with '#### {parsed}'" if parsed else "holds no '####' answer"
                return (f"the environment replied {reply!r} to the model's turn {last!r}, naming {taken[0]}, a number "
                        f"from another message (the prompt or an earlier turn); the model's last turn {said}: parse "
                        "its LAST turn, self.parser.parse_answer(messages), and reply about that number")
        way = direction(reply)
        if way is None or (parsed and canonical_number(parsed) == canonical_number(gold)):
            continue
        if not parsed:
            return (f"the environment replied {reply!r} to the model's turn {last!r}, which holds no '####' answer: "
                    "there is no number to be too high or too low; parse the model's LAST turn")
        right_way = "high" if float(parsed) > float(canonical_number(gold)) else "low"
        if way != right_way:
            return (f"the environment replied {reply!r} to the model's turn {last!r}: {parsed} is too {right_way} for "
                    f"the gold answer {gold!r}, not too {way}. Parse the model's LAST turn "
                    "(self.parser.parse_answer(messages)) and pass that number and state['answer'] to "
                    "feedback_message, "
                    "whose direction compares the numbers (float of canonical_number)")
    return None


async def _by_hand(env, question: str, gold: str) -> list[tuple[str, bool]]:
    """What notebook 03's cell after the class does: two answers, and env_response then is_completed after each,
    from a state that holds only 'answer' and 'turn'."""
    from gsm8k_course import canonical_number

    messages, state, steps = [{"role": "user", "content": question}], {"answer": gold, "turn": 0}, []
    for attempt in (f"My answer:\n#### {write_number(float(canonical_number(gold)) + 5)}",
                    f"Let me redo it.\n#### {gold}"):
        messages.append({"role": "assistant", "content": attempt})
        state["turn"] += 1
        replies, state = await env.env_response(messages, state)
        messages += replies
        steps.append((_judged(replies[0]["content"]), bool(await env.is_completed(messages, state))))
    return steps


def _raised(method: str, e: Exception) -> str:
    """What an exception from a replay means."""
    if isinstance(e, NotAwaitable):
        return (f"{e}: write it as `async def {method}(self, messages, state, **kwargs)` (the notebook's FeedbackEnv "
                f"does `return await {method}(self, ...)`)")
    if isinstance(e, NotAReply):
        return str(e)
    if isinstance(e, KeyError) and e.args and e.args[0] in ROLLOUT_STATE:
        return (f"verifiers' rollout raised KeyError: {e}: the state lost what it held (its {e.args[0]!r}): update "
                "the state dict you were given and return that one")
    if isinstance(e, KeyError) and e.args == ("solved",):
        return ("it raised KeyError: 'solved': before the environment's first reply the state has no 'solved': read "
                "it with state.get('solved', False)")
    if "super" in str(e):
        return (f"it raised {type(e).__name__}: {e}. Your function is not a method of a class of yours, so super() "
                f"cannot find the base class: name it, `await vf.MultiTurnEnv.is_completed(self, messages, state, "
                "**kwargs)`")
    if isinstance(e, AttributeError):
        return (f"it raised AttributeError: {e}. The notebook's FeedbackEnv is vf.MultiTurnEnv with your two "
                "functions and nothing more: use what the base class has (self.parser, self.max_turns, ...)")
    return f"it raised {type(e).__name__}: {e}"


def _why(method: str, expected: list[tuple[str, str]], got: list[tuple[str, str]], max_turns: int) -> str:
    """The mistake the first difference points at."""
    at = next(i for i in range(max(len(expected), len(got))) if expected[i: i + 1] != got[i: i + 1])
    want, have = (expected[at] if at < len(expected) else None), (got[at] if at < len(got) else None)
    ended_right = bool(expected) and expected[-1] == ("user", "Correct.")
    if want and have and want[0] == "user" and have[0] != "user":
        return "the environment's reply is a message with role 'user': [{'role': 'user', 'content': ...}]"
    if method == "env_response" and want and have and want[1] != have[1]:
        return ("the environment judged this answer differently: parse the model's last turn with "
                "self.parser.parse_answer(messages) (the number after its LAST '####'), compare the NUMBERS "
                "(canonical_number of it and of state['answer']: '1600', '1,600', '$1,600' and '1600.' are one "
                "number, '1600.5' and '-1600' are others), set state['solved'] and say 'Correct.' exactly when they "
                "are equal")
    if (want is None or want[0] == "-") and ended_right:
        return ("it said 'Correct.' and the conversation went on: set state['solved'] = True in env_response, and end "
                "the conversation once it is (is_completed)")
    if want is None or want[0] == "-":
        return ("after the model's last allowed turn (max_turns) the conversation must end: ask the base class, "
                "await vf.MultiTurnEnv.is_completed(self, messages, state, **kwargs), which checks max_turns")
    if max_turns == -1:
        return ("with max_turns=-1 (verifiers' default: no limit on turns) it ended before a right answer: ask the "
                "base class, await vf.MultiTurnEnv.is_completed(self, messages, state, **kwargs), which knows that "
                "-1 means no limit")
    return ("it ended before the model had its max_turns turns and before a right answer: one turn early? End it "
            "when state['solved'] is True, or when the base class says so; count turns with state['turn'], not the "
            "messages (the prompt holds the system prompt and the question)")


@checks_exercise("03-is-completed")
def feedback_is_completed(is_completed: Callable) -> str | None:
    """is_completed(self, messages, state), awaited: over after a right answer, or at max_turns (the base class)."""
    return _first_difference("is_completed", is_completed)


@checks_exercise("03-env-response")
def feedback_env_response(env_response: Callable) -> str | None:
    """env_response(self, messages, state), awaited: parse the last model turn, set state['solved'], reply."""
    return _first_difference("env_response", env_response)
