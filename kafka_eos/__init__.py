"""kafka-eos: exactly-once Kafka -> Spark -> Kafka pipelines for PySpark.

The package holds the command line and the tooling that composes the lower layers:
``checkpoint`` (engine-neutral two-phase-commit core) and ``connectors`` (Kafka and Spark).
"""

__version__ = "0.1.0"
