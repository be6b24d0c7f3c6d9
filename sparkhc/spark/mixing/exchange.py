"""The exchange folder of barrier mixing (:class:`Exchange`): the shards' documents staged as piece
files, the epochs' states and deltas, the epoch records, and the file barriers the stage's tasks
meet at; every write atomic, all IO through ``pyarrow.fs`` (a local path or any URI
:func:`sparkhc.fsio.resolve` takes)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from sparkhc import fsio
from sparkhc.batch import SparseBatch
from sparkhc.models.base import ModelState
from sparkhc.persistence import json_text, read_npz, read_state, write_npz, write_state


class Exchange:
    """The folder of one barrier-mixing run: ``run`` under ``location`` (a plain path or any URI
    :func:`sparkhc.fsio.resolve` takes), all IO through ``pyarrow.fs``. Every file is written with
    :func:`sparkhc.fsio.write_atomic`; readers read a file only after the marker or task success
    that follows its write (:meth:`sync`), so an object store's write-once keys need no rename.
    Pickles as its location (the tasks open their own file system)."""

    def __init__(self, location: str | Path, run: str = "") -> None:
        self.location, self.run = str(location), run
        self.fs, base = fsio.resolve(self.location)
        self.root = f"{base}/{run}" if run else base
        self.local = fsio.is_local(self.fs)
        self.poll = 0.002 if self.local else 0.05  # seconds between listings of a barrier's markers

    def __reduce__(self) -> tuple[Any, ...]:
        return (Exchange, (self.location, self.run))

    def __str__(self) -> str:
        return f"{fsio.redact(self.location)}{'/' + self.run if self.run else ''}"

    def path(self, name: str) -> str:
        return f"{self.root}/{name}"

    def create(self) -> None:
        self.fs.create_dir(self.root, recursive=True)

    def write(self, name: str, write: Callable[[Any], Any]) -> None:
        fsio.write_atomic(self.fs, self.path(name), write)

    def write_state(self, name: str, state: ModelState) -> None:
        self.write(name, lambda fh: write_state(fh, state))  # streamed

    def read_state(self, name: str) -> ModelState:
        with fsio.open_input(self.fs, self.path(name)) as fh:
            return read_state(fh)

    def write_json(self, name: str, obj: Any) -> None:
        text = json_text(obj).encode("utf-8")
        self.write(name, lambda fh: fh.write(text))

    def read_json(self, name: str) -> dict[str, Any]:
        return dict(json.loads(fsio.read_bytes(self.fs, self.path(name)).decode("utf-8")))

    def exists(self, name: str) -> bool:
        return fsio.exists(self.fs, self.path(name))

    def delete(self, name: str) -> None:
        try:
            self.fs.delete_file(self.path(name))
        except FileNotFoundError:
            pass

    def mark(self, folder: str, name: str) -> None:
        """An empty marker ``folder/name``."""
        if self.local:
            self.fs.create_dir(self.path(folder), recursive=True)
        self.write(f"{folder}/{name}", lambda fh: None)

    def listdir(self, folder: str) -> list[str]:
        return fsio.listdir(self.fs, self.path(folder))

    def remove(self) -> None:
        fsio.delete_tree(self.fs, self.root)

    def sync(self, tag: str, t: int, tasks: int) -> None:
        """All ``tasks`` tasks meet: each writes a marker ``sync-<tag>/<t>`` and waits until the
        folder lists all of them (one listing per poll; the barrier stage guarantees the tasks run
        at the same time; Spark kills the others when one fails). A task writes its marker after
        its files, so a marker certifies them. ``BarrierTaskContext.barrier()`` costs about a
        second per call here; local files cost milliseconds."""
        folder = f"sync-{tag}"
        self.mark(folder, f"{t:05d}")
        names = {f"{i:05d}" for i in range(tasks)}
        while not names.issubset(self.listdir(folder)):
            time.sleep(self.poll)

    # -- the shards' documents -----------------------------------------------------------------
    def save_shard(self, shard: int, part: int, batch: SparseBatch) -> None:
        """Input partition ``part``'s documents of shard ``shard`` (CSR arrays + gold label names;
        no pickle)."""
        X = sp.csr_matrix(batch.X)
        labels = batch.labels or [[] for _ in range(len(batch))]
        flat = [lab for labs in labels for lab in labs]
        arrays: dict[str, Any] = {
            "indptr": X.indptr.astype(np.int64), "indices": X.indices.astype(np.int32), "data": X.data,
            "shape": np.array(X.shape, dtype=np.int64), "doc_ids": np.asarray(batch.doc_ids, dtype=str),
            "label_ptr": np.concatenate([[0], np.cumsum([len(x) for x in labels])]).astype(np.int64),
            "label_names": np.asarray(flat if flat else [""], dtype=str),
        }
        if batch.counts is not None:
            C = sp.csr_matrix(batch.counts)
            arrays.update(c_indptr=C.indptr.astype(np.int64), c_indices=C.indices.astype(np.int32), c_data=C.data)
        self.write(_shard_file(shard, part), lambda fh: write_npz(fh, arrays))

    def load_shard(self, shard: int, parts: list[int]) -> SparseBatch:
        """Shard ``shard`` as the jobs engine's partition holds it: its pieces from every input
        partition, sorted by doc id."""
        batch = SparseBatch.concat([self._load_piece(_shard_file(shard, p)) for p in parts])
        return batch.subset(np.argsort(batch.doc_ids, kind="stable"))

    def _load_piece(self, name: str) -> SparseBatch:
        with fsio.open_input(self.fs, self.path(name)) as fh:
            a = read_npz(fh)
        shape = tuple(int(v) for v in a["shape"])
        X = sp.csr_matrix((a["data"], a["indices"], a["indptr"]), shape=shape)
        ptr = a["label_ptr"]
        names = a["label_names"].tolist()
        labels = [names[ptr[i] : ptr[i + 1]] for i in range(shape[0])]
        counts = None
        if "c_indptr" in a:
            counts = sp.csr_matrix((a["c_data"], a["c_indices"], a["c_indptr"]), shape=shape)
        return SparseBatch(X, a["doc_ids"], labels, counts)


def _shard_file(shard: int, part: int) -> str:
    return f"shard-{shard:05d}-{part:05d}.npz"
