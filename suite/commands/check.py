"""``scorebench check --plugin FILE.py [--scorers NAMES]``: the scorer checks of
docs/scorers.md (:mod:`scorers.checks`) on a user's scorers, pass or fail per check."""
from __future__ import annotations


def register(sub, common):
    p = sub.add_parser(
        "check", parents=[common], help="run the scorer checks on your scorer",
        description="Run the scorer checks that every scorer of the board passes (exact zeros on "
                    "masked keys, masked-key invariance, bounds, gradients, fully-masked rows, "
                    "fp32 vs fp64, fast path, float64 reference, padding and prefix, call "
                    "counter; docs/scorers.md) on the scorers of --scorers, by default every "
                    "scorer the --plugin files register, and print pass or fail per check. Exit "
                    "status 1 when a check fails.")
    p.add_argument("--scorers", metavar="a,mine*",
                   help="scorers to check (names, aliases or wildcards); default: the scorers "
                        "of the --plugin files")
    p.set_defaults(func=run)


def run(args) -> int:
    import scorers
    from scorers.checks import FAIL, run_checks
    from scorers.trial import is_builtin, source_of, trial

    if args.scorers:
        try:
            names = scorers.resolve_scorers(args.scorers)
        except scorers.ScorerError as e:
            raise SystemExit(f"scorebench check: {e}") from None
    else:
        names = [n for n in scorers.list_scorers() if not is_builtin(n)]
        if not names:
            raise SystemExit("scorebench check: no scorer to check; give your scorer's file with "
                             "--plugin FILE.py (or name registered scorers with --scorers)")
    failed = 0
    for name in names:
        file, line = source_of(scorers.get_scorer_class(name))
        print(f"scorer {name} ({file}, line {line}):")
        failure = trial(name)
        if failure:
            print("  it cannot run: " + failure.report().rstrip("\n").replace("\n", "\n  "))
        results = run_checks(name)
        for r in results:
            detail = f": {r.detail}" if r.detail else ""
            print(f"  {r.number:2d}. {r.outcome:4s}  {r.title}{detail}")
        count = {o: sum(r.outcome == o for r in results) for o in ("pass", FAIL, "n/a")}
        print(f"  {name}: {count['pass']} passed, {count[FAIL]} failed, {count['n/a']} not "
              "applicable")
        failed += bool(count[FAIL])
    return 1 if failed else 0
