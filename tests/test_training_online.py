"""lib.train_online, lib.StackedGatedRNN, the Part III tasks and the paper-scale artefacts."""
import json
import math
import os
import shutil

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import lib
from lib.book.artefacts import load_finished_groups, load_run
from lib.diagonal import DiagonalRecurrence
from tests.helpers import rel_err

F64 = torch.float64


def _teacher_setup(widths, seeds, teacher_seeds, T=6, batch=3, d=3):
    W = lib.lsa_teachers(d, teacher_seeds)
    task = lib.AttentionTeacherTask(*W, T=T, batch=batch, x_std=0.5, dtype=F64)
    return lib.StackedGatedRNN(d, widths, d, seeds, dtype=F64), task


@settings(max_examples=12, deadline=None)
@given(widths=st.lists(st.integers(1, 12), min_size=1, max_size=4), T=st.integers(1, 20),
       seed=st.integers(0, 10_000), last=st.booleans())
def test_stacked_forward_equals_each_member(widths, T, seed, last):
    """Member k of the stack computes exactly what the unpadded network computes (step loop)."""
    stack = lib.StackedGatedRNN(3, widths, 2, [seed + k for k in range(len(widths))], dtype=F64)
    x = torch.randn(len(widths), 4, T, 3, generator=torch.Generator().manual_seed(seed), dtype=F64)
    with torch.no_grad():
        y = stack(x, last_only=last)
        for k in range(len(widths)):
            ref = stack.member(k)(x[k], method="step")
            assert rel_err(y[k], ref[:, -1] if last else ref) <= 1e-10


def test_recurrence_backward_equals_autograd_of_the_loop():
    g = torch.Generator().manual_seed(0)
    lam = torch.rand(2, 1, 5, generator=g, dtype=F64).requires_grad_()
    u = torch.randn(2, 7, 3, 5, generator=g, dtype=F64).requires_grad_()
    assert torch.autograd.gradcheck(DiagonalRecurrence.apply, (lam, u))
    h = DiagonalRecurrence.apply(lam, u)
    # the plain loop, time axis 1, through autograd
    hs, prev = [], torch.zeros_like(u[:, 0])
    for t in range(u.shape[1]):
        prev = lam * prev + u[:, t]
        hs.append(prev)
    loop = torch.stack(hs, dim=1)
    w = torch.randn_like(loop)
    ga = torch.autograd.grad((h * w).sum(), (lam, u))
    gb = torch.autograd.grad((loop * w).sum(), (lam, u))
    assert rel_err(h, loop) <= 1e-12
    assert all(rel_err(a, b) <= 1e-12 for a, b in zip(ga, gb))


def test_stacked_training_equals_separate_runs_and_padding_stays_zero():
    """K members trained in one stack follow their separate runs to <= 1e-12 (float64)."""
    widths, seeds, teachers, data = [2, 5, 7], [0, 1, 2], [10, 11, 12], [20, 21, 22]
    stack, task = _teacher_setup(widths, seeds, teachers)
    h = lib.train_online(stack, task, steps=40, data_seeds=data, lr=1e-2, log_every=10)
    assert h["loss"].shape == (4, 3) and h["step"].tolist() == [10, 20, 30, 40]
    for k in range(3):
        one, task_k = _teacher_setup([widths[k]], [seeds[k]], [teachers[k]])
        hk = lib.train_online(one, task_k, steps=40, data_seeds=[data[k]], lr=1e-2, log_every=10)
        for p, q in zip(stack.member(k).parameters(), one.member(0).parameters()):
            p, q = p.detach(), q.detach()
            assert float((p - q).abs().max()) <= 1e-12 * max(1.0, float(q.abs().max()))
        assert float((h["loss"][:, k] - hk["loss"][:, 0]).abs().max()) <= 1e-12
    w = widths[0]
    for name in ("W_in_m", "W_in_x"):
        assert torch.count_nonzero(getattr(stack, name)[0, w:]) == 0
    for name in ("W_out_m", "W_out_x"):
        P = getattr(stack, name)[0]
        assert torch.count_nonzero(P[w:]) == 0 and torch.count_nonzero(P[:, w:]) == 0
    assert torch.count_nonzero(stack.D[0, :, w:]) == 0
    assert (h["loss"][-1] < h["loss"][0]).all()                 # every member learned something


