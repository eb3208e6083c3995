"""A run of a profile's cells, as ``scorebench run`` and the nightly job make it: the plan
(:func:`suite.sweep.plan_run`), the results store, the executor, :func:`suite.scheduler.run_cells`
with a live progress display, and the summary.

The functions read the parsed options of ``scorebench run`` (``args``: ``profile``, ``tasks``,
``scorers``, ``seeds``, ``no_tuning``, ``results``, ``workers``, ``executor`` and its options,
``plugin``, ``rerun``, ``fail_fast``, ``fast``); a bad option is a ``SystemExit`` naming it.
"""
from __future__ import annotations

import sys


def plan_cells(args):
    """The profile and the planned cells of the selection; a selection without cells is an
    error."""
    from tasks import TaskError

    import scorers

    from .preflight import check_new_scorers
    from .profiles import ProfileError, load_profile
    from .sweep import plan_run

    try:
        profile = load_profile(args.profile)
        plan = plan_run(profile, tasks=args.tasks, scorers=args.scorers, seeds=args.seeds,
                        tune=not getattr(args, "no_tuning", False))
    except (ProfileError, TaskError, scorers.ScorerError) as e:
        raise SystemExit(f"scorebench run: {e}") from None
    if not plan.planned and not plan.pending_reports:
        raise SystemExit("scorebench run: the selection has no cells (no task or no scorer)")
    check_new_scorers([p.cell for p in (*plan.planned, *plan.pending_reports)],
                      getattr(args, "command", None) or "run")
    return profile, plan


def open_store(results):
    """The :class:`~suite.store.ResultStore` of the results directory ``results``."""
    from leaderboard.loading.schema import RecordError
    from .store import ResultStore

    try:
        return ResultStore(results)
    except RecordError as e:
        raise SystemExit(f"scorebench run: {e}") from None


def run_profile(args, console=None) -> int:
    """Run the cells of the selection that have no current record and write one record per
    cell; 1 when a cell ended with status error, oom or timeout, else 0."""
    from rich.console import Console

    from .executors import ExecutorError, get_executor_class
    from .progress import RichReporter, print_summary
    from .scheduler import run_cells

    console = console or Console()
    profile, plan = plan_cells(args)
    store = open_store(args.results)
    tuned = "" if plan.tuning is None else (
        f" ({len(plan.pending_reports)} reporting cells follow their tuning sweeps)")
    console.print(f"profile [bold]{profile.name}[/] ({', '.join(profile.files)}): "
                  f"{len(plan.planned)} cells{tuned}, {args.workers} worker(s), executor "
                  f"{args.executor}")
    try:
        executor = get_executor_class(args.executor).from_args(
            args, workers=args.workers, plugins=list(args.plugin or []))
    except ExecutorError as e:
        raise SystemExit(f"scorebench run: {e}") from None
    try:
        with RichReporter(console) as reporter:
            summary = run_cells(plan.planned, store, executor, rerun=args.rerun,
                                fail_fast=args.fail_fast, time_limit_s=profile.time_limit_s,
                                reporter=reporter, fast=args.fast or profile.fast,
                                follow_up=plan.follow_up())
    except ExecutorError as e:
        raise SystemExit(f"scorebench run: {e}") from None
    print_summary(console, summary, args.results)
    sys.stdout.flush()
    return 1 if summary.failed else 0
