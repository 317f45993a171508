"""Stage 2, mine: one run, its steps each a call into its own module, control passing down once:

    plan.context   the options checked into the run's context (RunContext: run folder, default folder,
                   warnings, start time, options)
    runlock        one mine a run folder at a time (runs/.<run>.lock)
    plan.plan_run  the shape (triangle, band of a grown index, --against rectangle) and its indexes opened
    engine         LocalEngine (mine.local_run) or RayEngine (mine.ray_run): the pairs found, ranked and
                   capped, with the growth state to keep (mine.engine.Mined); neither knows the run folder
    publish        the run folder written into a temporary folder and swapped in whole (MineResult)

Reads `indexes/<name>/` (vhmine.index); writes `runs/<run>/` (see vhmine.mine). `--plan` (Ray) sizes the job
instead (mine.sizing) and writes nothing.
"""

from __future__ import annotations


def mine_index(opts):
    """Mine the index into the run folder (a MineResult); with opts.plan (Ray only), size the job instead
    and return its MinePlan without mining. Ctrl-C becomes an Interrupted that says what was kept."""
    try:
        return _mine(opts)
    except KeyboardInterrupt:
        from vhmine.errors import Interrupted

        if opts.engine == "ray":  # finished tiles are files in the job folder: the same command resumes from them
            raise Interrupted(
                "interrupted: the tiles finished so far are kept in the run's job folder; run the same "
                "command to resume"
            ) from None
        # a run folder is published whole at the end: an interrupted one leaves nothing
        raise Interrupted(
            "interrupted: no run written (mine publishes its run folder whole, at the end; an earlier "
            "run there is as it was); run the same command to mine again"
        ) from None


def _mine(opts):
    from vhmine.mine.plan import context, plan_run

    ctx = context(opts)
    if opts.plan:  # Ray: size the job; nothing is written, so no lock
        from vhmine.mine.sizing import plan_ray

        return plan_ray(plan_run(ctx).a, opts)
    from vhmine.mine.runlock import run_lock

    with run_lock(ctx.run_dir):  # one mine a run folder at a time (a second says so, in one line)
        plan = plan_run(ctx)
        mined = engine(opts.engine).mine(plan)
        from vhmine.mine.publish import publish

        return publish(plan, mined)


def engine(name: str):
    """The engine --engine names (mine.engine.Engine): "local" or "ray"."""
    if name == "ray":
        from vhmine.mine.ray_run import RayEngine

        return RayEngine()
    from vhmine.mine.local_run import LocalEngine

    return LocalEngine()
