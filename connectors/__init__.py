"""Adapters of Kafka (confluent-kafka, kafka-python) and Spark (Python Data Source API)
onto the engine-neutral ``checkpoint`` core."""
