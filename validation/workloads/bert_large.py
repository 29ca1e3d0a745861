"""BERT-Large encoder training throughput per GPU at sequence 128 against DLE's published figure.

Run: ``python -m validation.workloads.bert_large [--quick] [--json PATH]``

BERT-Large-shaped (24 layers, hidden 1024, 16 heads, 4096 inner) because DLE publishes
BERT-Large phase-1 pre-training figures (sequence 128, 20 masked positions, LAMB). Differences
from DLE's model, named so the figure is read right: the masked-LM output layer is not tied to
the token embeddings (31 M more weights for LAMB to update), there is no next-sentence head,
and synthetic tokens replace Wikipedia. Figures: ``bert_large.sequences_per_s.<precision>``.
"""

from __future__ import annotations

from validation.workloads import _throughput
from validation.workloads._common import Run, main


def body(run: Run) -> None:
    _throughput.body(run, "bert_large")


if __name__ == "__main__":
    raise SystemExit(main("bert_large", body, description=__doc__.splitlines()[0]))
