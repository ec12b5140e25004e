"""Executes a notebook top to bottom (nbclient) and fails when a cell fails; the notebook file is not changed.

    bert4rec-run-notebook notebooks/quickstart.ipynb
    BERT4REC_MODEL_DIR=runs/ml1m bert4rec-run-notebook notebooks/quickstart.ipynb --out /tmp/run.ipynb
"""

from __future__ import annotations

import os
import sys
import time

from bert4rec_tf import cli


def main(argv: list[str] | None = None) -> int:
    parser = cli.argument_parser(__doc__)
    parser.add_argument("notebook")
    parser.add_argument("--out", default=None, help="also write the executed notebook (with outputs) here")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per cell")
    args = parser.parse_args(argv)
    try:
        import nbformat
        from nbclient import NotebookClient
        from nbclient.exceptions import CellExecutionError
    except ImportError:
        print('error: running notebooks needs the report extra: pip install -e ".[report]"', file=sys.stderr)
        return 1
    notebook = nbformat.read(args.notebook, as_version=4)
    started = time.monotonic()
    client = NotebookClient(notebook, timeout=args.timeout, kernel_name="python3",
                            resources={"metadata": {"path": os.path.dirname(os.path.abspath(args.notebook))}})
    try:
        client.execute()
    except CellExecutionError as error:
        print(f"error: a cell of {args.notebook} failed:\n{error}", file=sys.stderr)
        return 1
    finally:
        if args.out:
            nbformat.write(notebook, args.out)
    print(f"{args.notebook}: {len(notebook.cells)} cells ran in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
