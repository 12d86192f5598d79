"""The network: the frame sequence (one-hot states of j jobs per frame) joined with the static features.

Each frame's j job states enter through an embedding of the 49 one-hot states (the same as a linear layer on
the one-hot vector; index 0, no event yet, maps to zeros), concatenated over the j jobs; the sequence of m
frames, oldest first, goes through the network named by `network`: an LSTM (default), a GRU, or a 1-D
convolution over time (kernel 3, `layers` blocks, global max pooling). Its last state joins the static
features (hold code one-hot, (code, subcode) one-hot over the training set's most common pairs, log of
the earlier hold count) in a small head that gives the logit of P(release).

Training: AdamW on binary cross-entropy with a weight per hold and soft targets (a generated hold's target is
the release chance fitted on real holds), mini-batches in a seeded order (the caller seeds torch for the
initial weights and dropout), `epochs` passes. Its P(release) is a score: decisions come from its calibration
on real holds (jobaware.hold.deciders).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import torch
from threadpoolctl import threadpool_limits
from torch import nn

from jobaware.hold.features import N_STATES

MAX_CODE = 49  # hold codes 0..48; one more slot for codes outside
PAIRS = 32  # most common (code, subcode) pairs of the training set


@dataclass
class StaticEncoder:
    """Hold code, subcode and earlier holds as a fixed-width vector; the pair vocabulary comes from training."""

    pairs: list[tuple[int, int]] = field(default_factory=list)

    def fit(self, static: np.ndarray) -> StaticEncoder:
        codes, counts = np.unique(static[:, :2], axis=0, return_counts=True)
        top = np.argsort(-counts, kind="stable")[:PAIRS]
        self.pairs = [tuple(int(v) for v in codes[i]) for i in sorted(top)]
        return self

    @property
    def width(self) -> int:
        return MAX_CODE + 1 + PAIRS + 1 + 1

    def transform(self, static: np.ndarray) -> np.ndarray:
        n = len(static)
        out = np.zeros((n, self.width), np.float32)
        code = static[:, 0]
        out[np.arange(n), np.where((code >= 0) & (code < MAX_CODE), code, MAX_CODE)] = 1
        lookup = {pair: i for i, pair in enumerate(self.pairs)}
        pair_index = np.array([lookup.get((int(a), int(b)), PAIRS) for a, b in static[:, :2]], np.int64)
        out[np.arange(n), MAX_CODE + 1 + pair_index] = 1
        out[:, -1] = np.log1p(np.maximum(static[:, 2], 0))
        return out


class HoldNetwork(nn.Module):
    def __init__(self, network: str, j: int, static_width: int, embedding_dim: int, hidden_size: int, layers: int,
                 dropout: float):
        super().__init__()
        self.kind = network
        self.embed = nn.Embedding(N_STATES, embedding_dim, padding_idx=0)
        width = j * embedding_dim
        if network == "lstm":
            self.sequence = nn.LSTM(width, hidden_size, layers, batch_first=True, dropout=dropout if layers > 1 else 0)
        elif network == "gru":
            self.sequence = nn.GRU(width, hidden_size, layers, batch_first=True, dropout=dropout if layers > 1 else 0)
        elif network == "conv":
            blocks, channels = [], width
            for _ in range(layers):
                blocks += [nn.Conv1d(channels, hidden_size, 3, padding=1), nn.ReLU(), nn.Dropout(dropout)]
                channels = hidden_size
            self.sequence = nn.Sequential(*blocks)
        else:
            raise ValueError(f"unknown network {network!r}")
        self.head = nn.Sequential(nn.Linear(hidden_size + static_width, hidden_size), nn.ReLU(), nn.Dropout(dropout),
                                  nn.Linear(hidden_size, 1))

    def forward(self, states: torch.Tensor, static: torch.Tensor) -> torch.Tensor:
        batch, m, j = states.shape
        x = self.embed(states.long()).reshape(batch, m, -1)
        if self.kind == "conv":
            summary = self.sequence(x.transpose(1, 2)).amax(dim=2)
        else:
            output, _ = self.sequence(x)
            summary = output[:, -1]
        return self.head(torch.cat([summary, static], dim=1)).squeeze(1)


@contextmanager
def threads(n: int) -> Iterator[None]:
    """Run torch and the OpenMP/BLAS pools of NumPy and scikit-learn on `n` threads, then restore them."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        with threadpool_limits(n):
            yield
    finally:
        torch.set_num_threads(before)


@dataclass
class FitResult:
    network: HoldNetwork
    history: list[dict]


def predict_proba(network: HoldNetwork, states: np.ndarray, static: np.ndarray, batch_size: int = 1024) -> np.ndarray:
    """P(release) for every row, in batches (states may be a memory-mapped array)."""
    network.eval()
    out = np.empty(len(states), np.float64)
    with torch.no_grad():
        for begin in range(0, len(states), batch_size):
            s = torch.from_numpy(np.array(states[begin:begin + batch_size]))  # a copy: memory maps are read-only
            x = torch.from_numpy(static[begin:begin + batch_size])
            out[begin:begin + len(s)] = torch.sigmoid(network(s, x)).numpy()
    return out


def fit(network: HoldNetwork, states: np.ndarray, static: np.ndarray, target: np.ndarray, weight: np.ndarray,
        p: dict) -> FitResult:
    """Train on (states, static) -> target (P(release), 0..1), each row weighing `weight`."""
    generator = torch.Generator().manual_seed(p["seed"])
    optimizer = torch.optim.AdamW(network.parameters(), lr=p["learning_rate"], weight_decay=p["weight_decay"])
    loss_fn = nn.BCEWithLogitsLoss(reduction="none")
    weight = np.asarray(weight, np.float32) / max(float(np.mean(weight)), 1e-12)  # mean weight 1: a steady step size
    history = []
    for epoch in range(p["epochs"]):
        network.train()
        order = torch.randperm(len(target), generator=generator).numpy()
        total = 0.0
        for begin in range(0, len(order), p["batch_size"]):
            rows = np.sort(order[begin:begin + p["batch_size"]])
            s = torch.from_numpy(np.ascontiguousarray(states[rows]))
            x = torch.from_numpy(static[rows])
            y = torch.from_numpy(np.asarray(target[rows], np.float32))
            w = torch.from_numpy(weight[rows])
            optimizer.zero_grad()
            loss = (loss_fn(network(s, x), y) * w).sum() / w.sum().clamp_min(1e-12)
            loss.backward()
            nn.utils.clip_grad_norm_(network.parameters(), 5.0)
            optimizer.step()
            total += loss.item() * len(rows)
        history.append({"epoch": epoch, "train_loss": total / max(len(target), 1)})
    network.eval()
    return FitResult(network, history)
