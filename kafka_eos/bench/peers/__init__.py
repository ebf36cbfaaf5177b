"""The jobs of the contenders that are not Spark, run as scripts by their own virtualenvs'
interpreters (``kafka_eos.bench.peer_venv``): they import nothing from kafka-eos, and nothing
imports them."""