def test_icl_stack_uses_the_last_step_and_equals_separate_runs():
    task = lib.ICLTask(K=2, T=5, d_x=2, d_y=2, batch=4, dtype=F64)
    stack = lib.StackedGatedRNN(4, [6, 3], 2, [0, 1], dtype=F64)
    x, y = task.sample([torch.Generator().manual_seed(s) for s in (5, 6)])
    assert x.shape == (2, 4, 6, 4) and y.shape == (2, 4, 2)
    assert torch.count_nonzero(x[:, :, -1, 2:]) == 0           # the query carries no y
    h = lib.train_online(stack, task, steps=25, data_seeds=[5, 6], lr=1e-2, log_every=5)
    one = lib.StackedGatedRNN(4, [3], 2, [1], dtype=F64)
    h1 = lib.train_online(one, lib.ICLTask(K=1, T=5, d_x=2, d_y=2, batch=4, dtype=F64), steps=25,
                          data_seeds=[6], lr=1e-2, log_every=5)
    assert float((h["loss"][:, 1] - h1["loss"][:, 0]).abs().max()) <= 1e-12


def test_module_stack_trains_recurrent_nets():
    nets = [lib.RecurrentNet(kind, 4, 5, 2, seed=k, dtype=F64) for k, kind in enumerate(("gru", "lru_in_out"))]
    stack = lib.ModuleStack(nets)
    task = lib.ICLTask(K=2, T=4, d_x=2, d_y=2, batch=4, dtype=F64)
    h = lib.train_online(stack, task, steps=20, data_seeds=[1, 2], lr=1e-2, log_every=10)
    assert h["loss"].shape == (2, 2) and torch.isfinite(h["loss"]).all()


def test_interrupted_run_resumes_bit_identical(tmp_path):
    def fresh():
        return _teacher_setup([4, 6], [3, 4], [30, 31])

    full, task = fresh()
    ref = lib.train_online(full, task, steps=30, data_seeds=[1, 2], lr=1e-2, log_every=5)

    model, task = fresh()
    ckpt = tmp_path / "ckpt.pt"

    def interrupt(step, losses):
        if step == 20:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        lib.train_online(model, task, steps=30, data_seeds=[1, 2], lr=1e-2, log_every=5, checkpoint=ckpt,
                         checkpoint_every=10, on_log=interrupt)
    assert torch.load(ckpt, weights_only=True)["step"] == 10   # the step-20 save never happened
    model, task = fresh()                                        # a new process: fresh weights
    out = lib.train_online(model, task, steps=30, data_seeds=[1, 2], lr=1e-2, log_every=5, checkpoint=ckpt,
                           checkpoint_every=10)
    assert out["resumed_from"] == 10
    for p, q in zip(model.parameters(), full.parameters()):
        assert torch.equal(p, q)
    assert torch.equal(out["loss"], ref["loss"]) and torch.equal(out["step"], ref["step"])
    with pytest.raises(ValueError, match="other settings: steps 30 in the checkpoint, 31 now; resume"):
        lib.train_online(model, task, steps=31, data_seeds=[1, 2], lr=1e-2, log_every=5, checkpoint=ckpt)
    with pytest.raises(ValueError, match="log_every 5 in the checkpoint, 10 now"):
        lib.train_online(model, task, steps=30, data_seeds=[1, 2], lr=1e-2, log_every=10, checkpoint=ckpt)


def test_cosine_schedule_matches_torch():
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=1e-3)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=50, eta_min=1e-6)
    for step in range(1, 51):
        assert math.isclose(opt.param_groups[0]["lr"], lib.cosine_lr(step, 50, 1e-3, 1e-6), rel_tol=1e-9)
        opt.step()
        sched.step()


