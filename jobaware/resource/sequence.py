"""The sequence model: a small torch network over the normalized AST token sequence (the seed's next step).

Tokens seen in at least `min_token_count` training scripts form the vocabulary (others map to <unk>); a
script is its first `max_len` tokens. `cnn` (default): embedding -> 1-D convolution -> ReLU -> masked max and
mean pooling -> dropout -> linear. `gru`: embedding -> bidirectional GRU -> the same pooling. Trained with
Adam on class-balanced cross-entropy (times the sample weights) for `max_epochs` epochs in batches padded
to their longest script, seeded (torch and numpy), on `threads` CPU threads (default 1: the machines are
shared, and small batches gain nothing from more). The features that weighed most are the token kinds with the
largest gradient x embedding saliency toward the predicted class.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import torch
from torch import nn

from jobaware.resource.features import ScriptFeatures
from jobaware.resource.schema import BINDING

PAD, UNK = 0, 1


class _Network(nn.Module):
    def __init__(self, vocabulary: int, architecture: str, embedding_dim: int, hidden_size: int, kernel_size: int,
                 dropout: float):
        super().__init__()
        self.architecture = architecture
        self.embedding = nn.Embedding(vocabulary, embedding_dim, padding_idx=PAD)
        if architecture == "gru":
            self.encoder = nn.GRU(embedding_dim, hidden_size // 2, batch_first=True, bidirectional=True)
            width = 2 * (hidden_size // 2)
        else:
            self.encoder = nn.Conv1d(embedding_dim, hidden_size, kernel_size, padding=kernel_size // 2)
            width = hidden_size
        self.dropout = nn.Dropout(dropout)
        self.output = nn.Linear(2 * width, len(BINDING))

    def encode(self, embedded: torch.Tensor) -> torch.Tensor:
        if self.architecture == "gru":
            return self.encoder(embedded)[0].transpose(1, 2)
        return torch.relu(self.encoder(embedded.transpose(1, 2)))

    def forward(self, ids: torch.Tensor, embedded: torch.Tensor | None = None) -> torch.Tensor:
        mask = (ids != PAD).float().unsqueeze(1)
        embedded = self.embedding(ids) if embedded is None else embedded
        hidden = self.encode(embedded)
        hidden = hidden[..., : mask.shape[-1]]
        largest = (hidden * mask - (1 - mask) * 1e4).max(dim=2).values
        mean = (hidden * mask).sum(dim=2) / mask.sum(dim=2).clamp(min=1)
        return self.output(self.dropout(torch.cat([largest, mean], dim=1)))


class SequenceModel:
    name = "sequence"

    def __init__(self, seed: int = 0, architecture: str = "cnn", embedding_dim: int = 32, hidden_size: int = 64,
                 kernel_size: int = 5, max_len: int = 1024, max_epochs: int = 20, batch_size: int = 16,
                 learning_rate: float = 3e-3, weight_decay: float = 1e-4, dropout: float = 0.3,
                 min_token_count: int = 2, threads: int = 1):
        self.settings = dict(architecture=architecture, embedding_dim=embedding_dim, hidden_size=hidden_size,
                             kernel_size=kernel_size, dropout=dropout)
        self.seed, self.max_len, self.max_epochs, self.batch_size = seed, max_len, max_epochs, batch_size
        self.learning_rate, self.weight_decay = learning_rate, weight_decay
        self.min_token_count, self.threads = min_token_count, threads

    def _encode(self, features: list[ScriptFeatures]) -> list[list[int]]:
        return [[self.vocabulary.get(t, UNK) for t in f.tokens[: self.max_len]] or [UNK] for f in features]

    @staticmethod
    def _pad(encoded: list[list[int]]) -> torch.Tensor:
        """One batch, padded to its longest script (not to max_len: most scripts are short)."""
        ids = np.zeros((len(encoded), max(len(e) for e in encoded)), dtype=np.int64)
        for row, tokens in enumerate(encoded):
            ids[row, : len(tokens)] = tokens
        return torch.from_numpy(ids)

    def _ids(self, features: list[ScriptFeatures]) -> torch.Tensor:
        return self._pad(self._encode(features))

    def fit(self, features: list[ScriptFeatures], y: np.ndarray, weights: np.ndarray | None = None):
        torch.set_num_threads(self.threads)
        torch.manual_seed(self.seed)
        rng = np.random.default_rng(self.seed)
        documents = Counter(t for f in features for t in set(f.tokens))
        kept = sorted(t for t, n in documents.items() if n >= self.min_token_count)
        self.vocabulary = {t: i + 2 for i, t in enumerate(kept)}
        self.token_names = ["<pad>", "<unk>", *kept]
        encoded = self._encode(features)
        target = torch.tensor([BINDING.index(c) for c in y])
        counts = np.bincount(target.numpy(), minlength=len(BINDING)).clip(min=1)
        class_weight = torch.tensor(len(y) / (len(BINDING) * counts), dtype=torch.float32)
        sample_weight = torch.tensor(np.ones(len(y)) if weights is None else weights, dtype=torch.float32)
        self.network = _Network(len(self.vocabulary) + 2, **self.settings)
        optimizer = torch.optim.Adam(self.network.parameters(), lr=self.learning_rate, weight_decay=self.weight_decay)
        loss = nn.CrossEntropyLoss(weight=class_weight, reduction="none")
        self.network.train()
        for _ in range(self.max_epochs):
            order = rng.permutation(len(y))
            for start in range(0, len(y), self.batch_size):
                batch = order[start : start + self.batch_size]
                ids = self._pad([encoded[i] for i in batch])
                batch = torch.from_numpy(batch)
                optimizer.zero_grad()
                value = (loss(self.network(ids), target[batch]) * sample_weight[batch]).mean()
                value.backward()
                optimizer.step()
        self.network.eval()
        return self

    def predict_proba(self, features: list[ScriptFeatures]) -> np.ndarray:
        torch.set_num_threads(self.threads)
        out = np.zeros((len(features), len(BINDING)))
        with torch.no_grad():
            for i, f in enumerate(features):  # one at a time: no padding, the same answer alone or in a batch
                out[i] = torch.softmax(self.network(self._ids([f])), dim=1).numpy()[0]
        return out

    def top_features(self, features: list[ScriptFeatures], k: int = 5) -> list[list[dict]]:
        out = []
        for f in features:
            ids = self._ids([f])
            embedded = self.network.embedding(ids).detach().requires_grad_(True)
            logits = self.network(ids, embedded)
            label = int(logits.argmax(dim=1))
            logits[0, label].backward()
            saliency = (embedded.grad * embedded).sum(dim=2)[0].detach().numpy()
            totals: dict[str, float] = {}
            for position, token in enumerate(ids[0].tolist()):
                if token != PAD:
                    name = self.token_names[token] if token > UNK else f.tokens[position]
                    totals[name] = totals.get(name, 0.0) + float(saliency[position])
            top = sorted(totals.items(), key=lambda item: -item[1])[:k]
            out.append([{"feature": f"token:{name}", "value": None, "weight": round(weight, 4)}
                        for name, weight in top if weight > 0])
        return out
