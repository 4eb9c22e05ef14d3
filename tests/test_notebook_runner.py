"""helpers.notebook_runner saves a progress bar as one line (issue 43, item 6: section 12's cell saved
~200 'Running 200 rollouts' lines, one per refresh of verifiers' bar)."""

from __future__ import annotations

import nbformat

from helpers.notebook_runner import execute

# verifiers' evaluation bar, as it draws it: tqdm_asyncio.gather in a worker thread (helpers.in_worker_thread)
BAR_CELL = '''
import asyncio, threading
from tqdm.asyncio import tqdm_asyncio

async def rollouts():
    async def one(i):
        await asyncio.sleep(0.15)
    await tqdm_asyncio.gather(*[one(i) for i in range(12)], total=12, desc="Running 12 rollouts", mininterval=0)

worker = threading.Thread(target=lambda: asyncio.run(rollouts()))
worker.start(); worker.join()
print("done")
'''


def test_a_progress_bar_is_saved_as_its_last_line(tmp_path):
    notebook = tmp_path / "bar.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(BAR_CELL)],
                                            metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                                     "language": "python"}}), notebook)
    outputs = execute(notebook, tmp_path / "out.ipynb")["cells"][0]["outputs"]
    text = {name: ["".join(o["text"]) for o in outputs if o.get("name") == name] for name in ("stdout", "stderr")}
    assert len(text["stderr"]) == 1, outputs
    lines = [line for line in text["stderr"][0].splitlines() if "Running 12 rollouts" in line]
    assert len(lines) == 1 and "12/12" in lines[0], text["stderr"][0]
    assert "done" in "".join(text["stdout"])
