"""What a batch run reads its jets from: the :class:`JetSource` protocol and its two readers.

A batch run needs, of every input, its jets in chunks, all of them at the end (they are written
next to the results), messages for the jets a reader found invalid, how the input was read (to
refuse resuming with other reading settings) and a content hash (see :mod:`jetastar.batch.resume`).
:class:`JetSource` states exactly that. :class:`JetFileReader` implements it for jetastar files
(HDF5, ROOT, legacy pickles); :class:`ParticleFileSource` for particle files in a foreign layout
(the :class:`~jetastar.io.ParticleSource` reader of :mod:`jetastar.io`, plus the two batch facts:
its hash is of the file's bytes, and its reading settings are recorded).

Example:
    >>> import os, tempfile
    >>> from jetastar import io
    >>> from jetastar.ginkgo import ShowerParams, generate
    >>> path = os.path.join(tempfile.mkdtemp(), "jets.h5")
    >>> io.write(path, generate(5, ShowerParams.qcd(), seed=1))
    >>> source = JetFileReader(path)
    >>> source.n_jets, len(source.chunk(1, 3)), source.reading()
    (5, 2, {})
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from .. import io
from ..errors import FileFormatError
from ..io.dispatch import columns
from ..io.particle_files import ParticleReader
from ..jet import JetCollection
from .resume import file_digest, jets_digest, stream_jets_digest

__all__ = ["JetFileReader", "JetSource", "ParticleFileSource"]


#: jets whose leaf counts :meth:`JetFileReader.leaf_counts` reads at a time
COUNT_BLOCK = 1_000_000


@runtime_checkable
class JetSource(Protocol):
    """An input of a batch run, read in chunks of jets.

    Attributes:
        path: the input file.
        n_jets: how many jets it holds (positions ``0..n_jets-1``).
    """

    path: Path
    n_jets: int

    def chunk(self, start: int, stop: int, *, node_data: bool = True) -> JetCollection:
        """Jets ``start:stop``, not validated (invalid jets are recorded per jet); without
        ``node_data`` their truth trees' node momenta and per-node extras may be left out."""
        ...

    def whole(self) -> JetCollection:
        """Every jet (written to the output next to the results)."""
        ...

    def problems(self, start: int, stop: int) -> dict[int, str]:
        """Messages for invalid jets of chunk ``start:stop`` the reader knows more about (e.g.
        which input branch holds a NaN): jet position -> one line. Empty when none."""
        ...

    def reading(self) -> dict[str, Any]:
        """How the input is read, recorded in the output and the part manifest (an interrupted
        run resumes only with the same); empty for jetastar files."""
        ...

    def digest(self, jets: JetCollection | None = None) -> str:
        """SHA-256 (hex) identifying the input's content (:mod:`jetastar.batch.resume`).

        Args:
            jets: the input's jets when the caller has just read them with :meth:`whole`
                (sources that hash their jets use them instead of reading again).
        """
        ...

    def close(self) -> None:
        """Release the file."""
        ...


#: jets a :class:`JetFileReader` reads at once when asked for fewer: chunks are sliced from one
#: read, so that a ROOT basket (10 000 jets) or an HDF5 chunk is decompressed once, not once per
#: chunk of jets
READ_AHEAD = 20_000


