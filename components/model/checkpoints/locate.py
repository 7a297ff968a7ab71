"""Finding what a checkpoint folder or prefix is (`locate`: a Hugging Face folder, a Google BERT release, a
Model Garden checkpoint or a pushed SavedModel), whether its files changed since (`unchanged`), and a local copy
of one on an object store (`local_copy`)."""

from __future__ import annotations

import os
import posixpath
import re
from typing import Optional

from tfxflow.components import object_store
from tfxflow.components.model.checkpoints.description import GOOGLE_BERT, MODEL_GARDEN, Checkpoint, CheckpointError
from tfxflow.components.model.checkpoints.files import (
    exists,
    fingerprint_of,
    given,
    is_folder,
    join,
    list_names,
    read,
    split,
)
from tfxflow.components.model.checkpoints.hugging_face import locate_hugging_face
from tfxflow.components.model.checkpoints.saved_model import locate_saved_model
from tfxflow.components.model.checkpoints.tf_checkpoint import locate_tf_checkpoint


def locate(path: str) -> Checkpoint:
    """The checkpoint at `path` (KINDS), checked: its configuration, vocabulary and the shapes of its weights
    agree, and its weights file is whole. Raises CheckpointError naming the path, the file and what is wrong."""
    path = path.rstrip("/") if "://" in path else path
    if is_folder(path):
        names = set(list_names(path, path))
        if "saved_model.pb" in names:
            return locate_saved_model(path)
        if "config.json" in names:
            return locate_hugging_face(path, names)
        prefix = _prefix_in_folder(path, names)
        if prefix is not None:
            return locate_tf_checkpoint(path, prefix)
        found = ", ".join(sorted(names)[:8]) or "nothing"
        raise CheckpointError(
            f"{given(path)}: not a checkpoint this pipeline reads: no config.json (a Hugging Face folder), no "
            f"bert_model.ckpt.index or other TF checkpoint (Google's BERT, Model Garden), no saved_model.pb (a "
            f"pushed model); it holds {found}"
        )
    folder, base = split(path)
    siblings = set(list_names(path, folder)) if folder else set()
    if base + ".index" in siblings:
        return locate_tf_checkpoint(path, path)
    if base in siblings:
        raise CheckpointError(
            f"{given(path)}: a file, not a checkpoint: give the folder that holds it (a Hugging Face folder, a "
            "Google BERT release), a TF checkpoint prefix (<prefix>.index beside it) or a SavedModel folder"
        )
    raise CheckpointError(f"{given(path)}: nothing is there (no folder, no file, no <prefix>.index)")


def _prefix_in_folder(path: str, names: set) -> Optional[str]:
    """The TF checkpoint in a folder: the one its `checkpoint` state file names, else Google's
    `bert_model.ckpt`, else the only `<prefix>.index`; None when there is none."""
    if "checkpoint" in names:
        state = read(path, join(path, "checkpoint"), "the checkpoint state file").decode("utf-8", "replace")
        match = re.search(r'^model_checkpoint_path:\s*"([^"]+)"', state, re.M)
        if match:
            latest = match.group(1)
            # TF's CheckpointManager writes an absolute path, stale once the folder moved: its name in this folder.
            if posixpath.basename(latest) + ".index" in names:
                return join(path, posixpath.basename(latest))
            if (latest.startswith("/") or "://" in latest) and exists(latest + ".index"):
                return latest
    if "bert_model.ckpt.index" in names:
        return join(path, "bert_model.ckpt")
    indexes = sorted(n[: -len(".index")] for n in names if n.endswith(".index"))
    if len(indexes) > 1:
        raise CheckpointError(
            f"{given(path)}: holds several TF checkpoints ({', '.join(indexes)}) and no 'checkpoint' file naming "
            "the latest: give the prefix of one"
        )
    return join(path, indexes[0]) if indexes else None


def unchanged(checkpoint: Checkpoint) -> bool:
    """Whether the files of `checkpoint` are still those it was located with (their sizes and modification times,
    or ETags)."""
    return fingerprint_of(checkpoint.path, checkpoint.files) == checkpoint.fingerprint if checkpoint.files else True


def local_copy(checkpoint: Checkpoint, scratch: str) -> str:
    """A local path of `checkpoint`: its own on a local disk, else the path of a copy of its files (`files`, laid
    out as in its folder) under the folder `scratch`."""
    if not object_store.is_remote(checkpoint.path):
        return checkpoint.path
    prefix_given = checkpoint.kind in (GOOGLE_BERT, MODEL_GARDEN) and checkpoint.weights == checkpoint.path
    root = split(checkpoint.path)[0] if prefix_given else checkpoint.path
    for uri in checkpoint.files:
        relative = uri[len(root) :].lstrip("/")
        try:
            object_store.download(uri, os.path.join(scratch, relative) if relative else scratch)
        except (OSError, object_store.ObjectStoreError) as err:
            raise CheckpointError(f"{given(checkpoint.path)}: cannot copy {uri}: {err}") from err
    return os.path.join(scratch, split(checkpoint.path)[1]) if prefix_given else scratch