def test_bad_input():
    stack, task = _teacher_setup([2, 3], [0, 1], [5, 6])
    with pytest.raises(ValueError, match="data_seeds"):
        lib.train_online(stack, task, steps=2, data_seeds=[1])
    with pytest.raises(ValueError, match="steps"):
        lib.train_online(stack, task, steps=0, data_seeds=[1, 2])
    with pytest.raises(ValueError, match="lr_min"):
        lib.train_online(stack, task, steps=2, data_seeds=[1, 2], lr=1e-4, lr_min=1e-3)
    with pytest.raises(ValueError, match="weight_decay"):
        lib.train_online(stack, task, steps=2, data_seeds=[1, 2], weight_decay=-1.0)
    three, _ = _teacher_setup([2, 3, 4], [0, 1, 2], [5, 6, 7])
    with pytest.raises(ValueError, match="members"):
        lib.train_online(three, task, steps=2, data_seeds=[1, 2, 3])
    with pytest.raises(ValueError, match="dtype"):
        f32 = lib.StackedGatedRNN(3, [2, 3], 3, [0, 1], dtype=torch.float32)
        lib.train_online(f32, task, steps=2, data_seeds=[1, 2])
    with pytest.raises(TypeError, match="stack"):
        lib.train_online(lib.GatedLinearRNN(3, 2, 3), task, steps=2, data_seeds=[1, 2])
    with pytest.raises(ValueError, match="widths and seeds"):
        lib.StackedGatedRNN(3, [2, 3], 3, [0])
    with pytest.raises(ValueError, match="x_std"):
        lib.AttentionTeacherTask(*lib.lsa_teachers(2, [0]), T=3, batch=2, x_std=0.0)
    with pytest.raises(ValueError, match="batch"):
        lib.ICLTask(K=1, T=3, d_x=2, d_y=2, batch=0)


def _tiny_run(monkeypatch, root):
    """A two-group in-context run declared in a throw-away experiment, results under ``root``."""
    from lib.book import experiments as ex
    from tools import paper

    exp = ex.Experiment("_tiny", dict(
        T=ex.fixed(3, "test"), d_x=ex.fixed(1, "test"), d_y=ex.fixed(1, "test"), batch=ex.fixed(2, "test"),
        sigma_w2=ex.fixed(1.0, "test"), sigma_x2=ex.fixed(1.0, "test"), steps=ex.Setting(2, 4, "test"),
        lr=ex.fixed(1e-3, "test"), lr_min=ex.fixed(1e-6, "test"), weight_decay=ex.fixed(1e-4, "test")))
    spec = ex.OnlineRun("_tiny", "test", "icl", (ex.Group((2, 3), (0, 1)), ex.Group((2,), (5,), kind="gru")),
                        snapshots=(2,))
    monkeypatch.setitem(ex.RUNS, "_tiny", (exp, spec))
    monkeypatch.setattr(paper, "RESULTS", root)
    return paper


def test_artefact_checksums_are_verified(tmp_path, monkeypatch):
    """A run written by tools/paper.py loads back; a changed byte or a missing file is an error."""
    root = tmp_path / "results"
    paper = _tiny_run(monkeypatch, root)
    paper.run("_tiny", None, "cpu", False, 2, root)
    run = load_run("_tiny", root)
    meta = run["meta"]
    assert meta["steps"] == 4 and meta["experiment"] == "_tiny" and "git_commit" in meta
    assert [m.W_in_m.shape[0] for m in run["groups"][0]["members"]] == [2, 3]
    assert sorted(run["groups"][0]["snapshots"]) == [2] and len(meta["group_segments"]) == 2
    assert not (root / "runs" / "_tiny").exists()
    f = root / "_tiny" / "meta.json"
    f.write_text(json.dumps({**meta, "steps": 5}))
    with pytest.raises(ValueError, match="checksum mismatch"):
        load_run("_tiny", root)
    shutil.rmtree(root / "_tiny")
    with pytest.raises(FileNotFoundError, match="make paper EXP=_tiny"):
        load_run("_tiny", root)


