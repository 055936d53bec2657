"""Training-data generation for the refiner: sources -> normalised samples -> corruptors -> verl parquet."""
