"""The labs (notebooks/lab*_*.py, nmt_experiments.pages.labs): one source gives the book's page and the
student's notebook; every check fails, with its one sentence, on the skeleton and on each typical
wrong answer, and passes on the solution; the student's notebook stops at its first check with
that sentence alone (no traceback), and the page's form runs top to bottom, at the smallest
sizes (papermill parameters)."""

import os
import sys

import jupytext
import nbformat
import papermill
import pytest
import torch

from nmt_experiments.pages.labs import checks, student
from tools import labs as labs_cli
from tools import notebooks as runner

ROOT = runner.ROOT
#: The smallest sizes at which each lab runs top to bottom (its papermill parameters).
SMALL = {
    "lab1_attention": {"updates": 3, "batch_size": 4},
    "lab2_why_attention": {"updates": 3, "batch_size": 4, "max_len": 6, "n_test": 2},
    "lab3_scores": {"updates": 3, "batch_size": 4},
}
#: What each check says about the skeleton (a function that raises NotImplementedError).
NOT_WRITTEN = "not written yet"


def right(s, h, Uh, mask, W_a, v_a):
    e = torch.tanh(Uh + (s @ W_a.T)[:, None]) @ v_a
    a = e.masked_fill(~mask, float("-inf")).softmax(-1)
    return (a[..., None] * h).sum(1), a


def wrong_axis(s, h, Uh, mask, W_a, v_a):
    e = torch.tanh(Uh + (s @ W_a.T)[:, None]) @ v_a
    a = e.masked_fill(~mask, float("-inf")).softmax(0)
    return (a[..., None] * h).sum(1), a


def unmasked(s, h, Uh, mask, W_a, v_a):
    a = (torch.tanh(Uh + (s @ W_a.T)[:, None]) @ v_a).softmax(-1)
    return (a[..., None] * h).sum(1), a


def transposed(*args):
    c, a = right(*args)
    return c, a.T


def weight_transposed(s, h, Uh, mask, W_a, v_a):
    return right(s, h, Uh, mask, W_a.T, v_a)


def sum_over_batch(*args):
    c, a = right(*args)
    return (a[..., None] * args[1]).sum(0), a


def sum_over_features(*args):
    c, a = right(*args)
    return (a[..., None] * args[1]).sum(-1), a


def other_rows(*args):
    c, a = right(*args)
    return c.flip(0), a


def tanh_outside(s, h, Uh, mask, W_a, v_a):
    e = torch.tanh((Uh + (s @ W_a.T)[:, None]) @ v_a)
    a = e.masked_fill(~mask, float("-inf")).softmax(-1)
    return (a[..., None] * h).sum(1), a


def skeleton(*args):
    raise NotImplementedError("write e, alpha and c")


@pytest.mark.parametrize(
    "fn, says",
    [
        (wrong_axis, "softmax over the wrong axis"),
        (unmasked, "padding not masked"),
        (transposed, "shapes transposed"),
        (weight_transposed, "check each product's shapes"),
        (sum_over_batch, "the sum over the wrong index: you summed over the sentences"),
        (sum_over_features, "the sum over the wrong index: you summed over the annotation's"),
        (other_rows, "the sum over the wrong index"),
        (tanh_outside, "the weights differ from the paper's"),
        (skeleton, NOT_WRITTEN),
    ],
)
def test_the_attention_check_names_each_mistake(fn, says):
    with pytest.raises(checks.CheckFailed, match=says) as e:
        checks.check_attention(fn)
    assert e.value._render_traceback_() == [f"✗ {e.value}"]  # one line in Jupyter
    with pytest.raises(checks.CheckFailed):
        checks.check_model(fn)


def test_the_checks_pass_on_the_solution(capsys):
    checks.check_attention(right)
    checks.check_model(right)
    assert capsys.readouterr().out.count("✓") == 2