def test_a_stored_run_is_replaced_only_when_asked(tmp_path, monkeypatch):
    """A second run of a stored name stays in runs/NAME; --replace replaces the stored run and
    keeps the replaced one, verified, in NAME/replaced."""
    root = tmp_path / "results"
    paper = _tiny_run(monkeypatch, root)
    paper.run("_tiny", None, "cpu", False, 2, root)
    stored = (root / "_tiny" / "run.pt").read_bytes()
    with pytest.raises(FileNotFoundError, match="--replace"):
        load_run("_tiny", root, replaced=True)                        # nothing replaced yet
    with pytest.raises(SystemExit, match="is a stored run.*--replace"):
        paper.run("_tiny", 2, "cpu", False, 1, root)
    assert (root / "_tiny" / "run.pt").read_bytes() == stored          # untouched
    assert (root / "runs" / "_tiny" / "group-0.pt").is_file()          # the new run is kept
    paper.run("_tiny", 2, "cpu", False, 1, root, replace=True)
    assert load_run("_tiny", root)["meta"]["steps"] == 2
    assert (root / "_tiny" / "replaced" / "run.pt").read_bytes() == stored
    assert load_run("_tiny", root, replaced=True)["meta"]["steps"] == 4
    (root / "_tiny" / "replaced" / "meta.json").write_text("{}")
    with pytest.raises(ValueError, match="checksum mismatch"):
        load_run("_tiny", root, replaced=True)


def test_groups_are_independent_jobs(tmp_path, monkeypatch):
    """--group trains one group; the run is stored when the last group is finished."""
    root = tmp_path / "results"
    paper = _tiny_run(monkeypatch, root)
    assert paper.run("_tiny", None, "cpu", False, 2, root, groups=[1]) == root / "runs" / "_tiny"
    assert not (root / "_tiny").exists()
    paper.run("_tiny", None, "cpu", False, 2, root, groups=[0])
    assert load_run("_tiny", root)["meta"]["steps"] == 4


def test_a_run_in_progress_shows_its_finished_groups_and_the_others_steps(tmp_path, monkeypatch):
    """load_finished_groups: a finished group comes back with its trained weights, a checkpoint as
    its step, a file at another group's place is refused, and a joined run leaves nothing."""
    root = tmp_path / "results"
    paper = _tiny_run(monkeypatch, root)
    assert load_finished_groups("_tiny", root) == {"paper_steps": 4, "n_groups": 2, "finished": [], "training": []}
    paper.run("_tiny", None, "cpu", False, 2, root, groups=[1])
    work = root / "runs" / "_tiny"
    torch.save({"step": 3, "config": {"steps": 4}}, work / "group-0.checkpoint.pt")
    progress = load_finished_groups("_tiny", root)
    assert progress["training"] == [{"index": 0, "kind": "gated", "layers": 1, "step": 3, "steps": 4, "segments": [],
                                     "seconds": 0}]
    assert paper._progress_line("_tiny", root) == "1 of 2 groups finished; training: group 0 at 3 of 4 steps"
    (work / "group-0.checkpoint.pt").rename(work / "moved.pt")                    # (make paper's listing)
    assert paper._progress_line("_tiny", root) == "1 of 2 groups finished; not started: 0"
    (work / "moved.pt").rename(work / "group-0.checkpoint.pt")
    [g] = progress["finished"]
    assert (g["index"], g["kind"], g["steps"], g["widths"], g["data_seeds"]) == (1, "gru", 4, [2], [1005])
    state = torch.load(work / "group-1.pt", weights_only=True)["state"]
    got = g["model"].state_dict()
    assert state and all(torch.equal(got[k], v.double()) for k, v in state.items())
    assert len(g["members"]) == g["model"].K == 1
    (work / "group-0.checkpoint.pt").unlink()
    shutil.copy(work / "group-1.pt", work / "group-0.pt")            # the GRU group at the gated group's place
    with pytest.raises(ValueError, match="group-0.pt.*not group 0"):
        load_finished_groups("_tiny", root)
    (work / "group-0.pt").unlink()
    paper.run("_tiny", None, "cpu", False, 2, root, groups=[0])       # the last group: the run is joined
    assert load_finished_groups("_tiny", root)["finished"] == []


