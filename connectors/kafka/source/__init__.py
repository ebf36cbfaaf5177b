"""The source's Kafka side, driver to executor: ``options`` (parsed once), ``client`` (the
consumer and the admin), ``offsets`` (offset JSON), ``offset_reader`` (the driver's partition
and offset lookups), ``planner`` (the driver's planning of a read: a stream's start, each
batch's end, a batch's ranges), ``lag`` (the pinned last stable offset), ``admission`` (rate
limits),
``ranges`` (planning and splitting), ``range_reader`` (an executor reading one range into Arrow
batches) and ``errors``. The Spark adapter is ``connectors.spark.source``.
"""
