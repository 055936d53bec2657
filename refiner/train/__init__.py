"""DAPO (and SFT warm-start) launch for the refiner on verl 0.9.1, one job per module.

The chain a launch goes through, in import order (each module imports only the ones above it):

- :mod:`~refiner.train.errors` -- :class:`TrainConfigError`, the one error every step raises.
- :mod:`~refiner.train.overrides` -- Hydra's override grammar: rendering values, an ordered override map, reading a
  value back from an override list.
- :mod:`~refiner.train.inputs` -- the checks on what a launch reads: the data builder's parquet files (columns,
  prompts, ground truth), the model path, the reward function, the logger's packages.
- :mod:`~refiner.train.recipe` -- a recipe file (``configs/verl/*.yaml``, ``configs/sft/*.yaml``): a map of Hydra
  overrides for one of verl's own trainer configs, plus named switches and hardware profiles; and
  :func:`plan_overrides` (recipe + switch choices + profile + paths + the user's ``key=value`` -> override list).
- :mod:`~refiner.train.verl_config` -- composition against the installed verl config and verl's own validation.
- :mod:`~refiner.train.sft` -- RL rows -> verl SFT rows (the correct calls as the assistant turn).
- :mod:`~refiner.train.launch` -- the commands (``main_ppo``, ``ray job submit``, ``torchrun``), the launch record,
  and :func:`plan_dapo` / :func:`plan_sft`, which run every step above and return what to start.
"""
