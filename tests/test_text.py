"""Text columns between numpy and awkward (:mod:`jetastar._text`): every value comes back as the
``str`` it was, runs and near-runs of equal strings included."""

from __future__ import annotations

import numpy as np
import pytest

from jetastar._text import Repeated, awkward_strings, str_array


@pytest.mark.parametrize("values", [
    ["ok", "budget", "", "é✓ x", "ok", "a" * 10],
    ["x" * 5000] * 1000 + ["y"],  # more than one batch of compared bytes
    ["x" * 5000] * 900 + ["x" * 4999 + "y"] + ["x" * 5000] * 2,
    [1, None, "z"],  # not strings: str of each
    [1, True, 1.0, "1", 1],  # equal as keys, different as text
    ["ab", "ba", "ab", "ab", "", "", "a\x00", "a\x00", "a", "ü", "ü"],  # runs and near-runs
    ["", ""],
    [],
])
def test_string_branches_hold_the_str_of_each_value(values):
    text = [str(v) for v in values]
    assert str_array(awkward_strings(np.array(values, dtype=object))).tolist() == text
    assert str_array(awkward_strings(values)).tolist() == text
    assert str_array(awkward_strings(iter(values))).tolist() == text
    assert str_array(awkward_strings(values)[1:]).tolist() == text[1:]  # offsets not from 0
    for v in values[:3]:
        assert str_array(awkward_strings(Repeated(v, 4))).tolist() == [str(v)] * 4
    assert str_array(awkward_strings(Repeated("x", 0))).tolist() == []
    assert str_array(awkward_strings(values)).dtype == object


@pytest.mark.parametrize("block_bytes", [1 << 22, 7])
def test_runs_of_lengths_and_blocks_of_any_size(monkeypatch, block_bytes):
    """Both ways of finding equal neighbours (a 2-D block per run of one length, or gathered
    bytes when the lengths change often) and blocks cut anywhere give every string back."""
    import jetastar._text as text

    monkeypatch.setattr(text, "_BLOCK_BYTES", block_bytes)
    rng = np.random.default_rng(5)
    words = ["", "a", "b", "ab", "ba", "abc", "abd", "é", "{\"k\": 1}", "{\"k\": 2}"]
    few_runs = [w for w in ("abc", "abd", "abc", "", "ab") for _ in range(40)]
    many_runs = [words[k] for k in rng.integers(0, len(words), 3000)]
    for values in (few_runs, many_runs, few_runs + many_runs):
        assert str_array(awkward_strings(values)).tolist() == values
