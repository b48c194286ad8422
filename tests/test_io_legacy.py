"""Torch-free import of the reference generator's pickles, and refusal of anything else."""

from __future__ import annotations

import io
import os
import pickle
import sys

import numpy as np
import pytest
from helpers.refdata import DATA

from jetastar import io as jio
from jetastar.ginkgo import node_log_likelihoods, split_log_likelihood_t
from jetastar.ginkgo.kernels import t_of
from jetastar.io import FileFormatError, UnsafePickleError
from jetastar.io.legacy import RestrictedUnpickler, load_legacy_pickle

W_SAMPLE = DATA / "legacy_ginkgo_W_sample.pkl"
UPSTREAM = DATA / "legacy_ginkgo_upstream_example.pkl"


def _per_jet(collection, name, i):
    a, b = collection.node_offsets[i], collection.node_offsets[i + 1]
    return collection.node_columns[name][a:b]


def test_w_sample_imports_without_torch():
    had_torch = "torch" in sys.modules
    jets = jio.read(W_SAMPLE)
    if not had_torch:
        assert "torch" not in sys.modules
    assert len(jets) == 12
    raw = load_legacy_pickle(W_SAMPLE)
    for i, d in enumerate(raw):
        jet = jets[i]
        assert jet.jet_type == "W" and jet.seed == d["seed"]
        # tensors became numpy arrays with the pickled float32 values
        assert isinstance(d["Lambda"], np.ndarray) and d["Lambda"].dtype == np.float32
        assert d["Lambda"].shape == () and float(d["Lambda"]) == 1.5
        assert float(d["LambdaRoot"]) == 3.0 and float(d["Delta_0"]) == 6400.0
        p = jet.params
        assert (p.lam, p.lam_root, p.t_cut, p.t_root, p.m_hard) == (1.5, 3.0, 16.0, 6400.0, 80.0)
        assert np.array_equal(jet.leaves, d["leaves"])
        assert np.array_equal(jet.node_momenta, d["content"])
        assert np.array_equal(jet.truth.children, d["tree"])
        assert np.array_equal(jet.leaves, d["content"][d["tree"][:, 0] == -1])
        assert np.array_equal(_per_jet(jets, "deltas", i), d["deltas"])
        assert _per_jet(jets, "deltas", i)[0] == 6400.0
        assert np.array_equal(_per_jet(jets, "logLH", i), d["logLH"])
        draws = _per_jet(jets, "draws", i)
        assert np.isnan(draws[0]) and d["draws"][0] is None
        assert np.array_equal(draws[1:], [float(x) for x in d["draws"][1:]])


def test_w_sample_values_reproduce_the_pickled_likelihood():
    """The pickle's per-node logLH (reference HEAD likelihood on the stored node 4-vectors, float32
    rates) equals ours computed from the imported tree, content and parameters."""
    jets = jio.read(W_SAMPLE)
    for i in range(len(jets)):
        ours = node_log_likelihoods(jets[i], use_node_momenta=True)
        ref = _per_jet(jets, "logLH", i)
        assert np.allclose(ours, ref, rtol=2e-6, atol=1e-6)


def test_upstream_example_legacy_likelihood_with_nominal_deltas():
    """The upstream example's logLH is the legacy likelihood fed with the nominal ``deltas``."""
    jets = jio.import_legacy_pickle(UPSTREAM)
    assert len(jets) == 5
    assert {str(t) for t in jets.jet_type} == {"QCD"}
    checked = 0
    for i in range(len(jets)):
        jet = jets[i]
        assert jet.params.t_cut == 6.25 and jet.params.lam_root == 1.5
        deltas = _per_jet(jets, "deltas", i)
        ref = _per_jet(jets, "logLH", i)
        content = jet.node_momenta
        for k, (left, right) in enumerate(jet.truth.children):
            if left < 0:
                assert ref[k] == 0.0
                continue
            lam = jet.params.lam_root if k == jet.truth.root else jet.params.lam
            value = split_log_likelihood_t(
                deltas[left], deltas[right], t_of(*(content[left] + content[right])),
                jet.params.t_cut, lam, "legacy",
            )
            assert abs(value - ref[k]) <= 2e-6 * max(1.0, abs(ref[k]))
            checked += 1
    assert checked > 10


def test_draws_are_consistent_with_deltas():
    """Each internal child's draw is t/t_parent (drawn first) or t/(√tP − √t_sibling)² (second);
    a check that tree, deltas, draws and content were decoded consistently."""
    for path in (W_SAMPLE, UPSTREAM):
        jets = jio.read(path)
        for i in range(len(jets)):
            ch = jets[i].truth.children
            content = jets[i].node_momenta
            deltas, draws = _per_jet(jets, "deltas", i), _per_jet(jets, "draws", i)
            for p, (a, b) in enumerate(ch):
                if a < 0:
                    continue
                for c, s in ((a, b), (b, a)):
                    if deltas[c] == 0:
                        continue
                    first = deltas[c] / deltas[p]
                    # a leaf sibling's sampled t is not in deltas (0): use its 4-vector's mass
                    t_sib = deltas[s] if ch[s][0] >= 0 else max(t_of(*content[s]), 0.0)
                    second = deltas[c] / (np.sqrt(deltas[p]) - np.sqrt(t_sib)) ** 2
                    assert min(abs(first - draws[c]), abs(second - draws[c])) < 1e-4 * draws[c]