def test_the_score_checks_name_each_mistake(capsys):
    dot = lambda h, hb: (hb @ h[:, :, None]).squeeze(-1)  # noqa: E731
    general = lambda h, hb, W: (hb @ W.T @ h[:, :, None]).squeeze(-1)  # noqa: E731
    checks.check_score(dot, "dot")
    checks.check_score(general, "general")
    assert capsys.readouterr().out.count("✓") == 2
    wrong = [
        (lambda h, hb: dot(h, hb) / 2, "dot", "scaled by 1/sqrt"),
        (lambda h, hb: dot(h, hb).T, "dot", "shapes transposed"),
        (lambda h, hb: dot(h, hb) + 1, "dot", "differs from Luong's"),
        (lambda h, hb, W: (hb @ W @ h[:, :, None]).squeeze(-1), "general", "wrong side"),
        (lambda h, hb, W: dot(h, hb), "general", "differs from Luong's"),
        (skeleton, "dot", NOT_WRITTEN),
        (skeleton, "general", NOT_WRITTEN),
    ]
    for fn, score, says in wrong:
        with pytest.raises(checks.CheckFailed, match=says):
            checks.check_score(fn, score)


def test_one_source_gives_the_student_notebook(tmp_path):
    """The command writes one notebook per lab into the folder, without solutions or book tags,
    with skeletons and ``book = False``; every skeleton fails its lab's checks."""
    assert labs_cli.main(["--out", str(tmp_path)]) == 0
    written = sorted(p.name for p in tmp_path.iterdir())
    assert written == [f"{p.stem}.ipynb" for p in student.sources()] and len(written) >= 1
    for src in student.sources():
        page = jupytext.read(src)
        tags = [c.metadata.get("tags", []) for c in page.cells]
        assert ["parameters"] in tags and "book = True" in page.cells[
            tags.index(["parameters"])
        ].source
        n_solution = sum(student.SOLUTION in t for t in tags)
        assert n_solution == sum(student.SKELETON in t for t in tags) >= 1, src.name
        for k, t in enumerate(tags):  # a skeleton, then its solution; hidden on the page
            if student.SKELETON in t:
                assert "remove-cell" in t and student.SOLUTION in tags[k + 1], src.name
                assert "hide-input" in tags[k + 1], src.name
        nb = nbformat.read(tmp_path / f"{src.stem}.ipynb", as_version=4)
        nbformat.validate(nb)
        for cell in nb.cells:
            t = set(cell.metadata.get("tags", []))
            assert not t & (student.BOOK_TAGS | {student.SOLUTION, student.SKELETON})
            assert not cell.get("outputs")
        params = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
        assert "book = False" in params[0].source
        skeletons = [c.source for c in nb.cells if "NotImplementedError(" in c.source]
        assert len(skeletons) == n_solution


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    """A ``python3`` kernel of this interpreter that imports this checkout's packages."""
    old = os.environ.get("PYTHONPATH"), os.environ.get("JUPYTER_PATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), old[0]]))
    runner._register_kernel(tmp_path_factory.mktemp("kernel"))
    yield sys.executable
    for key, value in zip(("PYTHONPATH", "JUPYTER_PATH"), old, strict=True):
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def execute(nb, out, parameters):
    return papermill.execute_notebook(
        nb,
        str(out),
        parameters=parameters,
        kernel_name=runner.KERNEL,
        cwd=str(ROOT),
        progress_bar=False,
        request_save_on_cell_execute=False,
    )


@pytest.mark.parametrize("src", student.sources(), ids=lambda p: p.stem)
def test_the_student_notebook_stops_at_its_first_check_saying_what_to_write(src, kernel, tmp_path):
    nb = student.student_notebook(src)
    with pytest.raises(papermill.PapermillExecutionError) as e:
        execute(nb, tmp_path / "student.ipynb", SMALL[src.stem])
    assert e.value.ename == "CheckFailed" and NOT_WRITTEN in e.value.evalue
    executed = nbformat.read(tmp_path / "student.ipynb", as_version=4)
    (error,) = [o for c in executed.cells for o in c.get("outputs", []) if o.output_type == "error"]
    assert error.traceback == [f"✗ {e.value.evalue}"]  # the sentence, no traceback


@pytest.mark.parametrize("src", student.sources(), ids=lambda p: p.stem)
def test_the_page_runs_with_the_solutions_and_every_check_passes(src, kernel, tmp_path):
    nb = student.solution_notebook(src)
    n_checks = sum(c.source.count("checks.check_") for c in nb.cells if c.cell_type == "code")
    execute(nb, tmp_path / "page.ipynb", {**SMALL[src.stem], "book": False})
    executed = nbformat.read(tmp_path / "page.ipynb", as_version=4)
    text = "".join(
        o.get("text", "") for c in executed.cells for o in c.get("outputs", []) if "text" in o
    )
    assert text.count("✓") == n_checks >= 1


@pytest.mark.parametrize("src", student.sources(), ids=lambda p: p.stem)
def test_every_check_of_a_lab_fails_on_its_skeletons(src):
    """Each ``checks.check_*(...)`` line of the lab, run on the skeletons of its source, fails
    with "not written yet" and what to write."""
    from nmt_lib.paper.model import Encoded, RNNsearch

    cells = jupytext.read(src).cells
    space = {"torch": torch, "RNNsearch": RNNsearch, "Encoded": Encoded, "checks": checks}
    for cell in cells:
        if student.SKELETON in cell.metadata.get("tags", []):
            exec(cell.source, space)
    calls = [
        line.strip()
        for c in cells
        if c.cell_type == "code" and student.SOLUTION not in c.metadata.get("tags", [])
        for line in c.source.splitlines()
        if line.startswith("checks.check_")
    ]
    assert calls, src.name
    for call in calls:
        with pytest.raises(checks.CheckFailed, match=f"^{NOT_WRITTEN}: in "):
            eval(call, space)


def test_the_accuracy_check_names_each_mistake(capsys):
    from nmt_experiments.pages.labs.toy import word_accuracy

    def per_sentence(hyps, refs):
        return sum(h == r for h, r in zip(hyps, refs, strict=True)) / len(refs)

    def by_hypothesis(hyps, refs):
        right = sum(
            sum(a == b for a, b in zip(h, r, strict=False)) for h, r in zip(hyps, refs, strict=True)
        )
        return right / sum(map(len, hyps))

    def anywhere(hyps, refs):
        right = sum(sum(a in r for a in h[: len(r)]) for h, r in zip(hyps, refs, strict=True))
        return right / sum(map(len, refs))

    def no_eos(hyps, refs):
        return word_accuracy([h[:-1] for h in hyps], [r[:-1] for r in refs])

    def by_longer(hyps, refs):  # the words of the longer of the two
        right = word_accuracy(hyps, refs) * sum(map(len, refs))
        return right / sum(max(len(h), len(r)) for h, r in zip(hyps, refs, strict=True))

    checks.check_accuracy(word_accuracy)
    assert "✓" in capsys.readouterr().out
    for fn, says in [
        (per_sentence, "whole sentences"),
        (by_hypothesis, "divide by the reference's words"),
        (anywhere, "its own position i"),
        (by_longer, "divide by the reference's words"),
        (lambda h, r: word_accuracy(h, r) + 0.01, "on the right digits in the wrong order you"),
        (no_eos, "count EOS too"),
        (lambda h, r: [0.5], "return one number"),
    ]:
        with pytest.raises(checks.CheckFailed, match=says):
            checks.check_accuracy(fn)


def test_the_forward_only_check_names_each_mistake(capsys):
    from nmt_lib.paper.model import Encoded, RNNsearch

    def variant(keep_forward: bool, fresh_Uh: bool = True, zero: bool = True):
        class Variant(RNNsearch):
            def encode(self, x, x_mask):
                full, n = self.encoder(x, x_mask), self.cfg.n
                fwd, bwd = full[..., :n], full[..., n:]
                if zero:
                    fwd, bwd = (fwd, 0 * bwd) if keep_forward else (0 * fwd, bwd)
                h = torch.cat([fwd, bwd], -1)
                Uh = self.decoder.attention.precompute(h if fresh_Uh else full)
                return Encoded(x_mask, h, Uh)

        return Variant

    checks.check_forward_only(variant(True))
    assert "✓" in capsys.readouterr().out
    for cls, says in [
        (variant(False), "you removed the forward half"),
        (variant(True, fresh_Uh=False), "Uh still holds"),
        (variant(True, zero=False), "should be zero"),
        (RNNsearch, "should be zero"),
    ]:
        with pytest.raises(checks.CheckFailed, match=says):
            checks.check_forward_only(cls)
