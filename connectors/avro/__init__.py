"""Avro for the Kafka source and sink, engine-neutral: Arrow in and out, no Spark.

* :mod:`~connectors.avro.schema` loads a schema and derives the Arrow type Spark reads;
* :mod:`~connectors.avro.wire` frames and unframes the Confluent wire format;
* :mod:`~connectors.avro.registry` asks a Confluent schema registry for schemas and ids;
* :mod:`~connectors.avro.codec` decodes Kafka values into one Arrow column, and encodes an
  Arrow column into Kafka values.
"""
