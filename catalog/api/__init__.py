"""The HTTP lookup API (FastAPI): `create_app(settings)`; `juncture serve` runs it with uvicorn."""
