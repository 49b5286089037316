-- The catalog database beside Airflow's metadata database (POSTGRES_DB creates `airflow`).
CREATE DATABASE catalog OWNER juncture;
