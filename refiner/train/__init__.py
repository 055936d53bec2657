"""DAPO (and SFT warm-start) launches of the refiner on verl 0.9.1: errors -> overrides -> inputs -> recipe ->
verl_config -> launch, each module importing only the ones before it (see docs/training.md)."""
