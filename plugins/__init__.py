"""Portal hooks (Socrata, CKAN), the lake-folder lister, the polite HTTP client and the local portal:
plain Python usable without Airflow. `airflow_plugin.py` mounts the catalog view in Airflow."""
