"""``takeover init-ci``: write a GitHub Actions workflow (and a starter test) into a user's repository.

Why a template and not only docs: the first CI setup is where a user decides what to gate on, how long
to run and where the evidence goes, and a working file is the quickest way to a good answer. The
workflow (``harness/data/ci/takeover.yml``) runs, on every pull request, the spec's scenarios, ``takeover
explore`` (30 s, seeded by the run number: a departure's shrunk scenario and pytest file are uploaded) and
the tests that use the ``takeover`` pytest fixture, short; every night the same tests long on several seeds,
a soak whose failing seeds are banked in the Actions cache and replayed the next night, and a lease
sweep, publishing JUnit and uploading the run folders. The starter test
(``harness/data/ci/test_takeover.py.tmpl``) is the ten lines those jobs run.

Nothing is overwritten without ``--force``: a workflow a user edited is theirs.
"""

from __future__ import annotations

import argparse
from importlib import resources
from pathlib import Path

from takeover.errors import UsageError
from takeover.exit_codes import ExitCode

HELP = ("write a GitHub Actions workflow for your queue (pull requests: scenarios + explore + short stress; "
        "nightly: soak + sweep)")

WORKFLOW = Path(".github") / "workflows" / "takeover.yml"
TEST_FILE = Path("tests") / "test_takeover.py"
DEFAULT_INSTALL = "takeover"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--queue", required=True, metavar="MODULE:ATTR",
                        help="the queue under test, as importable from the repository's root")
    parser.add_argument("--dir", default=".", metavar="REPO", help="the repository's root (default: here)")
    parser.add_argument("--install", default=DEFAULT_INSTALL, metavar="PIP_SPEC",
                        help=f"how the workflow installs takeover, as pip names it (default {DEFAULT_INSTALL!r}; "
                             "e.g. 'takeover==0.1.0' or 'takeover @ git+https://...')")
    parser.add_argument("--tests", default=str(TEST_FILE), metavar="PATH",
                        help=f"the tests that use the takeover fixture (default {TEST_FILE}; written when missing)")
    parser.add_argument("--db", default="sqlite", choices=("sqlite", "postgres"),
                        help="the database the workflow's steps run on (its TAKEOVER_DB; default sqlite): postgres "
                             "starts a private PostgreSQL server per command from the runner's binaries")
    parser.add_argument("--shards", type=int, metavar="N",
                        help="run the nightly lease sweep and the soak each as a matrix of N jobs (takeover sweep "
                             "--shard I/N, takeover soak --shard I/N: N times the soak's seeds) and a last job "
                             "each that joins them (takeover merge)")  # fmt: skip
    parser.add_argument("--force", action="store_true", help="overwrite files that exist")


def template(name: str) -> str:
    return resources.files("takeover.data.ci").joinpath(name).read_text()


def render(text: str, *, queue: str, install: str, tests: str, db: str) -> str:
    from takeover.version import __version__

    values = {"@QUEUE@": queue, "@INSTALL@": install, "@TESTS@": tests, "@DB@": db, "@VERSION@": __version__}
    for marker, value in values.items():
        text = text.replace(marker, value)
    return text


# The nightly job's soak and the seed bank's cache around it: with --shards they move to the soak's matrix.
SOAK_STEPS = (
    "      - name: Restore the seed bank of earlier nights\n"
    "        uses: actions/cache/restore@v4\n"
    "        with:\n"
    "          path: .takeover/seed-bank.json\n"
    "          key: takeover-seed-bank-${{ github.run_id }}\n"
    "          restore-keys: takeover-seed-bank-\n",
    "      - name: Soak (replays the banked failing seeds first)\n"
    "        if: success() || failure()\n"
    "        run: >-\n"
    '          takeover soak --queue "$TAKEOVER_QUEUE" --db "$TAKEOVER_DB" --minutes "$TAKEOVER_SOAK_MINUTES"\n'
    "          --out .takeover/soak --seed-bank .takeover/seed-bank.json\n",
    "      - name: Save the seed bank for the next nights\n"
    "        if: always()\n"
    "        uses: actions/cache/save@v4\n"
    "        with:\n"
    "          path: .takeover/seed-bank.json\n"
    "          key: takeover-seed-bank-${{ github.run_id }}\n",
)

SWEEP_STEP = ("      - name: Lease sweep\n"
              "        if: success() || failure()\n"
              '        run: takeover sweep --queue "$TAKEOVER_QUEUE" --db "$TAKEOVER_DB" --grid "$TAKEOVER_SWEEP_GRID" '
              "--out .takeover/sweep\n")


def workflow_text(shards: int | None) -> str:
    """The workflow template; with ``shards`` its nightly sweep and soak steps become a matrix of that many shard
    jobs and a merge job each (``sweep-shards.yml.tmpl``, ``soak-shards.yml.tmpl``)."""
    text = template("takeover.yml")
    if shards is None:
        return text
    if shards < 1:
        raise UsageError(f"--shards must be a whole number >= 1, got {shards}")
    for step in (SWEEP_STEP, *SOAK_STEPS):
        assert step in text, "the workflow template's sweep or soak steps moved: update SWEEP_STEP, SOAK_STEPS"
        text = text.replace(step, "")
    shard_list = ", ".join(str(i) for i in range(1, shards + 1))
    matrices = [template(name).replace("@SHARD_LIST@", shard_list).replace("@SHARDS@", str(shards))
                for name in ("sweep-shards.yml.tmpl", "soak-shards.yml.tmpl")]
    return text.rstrip("\n") + "\n" + "".join(matrices)


def _quote_safe(name: str, value: str) -> None:
    """The values go into YAML strings and a Python string: refuse what would break out of them."""
    if not value or any(c in value for c in "\"\\\n'$`"):
        raise UsageError(f"--{name} must be non-empty, without quotes, backslashes, $ or backticks, got {value!r}")


def run(args: argparse.Namespace) -> ExitCode:
    if args.queue.count(":") != 1 or not all(args.queue.split(":")):
        raise UsageError(f"--queue must be MODULE:ATTR, got {args.queue!r}")
    for name in ("queue", "install", "tests"):
        _quote_safe(name, getattr(args, name))
    root = Path(args.dir)
    if not root.is_dir():
        raise UsageError(f"--dir {args.dir!r} is not a folder")
    files = {WORKFLOW: workflow_text(args.shards), Path(args.tests): template("test_takeover.py.tmpl")}
    targets = {root / rel: render(text, queue=args.queue, install=args.install, tests=args.tests, db=args.db)
               for rel, text in files.items()}
    workflow = root / WORKFLOW
    if workflow.exists() and not args.force:
        raise UsageError(f"{workflow} exists; --force overwrites it")
    for path, text in targets.items():
        if path.exists() and not args.force:
            print(f"kept {path} (exists; --force overwrites it)")
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {path}")
    print(f"pull requests: takeover scenarios --queue {args.queue} --db {args.db}, takeover explore --seconds 30, "
          f"then pytest {args.tests} "
          f"-m takeover --takeover-duration 5 --takeover-db {args.db}; nightly: the tests on 5 seeds, takeover "
          "soak and takeover sweep. Add .takeover/ to .gitignore; takeover's docs, 'Gate your CI' "
          "(docs/howto/ci.md), say what each step gates on.")
    return ExitCode.VALID