def test_a_group_resumes_with_the_logging_block_its_checkpoint_was_written_with(tmp_path, monkeypatch):
    """Without --log-every a group trains and resumes with its declared logging block; a value
    (given or declared) other than its checkpoint's is refused by name before any training."""
    import dataclasses

    from lib.book import experiments as ex

    root = tmp_path / "results"
    paper = _tiny_run(monkeypatch, root)
    exp, spec = ex.RUNS["_tiny"]
    monkeypatch.setitem(ex.RUNS, "_tiny", (exp, dataclasses.replace(spec, log_every=1)))
    train, calls = lib.train_online, []

    def interrupted(*args, **kw):                      # the first call stops after step 2's checkpoint
        calls.append(kw["log_every"])
        if len(calls) == 1:
            def stop(step, losses):
                if step == 3:
                    raise KeyboardInterrupt
            kw["on_log"] = stop
        return train(*args, **kw)

    monkeypatch.setattr(lib, "train_online", interrupted)
    with pytest.raises(KeyboardInterrupt):
        paper.run("_tiny", None, "cpu", False, None, root, groups=[0])
    ckpt = root / "runs" / "_tiny" / "group-0.checkpoint.pt"
    written = ckpt.read_bytes()
    assert torch.load(ckpt, weights_only=True)["config"]["log_every"] == 1 and calls == [1]
    [t] = load_finished_groups("_tiny", root)["training"]                 # the segment that reached it
    assert (t["index"], t["step"], len(t["segments"])) == (0, 2, 1) and t["segments"][0]["last_step"] == 2
    assert t["seconds"] == t["segments"][0]["seconds"] > 0
    with pytest.raises(SystemExit, match=r"logging every 1 steps, and --log-every 2 differs: resume it with "
                                         r"--log-every 1"):
        paper.run("_tiny", None, "cpu", False, 2, root, groups=[0])
    monkeypatch.setitem(ex.RUNS, "_tiny", (exp, dataclasses.replace(spec, log_every=3)))
    with pytest.raises(SystemExit, match=r"the declared log_every 3 of _tiny group 0"):
        paper.run("_tiny", None, "cpu", False, None, root, groups=[0])
    assert ckpt.read_bytes() == written and calls == [1]             # refused before any training
    monkeypatch.setitem(ex.RUNS, "_tiny", (exp, dataclasses.replace(spec, log_every=1)))
    paper.run("_tiny", None, "cpu", False, None, root, groups=[0])   # resumes with the declared value
    done = torch.load(root / "runs" / "_tiny" / "group-0.pt", weights_only=True)
    assert calls == [1, 1] and done["history"]["step"].tolist() == [1, 2, 3, 4] and len(done["segments"]) == 2
    with pytest.raises(ValueError, match="log_every must be an integer >= 1"):
        dataclasses.replace(spec, log_every=0)


def test_the_committed_runs_in_progress_resume_with_their_declared_logging_block():
    """Every checkpoint and finished group in results/runs was written with the logging block its
    run declares (so that the documented resume command, with no --log-every, resumes it)."""
    from lib.book import experiments as ex
    from lib.book.artefacts import work_folder

    seen = 0
    for name, (_, spec) in ex.RUNS.items():
        for i in range(len(spec.groups)):
            for f in (work_folder(name) / f"group-{i}.checkpoint.pt", work_folder(name) / f"group-{i}.pt"):
                if f.is_file():
                    state = torch.load(f, map_location="cpu", weights_only=True)
                    step = state["hist_step"] if "config" in state else state["history"]["step"].tolist()
                    assert (state["config"]["log_every"] if "config" in state else step[0]) \
                        == spec.log_every_of(i), f
                    seen += 1
    assert seen == sum(1 for _ in (work_folder("arch_teacher").parent).glob("*/group-*.pt"))   # every file checked


def test_jobs_run_at_most_the_limit_at_a_time(tmp_path, monkeypatch):
    """_submit keeps at most `jobs` groups running (the next starts when one is done), submits
    each group once, and raises a failed group; the local default is one process a core."""
    submitit = pytest.importorskip("submitit")
    from tools import paper

    state = {"running": 0, "most": 0, "submitted": []}

    class Job:
        def __init__(self, i):
            self.i, self.polls = i, 0
            state["running"] += 1
            state["most"] = max(state["most"], state["running"])

        def done(self):
            self.polls += 1
            return self.polls >= 2 + self.i % 3              # groups finish at different times

        def result(self):
            state["running"] -= 1
            if self.i == 99:
                raise RuntimeError("group 99 failed")
            return "ok"

    class Executor:
        def __init__(self, folder, cluster):
            pass

        def update_parameters(self, **kw):
            pass

        def submit(self, fn, name, i, *args):
            state["submitted"].append(i)
            return Job(i)

    monkeypatch.setattr(submitit, "AutoExecutor", Executor)
    run = paper.Run("_x", None, None, tmp_path)
    paper._submit(run, list(range(7)), 2, "cpu", 1, "local", 1, jobs=2, poll_s=0)
    assert state["most"] == 2 and sorted(state["submitted"]) == list(range(7)) and state["running"] == 0
    state.update(most=0, submitted=[])
    paper._submit(run, [0, 1, 2], 2, "cpu", 1, "slurm", 1, poll_s=0)
    assert state["most"] == 3                                  # SLURM: all at once, the scheduler queues
    with pytest.raises(RuntimeError, match="group 99"):
        paper._submit(run, [99, 1, 2], 2, "cpu", 1, "local", 1, jobs=1, poll_s=0)
    assert paper.job_limit("local", 1, None, 10) == max(1, os.cpu_count() or 1)
    assert paper.job_limit("local", 64, None, 10) == 1 and paper.job_limit("local", 1, 3, 10) == 3


