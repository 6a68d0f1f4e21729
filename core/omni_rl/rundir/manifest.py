"""Checkpoints that prove they are intact: a manifest of every file's size and SHA-256, checked while reading.

``manifest.json`` is the last file written into a checkpoint's staging directory: every other file is complete,
hashed and fsynced first, then the manifest, then the directory is renamed to ``step_<N>``. A bit flipped on disk,
a truncated copy or a file swapped in later no longer matches it.

Readers hash the bytes they read as they read them (:class:`CheckpointReader`): a file is mapped copy-on-write,
hashed through the mapping and its tensors are views of the same pages, so verifying costs no second pass over
the file and no copy, only the hashing itself (measured in docs/benchmarks.md). A file whose size differs is refused
from its ``stat`` before anything is read.

SHA-256, not BLAKE2b: with the SHA extensions of current x86 and ARM CPUs, OpenSSL's SHA-256 (which ``hashlib``
uses) is faster than ``hashlib.blake2b`` (1.05 vs 0.71 GB/s on the development machine), and every system can
check it with ``sha256sum``.

The manifest carries the SHA-256 of its own file table (``files_sha256``), so a flipped byte in the manifest
itself is found even where the JSON still parses.

Checkpoints written before manifests existed load with a warning that they cannot be verified. A checkpoint
whose ``trainer_state.json`` says ``format >= 2`` was written with a manifest, so a missing one is damage, not age.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
from pathlib import Path
from typing import Any

from omni_rl.errors import CheckpointDamaged

MANIFEST = "manifest.json"
ALGORITHM = "sha256"
#: ``trainer_state.json``'s ``format``: 2 = written with a manifest (absent in older checkpoints)
FORMAT = 2
_CHUNK = 8 << 20


def hash_file(path: Path, *, fsync: bool = False) -> tuple[int, str]:
    """``(size, hex digest)`` of a file, read in chunks; ``fsync`` flushes it to disk in the same pass."""
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
            size += len(chunk)
        if fsync:
            os.fsync(handle.fileno())
    return size, digest.hexdigest()


def write_manifest(directory: Path) -> dict[str, dict[str, Any]]:
    """Hash (and fsync) every file under ``directory``, then write ``manifest.json`` there, fsynced. Returns the
    file table. Call it when every other file of the checkpoint is complete."""
    files: dict[str, dict[str, Any]] = {}
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        rel = path.relative_to(directory).as_posix()
        if rel == MANIFEST:
            continue
        size, digest = hash_file(path, fsync=True)
        files[rel] = {"size": size, ALGORITHM: digest}
    manifest = {"version": 1, "algorithm": ALGORITHM, "files": files, "files_sha256": _table_digest(files)}
    text = json.dumps(manifest, indent=1, sort_keys=True)
    with (directory / MANIFEST).open("w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    return files


def run_dir_of(checkpoint: Path) -> Path:
    """``<run>`` of ``<run>/checkpoints/step_<N>`` (also of ``checkpoints/damaged/step_<N>``)."""
    for parent in checkpoint.parents:
        if parent.name == "checkpoints":
            return parent.parent
    return checkpoint.parent


class CheckpointReader:
    """Reads the files of one checkpoint, each checked against the manifest while it is read.

    Without a manifest (a checkpoint of an older version) files are read as they are and :attr:`verified` is
    False: the caller warns that they cannot be verified. Every check failure raises :class:`CheckpointDamaged`
    naming the checkpoint and the file.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.files: dict[str, dict[str, Any]] | None = self._load_manifest()

    @property
    def verified(self) -> bool:
        return self.files is not None

    def _load_manifest(self) -> dict[str, dict[str, Any]] | None:
        path = self.directory / MANIFEST
        if not path.is_file():
            if _written_with_manifest(self.directory):
                raise self.damaged(MANIFEST, "is missing, but this checkpoint was written with one")
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            files = data["files"]
            if data.get("algorithm") != ALGORITHM or not isinstance(files, dict):
                raise ValueError(f"algorithm {data.get('algorithm')!r}")
            table = {str(k): {"size": int(v["size"]), ALGORITHM: str(v[ALGORITHM])} for k, v in files.items()}
        except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError) as exc:
            raise self.damaged(MANIFEST, f"cannot be read ({type(exc).__name__}: {exc})") from exc
        if data.get("files_sha256") != _table_digest(table):  # a changed byte that still parses
            raise self.damaged(MANIFEST, "does not match its own checksum (files_sha256)")
        return table

    def damaged(self, rel: str, problem: str) -> CheckpointDamaged:
        run_dir = run_dir_of(self.directory)
        return CheckpointDamaged(
            f"checkpoint {self.directory} is damaged: {rel} {problem}",
            hint=f"the file changed after it was written (disk, copy or storage error); resume from an older "
            f"checkpoint (--set run.resume=auto skips damaged ones) and list them with: omni-rl verify {run_dir}",
            checkpoint=str(self.directory),
            file=rel,
        )

    def has(self, rel: str) -> bool:
        """Whether the checkpoint holds ``rel`` (the manifest says so; on disk, for an unverifiable one)."""
        if self.files is None:
            return (self.directory / rel).is_file()
        return rel in self.files

    def _entry(self, rel: str) -> dict[str, Any] | None:
        path = self.directory / rel
        if self.files is None:
            if not path.is_file():
                raise self.damaged(rel, "is missing")
            return None
        entry = self.files.get(rel)
        if entry is None:
            raise self.damaged(rel, "is not in the manifest")
        if not path.is_file():
            raise self.damaged(rel, "is missing")
        size = path.stat().st_size
        if size != entry["size"]:
            raise self.damaged(rel, f"has {size} bytes, the manifest says {entry['size']} (truncated or rewritten)")
        return entry

    def read_bytes(self, rel: str) -> bytes:
        """The file's bytes, verified (see :meth:`map`)."""
        return bytes(self.map(rel))

    def map(self, rel: str) -> mmap.mmap | bytearray:
        """The file mapped copy-on-write and hashed through the mapping: one pass over the page cache, no copy
        into fresh memory (tensors are views of it, writable without touching the file)."""
        entry = self._entry(rel)
        with (self.directory / rel).open("rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_COPY) if size else bytearray()
        if entry is not None:
            if len(mapped) != entry["size"]:  # it changed between the stat and the open
                raise self.damaged(rel, f"has {len(mapped)} bytes, the manifest says {entry['size']}")
            digest = hashlib.sha256()
            view = memoryview(mapped)
            for offset in range(0, len(view), _CHUNK):
                digest.update(view[offset : offset + _CHUNK])
            view.release()
            self._compare(rel, entry, digest.hexdigest())
        return mapped

    def _compare(self, rel: str, entry: dict[str, Any], digest: str) -> None:
        if digest != entry[ALGORITHM]:
            raise self.damaged(rel, f"does not match its {ALGORITHM} in the manifest (its bytes changed)")

    def check(self, rel: str) -> None:
        """Verify one file without keeping it (for files another library reads, such as the model's LoRA)."""
        entry = self._entry(rel)
        if entry is not None:
            self._compare(rel, entry, hash_file(self.directory / rel)[1])

    def check_sizes(self) -> None:
        """Every listed file exists with its size: ``stat`` only, so it finds truncated and missing files at once."""
        for rel in self.files or {}:
            self._entry(rel)

    def check_all(self) -> None:
        """Read and verify every file of the checkpoint (``omni-rl verify``)."""
        self.check_sizes()
        for rel in self.files or {}:
            self.check(rel)

    def read_json(self, rel: str) -> Any:
        data = self.read_bytes(rel)
        try:
            return json.loads(data.decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise self.damaged(rel, f"is not valid JSON ({exc})") from exc

    def load_tensors(self, rel: str) -> dict[str, Any]:
        """A safetensors file's tensors (no pickle), from the verified bytes without copying them again."""
        from omni_rl.rundir.safetensors_view import tensors_from_buffer

        data = self.map(rel)
        try:
            return tensors_from_buffer(data)
        except ValueError as exc:
            raise self.damaged(rel, f"is not a valid safetensors file ({exc})") from exc


def _table_digest(files: dict[str, dict[str, Any]]) -> str:
    """The manifest's own checksum: SHA-256 of its file table in canonical JSON."""
    return hashlib.sha256(json.dumps(files, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _written_with_manifest(directory: Path) -> bool:
    """Whether ``trainer_state.json`` says this checkpoint was written with a manifest (unreadable: no)."""
    try:
        state = json.loads((directory / "trainer_state.json").read_text(encoding="utf-8"))
        return int(state.get("format", 1)) >= FORMAT
    except (OSError, ValueError, TypeError, AttributeError):
        return False