def test_legacy_to_hdf5_keeps_nominal_values(tmp_path):
    jets = jio.read(UPSTREAM)
    path = tmp_path / "upstream.h5"
    jio.write(path, jets)
    back = jio.read(path)
    for k in ("deltas", "logLH", "draws"):
        assert np.array_equal(back.node_columns[k], jets.node_columns[k], equal_nan=True)
    info = jio.file_info(UPSTREAM)
    assert info["format"] == "legacy" and info["n_jets"] == 5 and info["has_truth"] == 5


class _Evil:
    def __reduce__(self):
        return (os.system, ("touch /tmp/jetastar-pwned",))


def test_refuses_other_globals(tmp_path):
    evil = tmp_path / "evil.pkl"
    evil.write_bytes(pickle.dumps([_Evil()], protocol=2))
    marker = "/tmp/jetastar-pwned"
    if os.path.exists(marker):
        os.remove(marker)
    with pytest.raises(UnsafePickleError, match=r"evil\.pkl: refusing global '(posix|os)\.system'"):
        jio.read(evil)
    assert not os.path.exists(marker)
    with pytest.raises(UnsafePickleError, match=r"refusing global 'builtins\.eval'"):
        RestrictedUnpickler(io.BytesIO(pickle.dumps(eval))).load()
    # _codecs.encode is allowed only for latin1 text -> bytes
    bad_codec = (b"\x80\x02c_codecs\nencode\nq\x00X\x03\x00\x00\x00abcq\x01X\x06\x00\x00\x00"
                 b"rot_13q\x02\x86q\x03Rq\x04.")
    with pytest.raises(UnsafePickleError, match="only allowed for latin1"):
        RestrictedUnpickler(io.BytesIO(bad_codec)).load()
    # plain data still loads
    assert RestrictedUnpickler(io.BytesIO(pickle.dumps({"a": [1.5, None]}))).load() == {
        "a": [1.5, None]}


def test_bad_pickles(tmp_path):
    data = W_SAMPLE.read_bytes()
    trunc = tmp_path / "trunc.pkl"
    trunc.write_bytes(data[: len(data) // 3])
    with pytest.raises(FileFormatError, match=r"trunc\.pkl: not a readable legacy Ginkgo pickle"):
        jio.read(trunc)
    notjets = tmp_path / "list.pkl"
    notjets.write_bytes(pickle.dumps([1, 2, 3], protocol=2))
    with pytest.raises(FileFormatError, match="not a list of Ginkgo jet dictionaries"):
        jio.read(notjets)
    raw = load_legacy_pickle(W_SAMPLE)
    raw[3]["leaves"] = raw[3]["leaves"].copy()
    raw[3]["leaves"][1, 0] = np.nan
    for d in raw:
        for k in ("Lambda", "LambdaRoot", "Delta_0"):
            d[k] = float(d[k])
        d["draws"] = [None if v is None else float(v) for v in d["draws"]]
    badjet = tmp_path / "badjet.pkl"
    badjet.write_bytes(pickle.dumps(raw, protocol=2))
    with pytest.raises(FileFormatError,
                       match=r"badjet\.pkl: entry 3: jet 3, field 'leaves': leaf 1 has a "
                             r"non-finite E") as exc:
        jio.read(badjet)
    assert "\n" not in str(exc.value)
    with pytest.raises(FileNotFoundError):
        jio.read(tmp_path / "missing.pkl")


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_the_pickle_protocol_does_not_matter(tmp_path, protocol):
    """A legacy-style jet dict of numpy arrays re-saved with protocol 5 was refused as unsafe
    ("refusing global 'numpy._core.numeric._frombuffer'"): protocol 5 pickles arrays that way."""
    raw = load_legacy_pickle(W_SAMPLE)[:3]
    path = tmp_path / f"p{protocol}.pkl"
    path.write_bytes(pickle.dumps(raw, protocol=protocol))
    jets, ref = jio.read(path), jio.read(W_SAMPLE)
    assert len(jets) == 3
    for i in range(3):
        assert np.array_equal(jets[i].leaves, ref[i].leaves)
        assert np.array_equal(jets[i].truth.children, ref[i].truth.children)
    back = RestrictedUnpickler(io.BytesIO(pickle.dumps(np.arange(6.0).reshape(2, 3).T, protocol=5)))
    assert np.array_equal(back.load(), np.arange(6.0).reshape(2, 3).T)
