"""What an operator checks before Ferry runs: a config's every problem (``ferry check``), the Kafka
ACLs the config needs (``ferry acls``), and whether a cluster grants them."""
