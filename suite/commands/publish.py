"""``scorebench publish``: turn a results directory into a leaderboard release."""
from __future__ import annotations


def register(sub, common):
    p = sub.add_parser(
        "publish", parents=[common], help="aggregate records into a leaderboard release",
        description="Aggregate every record under the results directory into "
                    "<out>/<release>/ (README.md, results.json.gz, results.csv, overall.csv, "
                    "plots/; with --html also index.html) and refresh LEADERBOARD.md. Publishing the "
                    "same records twice gives byte-identical files. A committed release keeps "
                    "README.md, results.json.gz and the plots its README embeds; --rebuild "
                    "writes the rest again from results.json.gz. The committed board: "
                    "scorebench publish --results leaderboard/records --release NAME "
                    "--out leaderboard/releases --leaderboard LEADERBOARD.md --html")
    p.add_argument("--results", default="results", metavar="DIR",
                   help="results directory (default ./results)")
    p.add_argument("--release", metavar="NAME",
                   help="release name (default: the date of the newest record, YYYY-MM-DD; "
                        "with --check, the newest release in --out)")
    p.add_argument("--out", metavar="DIR",
                   help="releases directory (default <results>/releases); a "
                        "leaderboard/releases directory takes only records from a clean tree")
    p.add_argument("--leaderboard", metavar="FILE",
                   help="the LEADERBOARD.md to refresh (default <results>/LEADERBOARD.md; "
                        "with --out, <out>/LEADERBOARD.md, except that a --out named "
                        "leaderboard/releases refreshes the LEADERBOARD.md beside its "
                        "leaderboard/ directory: ./LEADERBOARD.md for --out leaderboard/releases)")
    p.add_argument("--allow-dirty", action="store_true",
                   help="let records run from a dirty or unknown git tree into a "
                        "leaderboard/releases directory (local experiments only)")
    p.add_argument("--check", action="store_true",
                   help="write nothing: republish --release (default the newest in --out) from "
                        "--results in memory and compare with its committed results (the "
                        "decompressed results.json.gz) byte for byte; exit 1 if they differ")
    p.add_argument("--rebuild", nargs="?", const="", default=None, metavar="RELEASE",
                   help="write the derived files of RELEASE in --out (default the newest; 'all': "
                        "every release) again from its results.json.gz alone, no records: "
                        "results.csv, overall.csv, every plot, index.html and scorers.json")
    p.add_argument("--baseline", default="softmax", metavar="SCORER",
                   help="the scorer every other one is compared with (default softmax)")
    p.add_argument("--bootstrap", type=int, default=None, metavar="B",
                   help="bootstrap replicates of the items-only interval (default 4000)")
    p.add_argument("--changes-since", metavar="RELEASE",
                   help="an earlier release in --out: the release then says, per task, how many "
                        "verdicts vs the baseline and tier memberships differ from it, and the "
                        "rank correlation of the two overalls (results.json meta.changes and a "
                        "README section)")
    p.add_argument("--html", action="store_true",
                   help="also write <out>/<release>/index.html, a sortable, filterable page of "
                        "the same numbers (and scorers.json, the registered scorers' metadata); "
                        "preview it with `scorebench serve`")
    p.set_defaults(func=run)


def run(args) -> int:
    from leaderboard.publishing.release import ReleaseError

    from ..publishing import publish_release

    if args.check:
        return check(args)
    if args.rebuild is not None:
        return rebuild(args)
    kwargs = {"baseline": args.baseline}
    if args.bootstrap is not None:
        if args.bootstrap < 100:
            raise SystemExit(f"scorebench publish: --bootstrap {args.bootstrap} is too few; "
                             "give 100 or more (default 4000)")
        kwargs["n_boot"] = args.bootstrap
    try:
        publish_release(args.results, args.release, args.out, args.leaderboard, html=args.html,
                        refuse_unclean=False if args.allow_dirty else None,
                        changes_since=args.changes_since, **kwargs)
    except (ReleaseError, FileNotFoundError) as exc:
        raise SystemExit(f"scorebench publish: {exc}") from None
    return 0


def check(args) -> int:
    """``--check``: the release's results.json against a republish of its records."""
    from pathlib import Path

    from leaderboard.loading.records import RELEASES_SUBDIR
    from leaderboard.publishing.release import ReleaseError
    from leaderboard.publishing.reproduction import reproduce

    out = args.out if args.out is not None else Path(args.results) / RELEASES_SUBDIR
    try:
        outcome = reproduce(args.results, out, args.release)
    except ReleaseError as exc:
        raise SystemExit(f"scorebench publish --check: {exc}") from None
    print(outcome.message)
    return 0 if outcome.ok else 1


def rebuild(args) -> int:
    """``--rebuild [RELEASE]``: a release's derived files again from its results alone."""
    from pathlib import Path

    from leaderboard.publishing.site import write_scorers, write_site
    from leaderboard.loading.records import RELEASES_SUBDIR
    from leaderboard.publishing.release import ReleaseError, list_releases, load_release, rebuild

    from ..publishing import scorer_metadata

    out = Path(args.out if args.out is not None else Path(args.results) / RELEASES_SUBDIR)
    found = [d for d, _ in list_releases(out)]
    if not found:
        raise SystemExit(f"scorebench publish --rebuild: {out} holds no release "
                         "(no */results.json.gz)")
    if args.rebuild == "all":
        targets = found
    else:
        name = args.rebuild or found[0].name
        targets = [d for d in found if d.name == name]
        if not targets:
            raise SystemExit(f"scorebench publish --rebuild: no release {name!r} in {out}; "
                             f"releases: {', '.join(d.name for d in found)}")
    try:
        for release_dir in targets:
            files = rebuild(release_dir)
            names = set(load_release(release_dir).rows["scorer_name"])
            files.append(write_scorers(release_dir, scorer_metadata(names)))
            print(f"rebuilt {release_dir}/ ({len(files)} files)")
        # Every page at once, each with the release selector of every release.
        for page in write_site(targets[0], also=tuple(targets)):
            print(f"wrote {page}")
    except (ReleaseError, FileNotFoundError) as exc:
        raise SystemExit(f"scorebench publish --rebuild: {exc}") from None
    return 0
