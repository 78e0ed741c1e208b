"""The cells for a CI system to fan out: GitHub Actions' `strategy.matrix`, one job per cell."""

from __future__ import annotations

import json

from compatcheck.matrix.cells import Cell


def github(cells: list[Cell]) -> str:
    """JSON for `strategy.matrix: ${{ fromJSON(...) }}`; each job runs `compatcheck matrix --cell <cell>`."""
    return json.dumps({"include": [
        {"cell": cell.id, "environment": cell.environment, "model": cell.model, "artifact": cell.stem}
        for cell in cells
    ]})
