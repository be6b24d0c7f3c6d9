"""Iterative parameter mixing (Murawaki 2013, Alg. 6; McDonald et al. 2010): the training of every
model whose ``training`` is ``"mixing"``. Every epoch, each shard of the training documents runs
one shard-local epoch of the model's ``partial_fit`` from the epoch's base state, and the shards'
states are mixed (the mean, or the sum for counting models) into the next base. With one shard
the result equals serial training exactly.

Modules (each imported by its own name; this package re-exports nothing):

- :mod:`.train`: :func:`~.train.train_ipm`, the entry (settings, starting state, checkpoint
  resume) and the one choice of an engine (:func:`~.train.engine_for`, :func:`~.train.mixing_mode`);
- :mod:`.settings`: :class:`~.settings.MixingSettings` (what to train: epochs, shards, seed,
  mixing mode, exchange and checkpoint folders, ...), :class:`~.settings.Hooks` (the callbacks),
  :func:`~.settings.resolve_shards`;
- :mod:`.engine`: the :class:`~.engine.Engine` interface, :class:`~.engine.ModelSpec` and the
  epoch record; its implementations :mod:`.jobs` (one Spark job per epoch: broadcast,
  ``mapInArrow``, ``treeAggregate``), :mod:`.barrier` (every epoch in one barrier stage, deltas
  exchanged through files) and :mod:`.driver` (rows read in the driver, shards in threads);
- :mod:`.mix`: the mixing rule every engine runs (:func:`~.mix.shard_epoch`, :func:`~.mix.mix`);
- :mod:`.exchange`: barrier mixing's exchange folder and shard files; :mod:`.checkpoints`: the
  per-epoch checkpoints; :mod:`.selection`: the epochs chosen on validation bands
  (:func:`~.selection.select_epochs`, :func:`~.selection.validation_split`).

The row-sparse deltas the engines ship are :mod:`sparkhc.spark.deltas`.
"""
