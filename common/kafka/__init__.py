"""Kafka: the one place that builds Kafka clients, and confluent-kafka's errors unwrapped once."""
