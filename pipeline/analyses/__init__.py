"""The paper's evidence on any model: random baselines, the pairing law, spectral geometry, type robustness and
clusters, computed from what the store holds (and, for the spectra and baselines, from weights).

Modules, each one thing:

==========================  ==============================================================================
``types``                   the spectral type rule (I₊, II, I₋), the paper's radius rule, their sensitivity
``spectra``                 sigma(T), |eig L| and sigma(L) of a head from its reduced core
``pairing_law``             the beta law of P, the bound through rho, the rho histogram, the balance count
``goodness_of_fit``         generalised gamma against lognormal on a head's positive spectra (AIC, KS)
``spectral_geometry``       sigma(T) against sqrt(lambda_+ lambda_-); effective-rank counts
``clusters``                k-means of the unit spectra of S, silhouette, adjusted Rand index
``iid_heads``               the i.i.d. Gaussian baseline, one layer at a time
``init_heads``              the library-initialisation baseline, one attention module at a time
``baselines``               the baseline kinds, a config for a registered shape, a baseline's values at d = 0
``head_data``               one model's per-head values at d = 0, read from the store
``report``                  every summary of one model as a dict and as text
``cli``                     the ``report`` and ``baseline`` commands' parsers; the report's command
==========================  ==============================================================================

Importing this package or ``types`` needs numpy only; the fits and the report need scipy, the baselines torch and
transformers (imported where used).
"""
