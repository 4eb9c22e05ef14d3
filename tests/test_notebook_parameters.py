"""Notebook parameters that papermill lets through: a misspelled name (papermill injects it and only warns,
so the notebook runs with its default), and a number of GSM8K problems larger than the split, whose loader
then advises -1, which the parameter rules refuse. Each is refused in the notebook's first code cell."""

import ast
import json

import pytest
from papermill.exceptions import PapermillExecutionError

from helpers import parameters
from helpers.notebook_runner import NOTEBOOKS, execute


def _defaults(notebook: str) -> dict:
    path = next(NOTEBOOKS.glob(f"{notebook}_*.ipynb"))
    cell = next(c for c in json.loads(path.read_text())["cells"] if "parameters" in c["metadata"].get("tags", []))
    return {node.targets[0].id: ast.literal_eval(node.value)
            for node in ast.parse("".join(cell["source"])).body if isinstance(node, ast.Assign)}


def _as_papermill_injects(values: dict) -> dict:
    """What a kernel's globals() hold after papermill's injected cell: the names, and that cell's source in
    IPython's input history (papermill's translators write "# Parameters" and one assignment per line)."""
    source = "# Parameters\n" + "".join(f"{key} = {value!r}\n" for key, value in values.items())
    return {"_ih": ["", "x = 1", source], **values}


@pytest.mark.slow
def test_a_misspelled_parameter_stops_the_notebook_in_its_first_cell(tmp_path):
    """Notebook 01 run by papermill with `num_exampels` (sic): papermill warned and ran all 12 problems."""
    with pytest.raises(PapermillExecutionError) as stopped:
        execute(next(NOTEBOOKS.glob("01_*.ipynb")), tmp_path / "01.ipynb", {"num_exampels": 2})
    said = str(stopped.value)
    assert "num_exampels: no notebook has this parameter (did you mean num_examples?)" in said, said[-2000:]
    assert "Notebook 01's parameters: model, base_url, split, num_examples" in said
    executed = json.loads((tmp_path / "01.ipynb").read_text())
    ran = [c for c in executed["cells"] if c["cell_type"] == "code" and c.get("execution_count")]
    assert 'check_parameters(globals(), "01")' in "".join(ran[-1]["source"]), "something ran after the check"


@pytest.mark.parametrize("notebook", sorted(parameters.NOTEBOOK_PARAMETERS))
def test_every_notebook_refuses_a_name_no_notebook_has_and_names_its_own(notebook):
    defaults = _defaults(notebook)
    with pytest.raises(ValueError, match="a parameter it does not have") as refused:
        parameters.check_parameters({**defaults, **_as_papermill_injects({"max_tokenz": 8})}, notebook)
    assert f"Notebook {notebook}'s parameters: {', '.join(parameters.NOTEBOOK_PARAMETERS[notebook])}" \
        in str(refused.value)
    parameters.check_parameters({**_as_papermill_injects(defaults)}, notebook)  # its own names, injected: fine


def test_another_notebooks_parameter_is_let_through():
    """scripts/run_notebooks.sh passes its -p to every notebook: `-p max_steps 2` is notebook 02's."""
    parameters.check_parameters({**_defaults("01"), **_as_papermill_injects({"max_steps": 2})}, "01")


def test_the_split_sizes_are_gsm8ks(gsm8k_dir):
    """The rule's row counts, compared with the GSM8K files the loader reads."""
    for split, rows in parameters.GSM8K_ROWS.items():
        with open(gsm8k_dir / f"{split}.jsonl", "rb") as f:
            assert sum(1 for line in f if line.strip()) == rows, split


@pytest.mark.parametrize("notebook", [n for n, rules in parameters.NOTEBOOK_PARAMETERS.items()
                                      if {"split", "num_examples"} <= set(rules)])
def test_more_problems_than_the_split_has_is_refused_with_advice_the_rules_accept(notebook):
    """The loader said "ask for at most 1319, or -1 for all" after the kernel started; -1 is refused here.
    Now the first cell says it, with a number the rules accept."""
    for split, rows in parameters.GSM8K_ROWS.items():
        values = {**_defaults(notebook), "split": split}
        parameters.check_parameters({**values, "num_examples": rows}, notebook)
        with pytest.raises(ValueError) as refused:
            parameters.check_parameters({**values, "num_examples": rows + 1}, notebook)
        said = str(refused.value)
        assert f"num_examples={rows + 1}: GSM8K's {split} split has {rows:,} problems" in said
        assert "-1" not in said
