"""``python -m jetastar``: generate 20 QCD and 20 W jets and print their truth log-likelihoods."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``jetastar`` command."""
    from .ginkgo import ShowerParams, generate, log_likelihood

    print(f"{'type':>4} {'jet':>4} {'leaves':>6} {'logL symmetric':>15} {'logL legacy':>12}")
    for params in (ShowerParams.qcd(), ShowerParams.w()):
        for jet in generate(20, params, seed=1):
            sym = log_likelihood(jet)
            leg = log_likelihood(jet, likelihood="legacy")
            print(f"{jet.jet_type:>4} {jet.jet_id:>4} {jet.n_leaves:>6} {sym:>15.4f} {leg:>12.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
