"""Cesa-Bianchi, Gentile, Tironi, Zaniboni (2004): the Table 1 experiment (:mod:`.experiment`).

The models live in :mod:`sparkhc.models.cesa_bianchi`.
"""
