"""Engine-neutral checkpoint and two-phase-commit core. Imports neither Kafka nor Spark."""
