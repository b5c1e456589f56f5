"""What the e2e and fleet tiers share: Ferry as real processes, record ledgers, the schema registry over HTTP.

No test module imports another; what two of them need lives here.
"""
