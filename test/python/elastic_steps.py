"""The failure-and-recovery loop the elastic checks share (torch_elastic.py, tf_elastic.py,
tf_graph.py), for any framework: its elastic `run` decorator and failing collective are
passed in."""


def run_failing_once(run, state, steps, commit_every, fail_at, fail, step_fn):
    """step_fn(state) for each step up to `steps` under the elastic decorator `run`,
    committing after every commit_every-th step; before step fail_at, once, fail() (a
    collective that fails on every rank). Returns the steps run, in order (those redone after
    the restore twice)."""
    failed, steps_run = [], []

    @run
    def loop(state):
        while state.step < steps:
            if state.step == fail_at and not failed:
                failed.append(state.step)
                fail()
            step_fn(state)
            steps_run.append(state.step)
            state.step += 1
            if state.step % commit_every == 0:
                state.commit()

    loop(state)
    return steps_run