@pytest.mark.parametrize("args, message", [(["--jobs", "0", "--executor", "local"], "--jobs must be a positive"),
                                           (["--jobs", "2"], "used with --executor"),
                                           (["--threads", "0"], "--threads must be a positive"),
                                           (["--log-every", "0"], "--log-every must be a positive")])
def test_run_options_are_refused_by_name_before_any_work(args, message, tmp_path):
    from tools import paper

    with pytest.raises(SystemExit, match=message):
        paper.main(["run", "teacher_width", "--results", str(tmp_path), *args])
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("name", ["teacher", "teacher_width", "teacher_protocol", "icl", "icl_width", "arch_teacher",
                                  "arch_icl"])
def test_committed_artefacts_load(name):
    """Every paper-scale artefact in the repository matches its checksum and its configuration."""
    run = load_run(name)
    meta = run["meta"]
    assert meta["experiment"] == name and meta["steps"] >= 1 and meta["paper_steps"] >= meta["steps"]
    from lib.book import experiments

    spec = experiments.run_of(name)[1]
    for i, (g, cfg) in enumerate(zip(run["groups"], meta["config"]["groups"])):
        assert g["widths"] == cfg["widths"] and int(g["history"]["step"][-1]) == meta["steps"]
        assert int(g["history"]["step"][0]) == spec.log_every_of(i)        # the registry's logging block


def test_a_stack_rebuilt_from_its_members_computes_what_it_computed():
    stack = lib.StackedGatedRNN(3, [5, 2, 4], 2, [3, 4, 5], dtype=F64)
    x = torch.randn(3, 2, 6, 3, generator=torch.Generator().manual_seed(0), dtype=F64)
    state = torch.random.get_rng_state()
    again = lib.StackedGatedRNN.from_members([stack.member(k) for k in range(stack.K)])
    assert torch.equal(torch.random.get_rng_state(), state)          # the global RNG is untouched
    assert again.widths == stack.widths and again.W_in_m.dtype == F64
    for name, p in stack.named_parameters():
        assert torch.allclose(getattr(again, name), p, rtol=0, atol=1e-15), name
    assert torch.allclose(again(x), stack(x), rtol=1e-13, atol=1e-15)
    f32 = lib.StackedGatedRNN.from_members([stack.member(0)], dtype=torch.float32)
    assert f32.W_in_m.dtype == torch.float32 and f32.widths == [5]
    with pytest.raises(ValueError, match="share d_in"):
        lib.StackedGatedRNN.from_members([stack.member(0), lib.StackedGatedRNN(2, [2], 2, [0], dtype=F64).member(0)])
    with pytest.raises(TypeError, match="non-empty list of GatedLinearRNN"):
        lib.StackedGatedRNN.from_members([])


def test_groups_run_as_jobs_through_submitit(tmp_path):
    """--executor local: every group of a declared run is a submitit job (local processes here, a
    SLURM cluster elsewhere); the run is stored once the jobs are done."""
    pytest.importorskip("submitit")
    from tools import paper

    root = tmp_path / "results"
    out = paper.run("teacher_width", 2, "cpu", False, 1, root, executor="local", threads=1, jobs=2)
    assert out == root / "teacher_width"
    run = load_run("teacher_width", root)
    assert run["meta"]["steps"] == 2 and len(run["meta"]["group_segments"]) == 4
    assert all(seg["command"] for segs in run["meta"]["group_segments"] for seg in segs)
