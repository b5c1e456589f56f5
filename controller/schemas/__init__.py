"""Schema distribution: the registry client, the distributor and `ferry schemas` (its pure core is
``common.core.schemas``)."""