class JetFileReader:
    """Reads chunks of a jetastar file (a legacy pickle is imported once and sliced).

    Consecutive chunks are sliced from reads of at least ``read_ahead`` jets (one read holds a
    few ROOT baskets or HDF5 chunks, each decompressed once); memory is bounded by one such read.

    Args:
        path: an HDF5, ROOT or legacy pickle file of jets.
        read_ahead: jets read at once (default :data:`READ_AHEAD`).
    """

    def __init__(self, path: str | os.PathLike[str], read_ahead: int = READ_AHEAD) -> None:
        self.path = Path(path)
        self.fmt = io.file_format(self.path)
        self._whole = io.read(self.path, validate=False) if self.fmt == "legacy" else None
        self.n_jets = len(self._whole) if self._whole is not None else io.n_jets(self.path)
        self.read_ahead = int(read_ahead)
        self._window: tuple[int, int, JetCollection, bool] | None = None
        self._columns: Any = None  # the file, open across reads
        self.reads = 0

    def chunk(self, start: int, stop: int, *, node_data: bool = True) -> JetCollection:
        """Jets ``start:stop``, not validated.

        Args:
            start, stop: the jets.
            node_data: with the truth trees' node momenta and per-node extra columns (``False``:
                they may be left out, as clustering does not read them; see
                :meth:`jetastar.io.formats.ColumnReader.collection`).
        """
        if self._whole is not None:
            return io.jet_slice(self._whole, start, stop)
        w = self._window
        if w is None or not (w[0] <= start and stop <= w[1]) or (node_data and not w[3]):
            end = max(stop, min(self.n_jets, start + self.read_ahead))
            if self._columns is None:
                self._columns = columns(self.path)
            jets = self._columns.collection(start, end, node_data=node_data)
            self._window = w = (start, end, jets, node_data)
            self.reads += 1
        if (start, stop) == (w[0], w[1]):
            return w[2]
        return io.jet_slice(w[2], start - w[0], stop - w[0])

    def whole(self) -> JetCollection:
        """Every jet, not validated."""
        return self._whole if self._whole is not None else io.read(self.path, validate=False)

    def problems(self, start: int, stop: int) -> dict[int, str]:
        """None: an invalid jet's own message names its entry and field."""
        return {}

    def leaf_counts(self) -> np.ndarray:
        """Every jet's number of leaves, from the leaf offsets alone (blocks of
        :data:`COUNT_BLOCK` jets). Optional for a :class:`JetSource`: the runner sizes the
        chunks of costly algorithms with it (:func:`~jetastar.batch.config.estimated_costs`)."""
        if self._whole is not None:
            return np.asarray(self._whole.n_leaves, dtype=np.int64)
        out = np.zeros(self.n_jets, dtype=np.int64)
        with columns(self.path) as cols:
            for a in range(0, self.n_jets, COUNT_BLOCK):
                b = min(self.n_jets, a + COUNT_BLOCK)
                out[a:b] = np.diff(np.asarray(cols.read(["leaf_offsets"], a, b)["leaf_offsets"]))
        return out

    def largest_jet(self) -> int | None:
        """Leaves of the largest jet (from the leaf offsets; ``None`` without jets). Optional for
        a :class:`JetSource`: the runner warms the kernels up on jets no larger
        (:func:`~jetastar.clustering.warmup.warm_up_sizes`)."""
        counts = self.leaf_counts()
        return int(counts.max()) if counts.size else None

    def reading(self) -> dict[str, Any]:
        """Nothing: a jetastar file is read one way."""
        return {}

    def digest(self, jets: JetCollection | None = None) -> str:
        """:func:`~jetastar.batch.resume.jets_digest` of the jets (two files with the same jets
        have the same hash whatever their format); without ``jets``, read column by column
        (:func:`~jetastar.batch.resume.stream_jets_digest`: bounded memory)."""
        if jets is None and self._whole is None and self.n_jets:
            with columns(self.path) as cols:
                return stream_jets_digest(cols, self.n_jets)
        return jets_digest(self.whole() if jets is None else jets)

    def close(self) -> None:
        """Drop the jets read ahead and close the file."""
        self._window = None
        if self._columns is not None:
            self._columns.close()
            self._columns = None


class ParticleFileSource(ParticleReader):
    """A :class:`~jetastar.io.particle_files.ParticleReader` as a batch input: its content hash is of
    the file's bytes (its jets are only found while clustering) and its reading settings are
    recorded under ``"particles"``. Takes the reader's arguments; an entry range that holds none
    of the file's entries is an error (:class:`~jetastar.errors.FileFormatError`), not an empty
    output."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        n = self._reader.n_entries
        if self.start == self.stop and n > 0:
            self.close()
            raise FileFormatError(
                f"{self.path}: the entry range (--entry-start {kw.get('entry_start')}, "
                f"--entry-stop {kw.get('entry_stop')}) holds none of its {n} entries"
            )

    def leaf_counts(self) -> np.ndarray:
        """Every jet's number of particles (read once more, block by block, unless the jets
        were found in events, whose counting pass kept them); see
        :meth:`JetFileReader.leaf_counts`."""
        if self._constituent_offsets is not None:
            return np.diff(self._constituent_offsets)
        out = np.zeros(self.n_jets, dtype=np.int64)
        for a in range(0, self.n_jets, self.step_size):
            b = min(self.n_jets, a + self.step_size)
            out[a:b] = self.chunk(a, b, node_data=False).n_leaves
        return out

    def reading(self) -> dict[str, Any]:
        """``{"particles": settings}`` (:meth:`ParticleReader.settings`)."""
        return {"particles": self.settings()}

    def digest(self, jets: JetCollection | None = None) -> str:
        """:func:`~jetastar.batch.resume.file_digest` of the file (``jets`` is not needed)."""
        return file_digest(self.path)
