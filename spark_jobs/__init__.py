"""Spark jobs: one module per job, each a pure `run(spark, settings, batch)` plus `main(argv)` for
spark-submit, and `lake_store`, the only module that reads or writes Delta tables."""
