"""From WMT'14 files to minibatches, as the paper prepared its data (§4.1, §4.2, App. B.2; GroundHog).

:func:`prepare` (:mod:`~nmt_lib.data.pipeline`) runs the whole pipeline once and caches the result
under ``<cache_dir>/prep/<key>/`` (the prepared store, :mod:`~nmt_lib.data.store`):

1. locate the files (:mod:`nmt_lib.data.corpus`); dev = newstest2012 + newstest2013 (6003 sentences),
   test = newstest2014 full (3003); on Multi30k (the second testbed, plain text), dev = val (1,014),
   test = test_2016_flickr + test_2017_flickr (2,000, each sentence naming its part);
2. Moses-tokenize every file (:mod:`nmt_lib.data.text`, cached per file in shards; a training file is
   tokenized only as far as step 3 reads it);
3. stream the training pairs, corpus after corpus in the configured order, and drop (never truncate)
   a pair when a side is empty, when its source or its target also occurs in dev or test, or when a
   side has more than ``max_len`` words (EOS not counted; PAPER.md A8). ``max_train_pairs`` keeps the
   first N pairs that survive these filters;
4. count words and keep the ``src_words``/``trg_words`` most frequent per language (§4.1; ties by
   code point). The counts are taken over the first ``max_train_pairs`` non-empty pairs not in
   dev/test *before* the length filter (all of them when there is no cap), so the -30 and -50 models
   of a profile share one vocabulary and one No-UNK test subset, as GroundHog's models share one;
5. store the kept pairs as flat id arrays + offsets (``.npy``, uint16 when the rows fit, memory-mapped
   by :class:`TrainSet`). The text is streamed and the ids go through temporary files in chunks:
   memory holds the word-count tables and a few bytes per pair, never the sentences.

Pretokenized corpora (the LIUM selection, "already tokenized" upstream) are split on whitespace only.

The key of the cache directory is a hash of the inputs' sha256 (via the tokenized files' keys), the
tokenizer settings and every setting above, so nothing stale is ever reused. The directory is built
under a temporary name and renamed when complete; its ``meta.json`` records the size and sha256 of
every file in it. Loading checks the sizes and the vocabularies' sha256 (and with ``verify`` the
id arrays' sha256 too), so a damaged or edited cache is refused with the file's name, never used.
An input's sha256 is remembered per (path, size, mtime) (:func:`nmt_lib.data.text.file_info`);
:func:`verify_inputs` hashes the inputs again, for a file edited behind an unchanged size and time
(training does whenever it prepares the data itself or resumes: 0.7 s for the lite profile's
137 MiB of inputs).

:class:`TrainIterator` (:mod:`~nmt_lib.data.batches`) batches as GroundHog's
``get_homogenous_batch_iter`` (PAPER.md §3, A7), sorted by length in groups, a seeded permutation
per epoch. :func:`pack` (:mod:`~nmt_lib.data.packs`) writes what training needs for a machine
without the data files.

The modules: :mod:`~nmt_lib.data.corpus` (the known corpora, locating their files),
:mod:`~nmt_lib.data.readers` (reading them), :mod:`~nmt_lib.data.text` (tokenizing, cached),
:mod:`~nmt_lib.data.vocab` (the shortlists), :mod:`~nmt_lib.data.pipeline` (steps 3-5),
:mod:`~nmt_lib.data.store` (the prepared data on disk, loaded and checked),
:mod:`~nmt_lib.data.batches` (minibatches), :mod:`~nmt_lib.data.packs` (packs and the inputs'
sha256), :mod:`~nmt_lib.data.download` and :mod:`~nmt_lib.data.fixtures` (the toy corpus). This
package re-exports what its callers use.
"""

from __future__ import annotations

from . import corpus, text, vocab
from .batches import Batch, TrainIterator, eval_batches, pad
from .packs import input_sha256, pack, verify_inputs
from .pipeline import prepare, train_pairs
from .store import (
    EvalSet,
    Prepared,
    TrainSet,
    check_prepared,
    data_summary,
    fingerprint,
    read_pack,
)

__all__ = [
    "Batch",
    "EvalSet",
    "Prepared",
    "TrainIterator",
    "TrainSet",
    "check_prepared",
    "corpus",
    "data_summary",
    "eval_batches",
    "fingerprint",
    "input_sha256",
    "pack",
    "pad",
    "prepare",
    "read_pack",
    "text",
    "train_pairs",
    "verify_inputs",
    "vocab",
]
