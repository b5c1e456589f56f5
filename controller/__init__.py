"""Ferry controller: leader election, ideal state, assignment, REST API."""
