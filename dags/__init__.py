"""Juncture's Airflow DAGs: lake_crawl, lake_index, lake_rebuild (thin wiring; logic in spark_jobs)."""
